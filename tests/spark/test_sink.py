"""The pane sink: three Delta tables, ``current`` semantics, schema checks, exactly once.

Spark tests run test_panes (tests/spark/pane_source.py) -> writeStream.format("windowed") and
compare the Delta tables with the source's model (``expected_tables``). The "direct" tests drive
``PaneStreamWriter`` without a stream (write() as a task would, commit() as the driver would) to
reach exact crash points: a replayed batch, a crash between two table commits, an abort.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

import pane_source
from spark_windowing.datasource.tables.delta import file_stats
from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.sink.commit import BatchCommit
from spark_windowing.datasource.sink.settings import PaneFilesMessage, SinkOptions
from spark_windowing.datasource.sink.writer import PaneStreamWriter
from pane_source import ARROW_SCHEMA, expected_tables, simulate
from sink_helpers import TABLE_NAMES, committed_files, data_files, rows, run_pipeline, table_rows
from spark_windowing.errors import OptionError

SPARK_SCHEMA = arrow_to_spark_schema(ARROW_SCHEMA)


@pytest.fixture(scope="module")
def panes_spark(spark):
    pane_source.register(spark)
    return spark


def model_rows(batches: int, keys: int) -> dict[str, list[tuple]]:
    return {t: rows(v) for t, v in expected_tables(batches, keys).items()}


def versions(path: Path) -> dict[str, int]:
    return {t: DeltaTable(str(path / t)).version() for t in TABLE_NAMES}


# --------------------------------------------------------------------------- through Spark

@pytest.mark.spark
def test_three_tables_hold_triggers_retractions_and_current(panes_spark, tmp_path):
    run_pipeline(panes_spark, tmp_path / "panes", tmp_path / "chk", batches=8, keys=4)

    assert table_rows(tmp_path / "panes") == model_rows(8, 4)


@pytest.mark.spark
def test_current_deletes_a_window_whose_only_row_in_a_batch_is_a_retraction(panes_spark, tmp_path):
    # s0:  batch 0  T0 [00:00, 00:30)        -> current has [00:00, 00:30)
    #      batch 1  R0 [00:00, 00:30) only   -> its current row is deleted
    #               T0 [00:00, 01:00)        -> the grown session window is upserted
    run_pipeline(panes_spark, tmp_path / "panes", tmp_path / "chk", batches=2, keys=2)

    current = {(r[0], r[1], r[2]): r for r in rows(pane_source.expected_tables(2, 2)["current"])}
    got = {(r[0], r[1], r[2]): r for r in table_rows(tmp_path / "panes")["current"]}
    start = int(pane_source.EPOCH.timestamp() * 1_000_000)
    assert ("s0", start, start + 30_000_000) not in got
    assert got[("s0", start, start + 60_000_000)][5:8] == ("TRIGGER", "EARLY", 0)
    assert got == current


@pytest.mark.spark
def test_retraction_and_trigger_of_one_window_in_different_tasks(panes_spark, tmp_path):
    # scatter deals rows to tasks round-robin: a window's RETRACTION and its new TRIGGER often land
    # in different tasks; only the driver can tell the retraction is not a delete.
    run_pipeline(panes_spark, tmp_path / "panes", tmp_path / "chk", batches=6, keys=4,
                 source_options={"scatter": "true", "shards": "3"})

    assert table_rows(tmp_path / "panes") == model_rows(6, 4)


@pytest.mark.spark
def test_replayed_batch_is_skipped(panes_spark, tmp_path):
    path, chk = tmp_path / "panes", tmp_path / "chk"
    run_pipeline(panes_spark, path, chk, batches=3, keys=3)
    before, files_before = versions(path), {t: data_files(path, t) for t in TABLE_NAMES}
    last_commit = max((chk / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last_commit.unlink()                      # Spark forgets it committed the last batch
    (chk / "commits" / f".{last_commit.name}.crc").unlink(missing_ok=True)

    query = run_pipeline(panes_spark, path, chk, batches=3, keys=3)

    assert query.recentProgress[0]["batchId"] == int(last_commit.name)     # it was run again
    assert last_commit.exists()
    assert versions(path) == before
    assert {t: data_files(path, t) for t in TABLE_NAMES} == files_before   # replay's files removed
    assert table_rows(path) == model_rows(3, 3)


@pytest.mark.spark
def test_rejects_a_dataframe_without_the_pane_schema_before_writing(panes_spark, tmp_path):
    query = (panes_spark.readStream.format("rate").option("rowsPerSecond", "1").load()
             .writeStream.format("windowed").option("path", str(tmp_path / "panes"))
             .option("checkpointLocation", str(tmp_path / "chk")).start())

    with pytest.raises(Exception, match="writes pane rows only: not a pane schema: missing column"):
        query.awaitTermination(60)
    assert not (tmp_path / "panes").exists()


@pytest.mark.spark
def test_rejects_another_pane_schema_for_existing_tables(panes_spark, tmp_path):
    path = tmp_path / "panes"
    PaneStreamWriter({"path": str(path)}, SPARK_SCHEMA, False)       # creates the tables

    with pytest.raises(Exception, match="holds another pane schema"):
        run_pipeline(panes_spark, path, tmp_path / "chk", batches=2,
                     transform=lambda df: df.withColumnRenamed("total", "sum_total"))
    assert versions(path) == {t: 0 for t in TABLE_NAMES}
    assert all(not data_files(path, t) for t in TABLE_NAMES)


# --------------------------------------------------------------------------- direct (no stream)

def _batch_rows(batch_index: int, keys: int = 3) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(pane_source.COLUMNS, r)) for r in simulate(batch_index + 1, keys)[-1]],
                                schema=ARROW_SCHEMA)


def _writer(path: Path, **options: str) -> PaneStreamWriter:
    return PaneStreamWriter({"path": str(path), "appId": "test-app", **options}, SPARK_SCHEMA, False)


def _write(writer: PaneStreamWriter, table: pa.Table) -> PaneFilesMessage:
    return writer.write(iter(table.to_batches(max_chunksize=4)))


def test_missing_path_is_an_option_error(tmp_path):
    with pytest.raises(OptionError, match="invalid option 'path' = None: required"):
        PaneStreamWriter({}, SPARK_SCHEMA, False)


def test_bad_max_rows_per_file_is_an_option_error(tmp_path):
    with pytest.raises(OptionError, match="'maxRowsPerFile' = '0'.*Accepted: a positive integer"):
        SinkOptions.parse({"path": str(tmp_path), "maxrowsperfile": "0"})


def test_commit_of_an_already_committed_batch_writes_nothing(tmp_path):
    writer = _writer(tmp_path)
    writer.commit([_write(writer, _batch_rows(0))], 0)
    before, contents = versions(tmp_path), table_rows(tmp_path)

    replay = _write(writer, _batch_rows(0))                  # the replay writes new files...
    assert all((tmp_path / f.table / f.path).exists() for f in replay.files)
    writer.commit([replay], 0)                               # ...that the commit skips and removes

    assert versions(tmp_path) == before
    assert table_rows(tmp_path) == contents
    assert not any((tmp_path / f.table / f.path).exists() for f in replay.files)


def test_crash_between_table_commits_then_replay(tmp_path):
    writer = _writer(tmp_path)
    for b in range(2):
        writer.commit([_write(writer, _batch_rows(b))], b)
    first = _write(writer, _batch_rows(2))
    # the driver dies right after committing 'triggers' for batch 2
    BatchCommit(writer.options, writer.schema, [first], 2, "test-app")._append(
        "triggers", [f for f in first.files if f.table == "triggers"])

    writer.commit([_write(writer, _batch_rows(2))], 2)      # Spark replays batch 2

    assert table_rows(tmp_path) == model_rows(3, 3)
    assert {DeltaTable(str(tmp_path / t)).transaction_version("test-app") for t in TABLE_NAMES} == {2}


def test_retraction_in_one_task_and_trigger_in_another(tmp_path):
    writer = _writer(tmp_path)
    writer.commit([_write(writer, _batch_rows(0))], 0)
    batch = _batch_rows(1)
    is_retraction = pc.equal(batch["kind"], "RETRACTION")
    messages = [_write(writer, batch.filter(is_retraction)),
                _write(writer, batch.filter(pc.invert(is_retraction)))]
    assert messages[0].deletes                               # task 0 saw retractions only

    writer.commit(messages, 1)

    assert table_rows(tmp_path) == model_rows(2, 3)


@pytest.mark.parametrize("eager_bytes", [0, 1 << 40], ids=["streamed", "in-memory"])
def test_both_merge_modes_give_the_models_current(tmp_path, monkeypatch, eager_bytes):
    """The MERGE into ``current`` reads small batches into memory and streams large ones
    (``EAGER_MERGE_BYTES``); either way the tables equal the model, retractions included."""
    from spark_windowing.datasource.sink import commit
    monkeypatch.setattr(commit, "EAGER_MERGE_BYTES", eager_bytes)
    writer = _writer(tmp_path)
    for b in range(4):
        writer.commit([_write(writer, _batch_rows(b, keys=5))], b)

    assert table_rows(tmp_path) == model_rows(4, 5)


@pytest.mark.parametrize("options, warned", [
    ({"trigger": "AfterWatermark(early=AfterCount(5))"}, True),
    ({"allowedLateness": "1 minute"}, True),
    ({}, False),                                              # fires once: current is the result
    ({"trigger": "AfterWatermark(early=AfterCount(5))", "accumulationMode": "accumulating"}, False),
])
def test_discarding_panes_that_fire_more_than_once_warn_about_current(tmp_path, caplog, options, warned):
    from spark_windowing.datasource.source.reader import stream_schema
    schema = stream_schema({"source": "generator", "window": "tumbling(10 seconds)", "aggregate": "count(*) AS n",
                            "timestampColumn": "event_time", "keyColumns": "user_id",
                            "stateLocation": str(tmp_path / "state"), **options})
    with caplog.at_level("WARNING", logger="spark_windowing.datasource.sink.writer"):
        PaneStreamWriter({"path": str(tmp_path / "panes")}, schema, False)
    said = [r.getMessage() for r in caplog.records if "accumulationMode=discarding" in r.getMessage()]
    assert bool(said) == warned, said
    if warned:
        assert "'current' keeps the latest pane, the last increment" in said[0]


def test_abort_removes_written_files(tmp_path):
    writer = _writer(tmp_path)
    message = _write(writer, _batch_rows(1))
    assert message.files and message.deletes

    writer.abort([message, None], 0)

    assert all(not data_files(tmp_path, t) for t in TABLE_NAMES)
    assert not list((tmp_path / "_staging").glob("*.parquet"))
    assert versions(tmp_path) == {t: 0 for t in TABLE_NAMES}


def test_two_triggers_for_one_window_in_a_task_fail_and_leave_no_file(tmp_path):
    writer = _writer(tmp_path)
    rows0 = _batch_rows(0)
    twice = pa.concat_tables([rows0, rows0.filter(pc.equal(rows0["user_id"], "u0"))])

    with pytest.raises(ValueError, match="2 TRIGGER rows for one key and window in one micro-batch"):
        _write(writer, twice)
    assert all(not data_files(tmp_path, t) for t in TABLE_NAMES)


def test_data_files_are_sorted_by_window_then_key_and_roll_over(tmp_path):
    writer = _writer(tmp_path, maxRowsPerFile="5")
    table = pa.concat_tables([_batch_rows(b, keys=6) for b in (3,)])
    message = _write(writer, table)
    triggers = [f for f in message.files if f.table == "triggers"]
    assert len(triggers) == -(-table.filter(pc.equal(table["kind"], "TRIGGER")).num_rows // 5)
    for f in triggers:
        data = pq.read_table(tmp_path / "triggers" / f.path)
        order = [(r["window_start"], r["window_end"], r["user_id"]) for r in data.to_pylist()]
        assert order == sorted(order) and len(order) <= 5


def test_rows_with_a_null_key_fail(tmp_path):
    writer = _writer(tmp_path)
    bad = _batch_rows(0).set_column(0, "user_id", pa.array([None] * _batch_rows(0).num_rows, pa.string()))

    with pytest.raises(ValueError, match="column 'user_id' holds null"):
        _write(writer, bad)


def test_committed_tables_reference_every_file_they_keep(tmp_path):
    writer = _writer(tmp_path)
    for b in range(4):
        writer.commit([_write(writer, _batch_rows(b))], b)
    for t in ("triggers", "retractions"):
        assert data_files(tmp_path, t) == committed_files(tmp_path, t)
    assert not list((tmp_path / "_staging").glob("*.parquet"))


def test_commit_removes_staging_left_by_dead_attempts_of_earlier_batches(tmp_path):
    writer = _writer(tmp_path)
    writer.commit([_write(writer, _batch_rows(0))], 0)
    staging = tmp_path / "_staging"
    staging.mkdir(exist_ok=True)
    dead, future = staging / "part-b1-p0-a0-dead.zstd.parquet", staging / "part-b7-p0-a0-next.zstd.parquet"
    dead.write_bytes(b"x")
    future.write_bytes(b"x")

    writer.commit([_write(writer, _batch_rows(1))], 1)

    assert not dead.exists()
    assert future.exists()


def test_refuses_a_path_holding_a_foreign_delta_table(tmp_path):
    write_deltalake(str(tmp_path / "current"), pa.table({"x": [1]}))

    with pytest.raises(ValueError, match="current is a Delta table but not a spark-windowing pane table"):
        _writer(tmp_path)


def test_file_statistics_bound_the_data_for_delta_readers(tmp_path):
    writer = _writer(tmp_path, maxRowsPerFile="4")
    for b in range(6):
        writer.commit([_write(writer, _batch_rows(b))], b)
    triggers = DeltaTable(str(tmp_path / "triggers"))
    stats = pa.table(triggers.get_add_actions(flatten=True))
    assert stats.num_rows > 6 and pc.min(stats["num_records"]).as_py() >= 1
    data = triggers.to_pyarrow_table()
    starts = sorted(set(data["window_start"].to_pylist()))
    queries = QueryBuilder().register("t", triggers)
    for start in starts:
        for key in ("u0", "s0"):
            sql = (f"SELECT count(*) AS c FROM t WHERE window_start >= TIMESTAMP '{start:%Y-%m-%d %H:%M:%S}' "
                   f"AND user_id = '{key}'")
            expected = sum(1 for r in data.to_pylist() if r["window_start"] >= start and r["user_id"] == key)
            assert queries.execute(sql).read_all()["c"][0].as_py() == expected, sql


def test_file_stats_round_timestamp_bounds_outwards():
    ts = pa.array([1_700_000_000_123_456, 1_700_000_000_999_001], pa.timestamp("us", tz="UTC"))
    stats = json.loads(file_stats(pa.table({"t": ts, "k": ["b", "a"], "n": pa.array([3, None], pa.int64())})))

    assert stats["numRecords"] == 2
    assert stats["minValues"] == {"t": "2023-11-14T22:13:20.123Z", "k": "a", "n": 3}
    assert stats["maxValues"] == {"t": "2023-11-14T22:13:21.000Z", "k": "b", "n": 3}
    assert stats["nullCount"] == {"t": 0, "k": 0, "n": 1}
