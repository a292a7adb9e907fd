"""``execution=driver``'s reader without Spark: its calls made as Spark's planner runner makes
them (``latestOffset``, ``partitions``, ``getCache``, ``commit``; ``read`` of the one partition
only when nothing is cached). Each batch's panes equal ``execution=executors``'; nothing is
written before Spark would have logged the offset (``partitions``), so a batch stepped for an
offset Spark never logged leaves no snapshot and is stepped again from the same state; a new
process replays a logged batch in ``read``, with the same panes."""

from __future__ import annotations

import json
import os

from spark_windowing.datasource.source.driver import DriverStreamReader
from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
from spark_windowing.datasource.storage import layout
from spark_windowing.state.segments import manifest_uri
from tests.plugin.test_rescale_reader import _options as rescale_options


def _options(state: str, execution: str) -> dict[str, str]:
    """The rescale test's query (session windows, early and late panes, retractions, late events),
    two shards, with a late-data table."""
    return {**rescale_options(state, 2), "execution": execution,
            "lateDataPath": os.path.join(state, "..", f"late-{execution}")}


def _canonical(batches) -> list[str]:
    return sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_time"))
                  for b in batches for r in b.to_pylist())


def _snapshot_written(state: str, seq: int) -> bool:
    return any(os.path.exists(manifest_uri(layout.store_root(state, s), seq)) for s in range(2))


def _reader(cls, state: str, execution: str):
    options = _options(state, execution)
    return cls(options, stream_schema(options))


def test_driver_reader_gives_the_panes_of_executors_and_writes_only_logged_batches(tmp_path):
    plain_state, driver_state = str(tmp_path / "plain"), str(tmp_path / "driver")
    plain = _reader(WindowedStreamReader, plain_state, "executors")
    driver = _reader(DriverStreamReader, driver_state, "driver")
    start_p, start_d = plain.initialOffset(), driver.initialOffset()
    seen: list[str] = []
    for _ in range(8):
        end_p = plain.latestOffset(start_p, plain.getDefaultReadLimit())
        expected = _canonical(b for p in plain.partitions(start_p, end_p) for b in plain.read(p))
        plain.commit(end_p)

        end_d = driver.latestOffset(start_d, driver.getDefaultReadLimit())
        assert not _snapshot_written(driver_state, end_d["seq"])     # stepped, nothing written
        end_d = driver.latestOffset(start_d, driver.getDefaultReadLimit())   # Spark did not log it: again
        assert not _snapshot_written(driver_state, end_d["seq"])
        start_j, end_j = json.loads(json.dumps(start_d)), json.loads(json.dumps(end_d))  # as Spark hands them
        [partition] = driver.partitions(start_j, end_j)
        assert _snapshot_written(driver_state, end_d["seq"])         # logged: written
        assert _canonical(driver.getCache(start_j, end_j)) == expected
        driver.commit(end_j)
        start_p, start_d = end_p, end_d
        seen += expected
    assert len(seen) > 100 and any("RETRACTION" in r for r in seen)


def test_a_new_process_replays_a_logged_batch_in_read(tmp_path):
    state = str(tmp_path / "state")
    driver = _reader(DriverStreamReader, state, "driver")
    start = driver.initialOffset()
    for _ in range(3):
        end = driver.latestOffset(start, driver.getDefaultReadLimit())
        driver.partitions(start, end)
        driver.commit(end)
        start = end
    end = driver.latestOffset(start, driver.getDefaultReadLimit())
    driver.partitions(start, end)
    first = _canonical(driver.getCache(start, end))
    assert first
    restarted = _reader(DriverStreamReader, state, "driver")   # a new process: nothing cached
    [partition] = restarted.partitions(start, end)
    assert restarted.getCache(start, end) is None              # Spark's task then calls read
    assert _canonical(restarted.read(partition)) == first


def test_the_execution_option_is_checked_at_load_and_keeps_the_schema_metadata(tmp_path):
    import pytest

    from spark_windowing.datasource.source.parse import parse_options
    from spark_windowing.errors import OptionError
    base = _options(str(tmp_path / "state"), "executors")
    with pytest.raises(OptionError) as e:
        parse_options({**base, "execution": "drivr"})
    assert (e.value.option, e.value.value) == ("execution", "drivr") and "auto, executors, driver" in str(e.value)
    assert parse_options({**base, "execution": "Driver"}).execution == "driver"
    # every route's panes carry the spec in window_start's metadata; the driver route hands Spark
    # its Arrow batches with it (with_spark_metadata), as Spark compares them with the schema
    for execution in ("executors", "driver", "auto"):
        assert stream_schema({**base, "execution": execution})["window_start"].metadata


def test_the_driver_routes_batches_carry_the_spark_metadata_where_spark_reads_it():
    """``ArrowUtils`` reads a column's Spark metadata from its Arrow field's
    ``SPARK::metadata::json``; columns without metadata are left as they are, and nothing is copied."""
    import json

    import pyarrow as pa
    from pyspark.sql.types import LongType, StructField, StructType

    from spark_windowing.datasource.source.driver import SPARK_METADATA_KEY, with_spark_metadata
    schema = StructType([StructField("a", LongType(), metadata={"spec": {"window": "tumbling(1 minute)"}}),
                         StructField("b", LongType())])
    batch = pa.record_batch({"a": [1, 2], "b": [3, 4]})
    out = with_spark_metadata(batch, schema)
    assert json.loads(out.schema.field("a").metadata[SPARK_METADATA_KEY]) == {"spec": {"window": "tumbling(1 minute)"}}
    assert out.schema.field("b").metadata is None and out.column(0).buffers()[1].address == batch.column(0).buffers()[1].address


def test_the_reader_pickles_without_its_step_thread_and_batch(tmp_path):
    """Spark pickles the reader for a replaying task's read(): the thread and the batch in memory
    stay behind, and the copy steps batches of its own."""
    import pickle
    reader = _reader(DriverStreamReader, str(tmp_path / "state"), "driver")
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._batch is None and reader._batch is not None
    again = copy.latestOffset(start, copy.getDefaultReadLimit())
    assert (again["seq"], again["up"]) == (end["seq"], end["up"]) and copy._batch is not None


def test_the_driver_reads_a_batch_once_for_all_its_shards(tmp_path):
    """Every shard of an upstream that gives each shard the whole batch (the generator, files)
    keeps its own keys of it: on the driver, one process steps them all, so it reads the batch
    once; a task of the executors route reads it for its shard."""
    driver = _reader(DriverStreamReader, str(tmp_path / "driver"), "driver")
    plain = _reader(WindowedStreamReader, str(tmp_path / "plain"), "executors")
    reads: list[str] = []
    for name, reader in (("driver", driver.inner), ("executors", plain)):
        real = reader.up.read
        reader.up.read = lambda planned, columns, real=real, name=name: reads.append(name) or real(planned, columns)
    start_d, start_p = driver.initialOffset(), plain.initialOffset()
    for batch in range(3):
        end_d = driver.latestOffset(start_d, driver.getDefaultReadLimit())
        driver.partitions(start_d, end_d)
        panes = _canonical(driver.getCache(start_d, end_d))
        end_p = plain.latestOffset(start_p, plain.getDefaultReadLimit())
        assert panes == _canonical(b for p in plain.partitions(start_p, end_p) for b in plain.read(p))
        driver.commit(end_d)
        plain.commit(end_p)
        start_d, start_p = end_d, end_p
        assert (reads.count("driver"), reads.count("executors")) == (batch + 1, 2 * (batch + 1))
    assert driver.inner._shared_read is None        # nothing kept after the step
    import pickle
    del plain.up.read                                # the counting wrapper does not pickle
    with plain.one_read_per_batch():                 # Spark pickles the reader for its tasks:
        plain._shared_read.update(planned=object(), rows=(object(), None))   # without what it holds
        assert plain._shared_read and pickle.loads(pickle.dumps(plain))._shared_read is None
