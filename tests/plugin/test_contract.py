"""The source ↔ sink contract (``spark_windowing.datasource.contract``) through the real reader:
the offsets ``format("windowed")``'s reader returns, logged as Spark logs them, lead the sink's
``produced_from_checkpoint`` to the options the reader recorded. A change to the offset's fields
or to the state record on one side alone fails here."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from spark_windowing.datasource import contract
from spark_windowing.datasource.source.parse import parse_options
from spark_windowing.datasource.source.checks import recorded_options
from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema


def _reader(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    pq.write_table(pa.table({"k": ["a", "b"], "ts": pa.array([1_000_000, 2_000_000], pa.timestamp("us", tz="UTC"))}),
                   events / "part-0.parquet")
    options = {"source": "parquet", "path": str(events), "window": "tumbling(1 second)", "keyColumns": "k",
               "timestampColumn": "ts", "aggregate": "count(*) AS n", "allowedLateness": "3 seconds",
               "stateLocation": str(tmp_path / "state"), "shards": "2"}
    return options, WindowedStreamReader(options, stream_schema(options))


def _log(checkpoint, batch: int, *source_offsets: dict) -> None:
    """An offset log entry as Spark's ``OffsetSeqLog`` writes it: a version line, the batch's
    metadata, one line per source."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines + [json.dumps(o) for o in source_offsets]))


def test_the_sink_finds_what_the_reader_recorded_through_its_logged_offset(tmp_path):
    options, reader = _reader(tmp_path)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert set(contract.OFFSET_FIELDS) <= set(end) and end["seq"] == 1
    assert end[contract.OFFSET_RUN] == start[contract.OFFSET_RUN]    # the checkpoint's run, carried forward
    checkpoint = tmp_path / "checkpoint"
    _log(checkpoint, 0, start)
    _log(checkpoint, 1, {"reservoir": 3}, end)       # another source of the query beside it
    produced = contract.produced_from_checkpoint(str(checkpoint))
    assert produced == json.loads(json.dumps(recorded_options(parse_options(options)), default=str))
    assert produced["allowedLatenessUs"] == 3_000_000 and produced["keyColumns"] == "k"


def test_no_windowed_source_or_two_of_them_is_unknown(tmp_path):
    options, reader = _reader(tmp_path)
    start = reader.initialOffset()
    assert contract.produced_from_checkpoint(str(tmp_path / "nothing-logged")) is None
    _log(tmp_path / "other", 0, {"reservoir": 3})
    assert contract.produced_from_checkpoint(str(tmp_path / "other")) is None
    _log(tmp_path / "two", 0, start, {**start, contract.OFFSET_STATE: str(tmp_path / "elsewhere")})
    assert contract.produced_from_checkpoint(str(tmp_path / "two")) is None
