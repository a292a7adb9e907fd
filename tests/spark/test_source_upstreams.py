"""Upstream formats, nested event-time fields, processing-time windows and read limits."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark._helpers import micros, offsets, run_panes
from tests.spark.test_source import SEC, T0

pytestmark = pytest.mark.spark


def test_json_upstream_with_nested_epoch_millis_and_max_events_per_batch(spark, tmp_path):
    src = tmp_path / "events"
    src.mkdir()
    for f in range(3):  # 3 files x 4 events, 10 s apart per file
        with open(src / f"part-{f}.json", "w") as out:
            for i in range(4):
                t_ms = (T0 + (f * 10 + i) * SEC) // 1000
                out.write(json.dumps({"user": f"u{i % 2}", "payload": {"ts": t_ms, "amount": i + 1}}) + "\n")
    chk = str(tmp_path / "chk")
    panes = run_panes(spark, {"source": "json", "path": str(src), "timestampColumn": "payload.ts",
                              "timestampUnit": "ms", "keyColumns": "user", "window": "tumbling(10 seconds)",
                              "aggregate": "count(*) AS n", "maxEventsPerBatch": "4",
                              "stateLocation": str(tmp_path / "state")}, chk)
    data_batches = [(s, e) for s, e in offsets(chk) if (s or {"up": 0})["up"] != e["up"]]
    assert len(data_batches) == 3  # one 4-event file per micro-batch
    on_time = sorted((r["user"], micros(r["window_start"]), r["n"]) for r in panes.to_pylist()
                     if r["pane_timing"] == "ON_TIME")
    assert on_time == [("u0", T0, 2), ("u0", T0 + 10 * SEC, 2), ("u1", T0, 2), ("u1", T0 + 10 * SEC, 2)]


def test_csv_upstream_without_timestamp_column_uses_processing_time_windows(spark, tmp_path):
    src = tmp_path / "events"
    src.mkdir()
    (src / "a.csv").write_text("sensor,temp\ns1,20.5\ns2,30.0\ns1,21.5\n")
    panes = run_panes(spark, {"source": "csv", "path": str(src), "keyColumns": "sensor",
                              "window": "tumbling(1 hour)", "aggregate": "avg(temp) AS t, count(*) AS n",
                              "trigger": "AfterCount(1)", "stateLocation": str(tmp_path / "state")},
                      str(tmp_path / "chk"))
    got = panes.to_pylist()
    assert sorted((r["sensor"], r["t"], r["n"]) for r in got) == [("s1", 21.0, 2), ("s2", 30.0, 1)]
    for r in got:  # the window is the one holding the batch's processing time
        bt, ws = micros(r["batch_time"]), micros(r["window_start"])
        assert ws <= bt < ws + 3600 * SEC and ws % (3600 * SEC) == 0


def test_parquet_max_events_per_batch_takes_whole_files(spark, tmp_path):
    src = tmp_path / "events"
    src.mkdir()
    for f in range(4):
        pq.write_table(pa.table({"k": ["a"] * 3, "ts": pa.array([T0 + f * SEC] * 3, pa.int64()),
                                 "v": [1, 2, 3]}), str(src / f"p{f}.parquet"))
    chk = str(tmp_path / "chk")
    run_panes(spark, {"source": "parquet", "path": str(src), "timestampColumn": "ts", "timestampUnit": "us",
                      "keyColumns": "k", "window": "tumbling(1 minute)", "aggregate": "sum(v) AS s",
                      "maxEventsPerBatch": "6", "stateLocation": str(tmp_path / "state")}, chk)
    ups = [e["up"] for _, e in offsets(chk)]
    assert ups[:2] == [2, 4]  # two 3-row files per batch


def test_watermark_from_an_upstream_column(spark, tmp_path):
    """column(wm): the upstream says how far event time is complete; the window closes on it,
    although the events' own times would not close it."""
    src = tmp_path / "events"
    src.mkdir()
    pq.write_table(pa.table({"k": ["a", "a"], "ts": pa.array([T0 + SEC, T0 + 2 * SEC], pa.int64()),
                             "wm": pa.array([T0, T0 + 60 * SEC], pa.int64()), "v": [1, 2]}),
                   str(src / "p0.parquet"))
    panes = run_panes(spark, {"source": "parquet", "path": str(src), "timestampColumn": "ts", "timestampUnit": "us",
                              "watermark": "column(wm)", "keyColumns": "k", "window": "tumbling(10 seconds)",
                              "aggregate": "sum(v) AS s", "stateLocation": str(tmp_path / "state")},
                      str(tmp_path / "chk"))
    got = [(r["s"], r["pane_timing"], micros(r["watermark"])) for r in panes.to_pylist()]
    assert got == [(3, "ON_TIME", T0 + 60 * SEC)]  # numeric epochs (ts and wm) are in timestampUnit


@pytest.mark.parametrize("options,fragment", [
    ({"source": "panes", "path": "/nonexistent/panes", "window": "inherit", "aggregate": "count(*) AS n"},
     "invalid option 'path'"),
    ({"source": "delta", "window": "inherit", "aggregate": "count(*) AS n", "timestampColumn": "ts"},
     "invalid option 'window'"),
    ({"source": "delta", "window": "inherit", "aggregate": "count(*) AS n", "path": "WITH_WINDOWS",
      "watermark": "column(nope)"}, "invalid option 'watermark'"),
])
def test_window_inherit_and_panes_source_errors_at_load(spark, tmp_path, options, fragment):
    """A pane-table upstream that is not there, or inherit over input without window columns."""
    from deltalake import write_deltalake
    path = str(tmp_path / "events")
    ts = pa.array([1], pa.timestamp("us", tz="UTC"))
    write_deltalake(path, pa.table({"k": ["a"], "ts": ts}))
    write_deltalake(str(tmp_path / "windowed"), pa.table({"window_start": ts, "window_end": ts, "pane_timestamp": ts}))
    reader = spark.readStream.format("windowed").option("stateLocation", str(tmp_path / "s")).option("path", path)
    for k, v in options.items():
        reader = reader.option(k, str(tmp_path / "windowed") if v == "WITH_WINDOWS" else v)
    with pytest.raises(Exception) as info:
        reader.load()
    assert fragment in str(info.value) and "Accepted:" in str(info.value)
