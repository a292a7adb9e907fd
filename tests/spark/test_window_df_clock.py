"""Processing time in ``window(df)`` as in ``format("windowed")``: each case runs against both APIs
over the same files, on a live query (a ``processingTime`` trigger), and waits, with a deadline, for
what must come without further input (counted in the sink, never by sleeping a fixed time).

* processing-time windows (no ``timestampColumn``) fire once the clock passes their end;
* an ``AfterProcessingTime`` early pane comes in a batch that read no new input;
* ``watermarkIdleTimeout`` closes the last window of a stream that went quiet;
* ``watermark=processing(lag)`` closes event-time windows by the clock.

How ``window(df)`` does it: ``source.ticks`` (the clock)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable

import spark_windowing
from spark_windowing.errors import OptionError

pytestmark = pytest.mark.spark
APIS = ["format", "window_df"]


def _json_files(data, files: list[list[dict]]) -> None:
    data.mkdir()
    for f, rows in enumerate(files):
        (data / f"{f}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _panes(spark, api: str, data, schema: str, tmp_path, **options):
    """The panes of ``options`` over the JSON files in ``data``, one file a batch."""
    if api == "format":
        reader = spark.readStream.format("windowed")
        for k, v in {"source": "json", "path": str(data), "schema": schema, "maxFilesPerTrigger": "1",
                     "stateLocation": str(tmp_path / "state"), **options}.items():
            reader = reader.option(k, v)
        return reader.load()
    df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(data))
    return spark_windowing.window(df, stateLocation=str(tmp_path / "state"), **options)


def _start(panes, tmp_path, interval: str = "500 milliseconds"):
    return (panes.writeStream.format("windowed").option("path", str(tmp_path / "panes"))
            .option("checkpointLocation", str(tmp_path / "chk")).trigger(processingTime=interval).start())


def _triggers(tmp_path) -> list[dict]:
    path = tmp_path / "panes" / "triggers"
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist() if (path / "_delta_log").exists() else []


def _wait(q, tmp_path, done, timeout: float = 180) -> list[dict]:
    """The triggers table once ``done(rows)`` holds (or the deadline passed); the query stopped."""
    try:
        deadline, rows = time.time() + timeout, []
        while time.time() < deadline and q.exception() is None and not done(rows):
            time.sleep(0.5)
            rows = _triggers(tmp_path)
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return rows


@pytest.mark.parametrize("api", APIS)
def test_processing_time_windows_fire_without_new_input(spark, tmp_path, api):
    """Three files of two rows, one a batch: every window fires once the clock passes its end, the
    last one too, for which no more input comes; every row is counted once, ON_TIME."""
    _json_files(tmp_path / "events", [[{"k": "a", "i": 2 * f + j} for j in range(2)] for f in range(3)])
    panes = _panes(spark, api, tmp_path / "events", "k string, i long", tmp_path, keyColumns="k",
                   window="tumbling(3 seconds)", aggregate="count(*) AS n")
    rows = _wait(_start(panes, tmp_path), tmp_path, lambda rows: sum(r["n"] for r in rows) >= 6)
    assert sum(r["n"] for r in rows) == 6
    assert {r["pane_timing"] for r in rows} == {"ON_TIME"}


@pytest.mark.parametrize("api", APIS)
def test_an_after_processing_time_pane_comes_in_a_batch_without_input(spark, tmp_path, api):
    """``AfterProcessingTime(1 second)`` early panes, one per key, in a later batch that read no
    file: the batch's sequence is not a batch that read the input."""
    _json_files(tmp_path / "events", [[{"k": "a", "ts": "2026-01-01T00:00:00Z", "v": 1},
                                       {"k": "b", "ts": "2026-01-01T00:00:01Z", "v": 2}]])
    panes = _panes(spark, api, tmp_path / "events", "k string, ts timestamp, v long", tmp_path,
                   timestampColumn="ts", keyColumns="k", window="tumbling(1 hour)",
                   trigger="AfterWatermark(early=AfterProcessingTime(1 second))", aggregate="sum(v) AS total")
    q = _start(panes, tmp_path)
    rows = _wait(q, tmp_path, lambda rows: len([r for r in rows if r["pane_timing"] == "EARLY"]) >= 2)
    early = [r for r in rows if r["pane_timing"] == "EARLY"]
    assert sorted((r["k"], r["total"]) for r in early) == [("a", 1), ("b", 2)]
    assert read_input(api, q, tmp_path) and not {r["batch_seq"] for r in early} & read_input(api, q, tmp_path)


def read_input(api: str, q, tmp_path) -> set[int]:
    """The ``batch_seq`` of the batches that read a file: ``format("windowed")``'s offsets whose
    upstream position moved (its own input rows are panes); ``window(df)``'s batches whose file
    source had input rows (its ``batch_seq`` is Spark's batch id + 1)."""
    if api == "format":
        from tests.spark._helpers import offsets
        return {end["seq"] for start, end in offsets(str(tmp_path / "chk")) if start is None or start["up"] != end["up"]}
    return {p["batchId"] + 1 for p in (json.loads(p.json) for p in q.recentProgress)
            if any(s["numInputRows"] and s["description"].startswith("FileStreamSource") for s in p["sources"])}


@pytest.mark.parametrize("api", APIS)
def test_the_idle_timeout_closes_the_last_window_of_a_quiet_stream(spark, tmp_path, api):
    """Events up to 5 s into a 10-second window, then nothing: the event-time watermark stays at
    5 s, and only ``watermarkIdleTimeout`` (2 seconds) moves it past the window's end."""
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
    _json_files(tmp_path / "events", [[{"k": "a", "ts": datetime.fromtimestamp(t0 + s, timezone.utc).isoformat(),
                                        "v": s} for s in range(6)]])
    panes = _panes(spark, api, tmp_path / "events", "k string, ts timestamp, v long", tmp_path,
                   timestampColumn="ts", keyColumns="k", window="tumbling(10 seconds)", aggregate="sum(v) AS total",
                   watermarkIdleTimeout="2 seconds")
    rows = _wait(_start(panes, tmp_path), tmp_path, lambda rows: bool(rows))
    assert [(r["k"], r["total"], r["pane_timing"]) for r in rows] == [("a", 15, "ON_TIME")]


@pytest.mark.parametrize("api", APIS)
def test_a_processing_watermark_closes_event_time_windows_by_the_clock(spark, tmp_path, api):
    """``watermark=processing(0 seconds)``: once the query runs, events stamped 30 s ahead of the
    clock, in 2-second windows; each window fires once the clock passes its end, without more
    input (the rows are on time unless the batch that reads them starts 30 s after they were
    written: a trigger of 500 ms, and batches of about a second here)."""
    (tmp_path / "events").mkdir()
    panes = _panes(spark, api, tmp_path / "events", "k string, ts timestamp, v long", tmp_path,
                   timestampColumn="ts", keyColumns="k", window="tumbling(2 seconds)", aggregate="count(*) AS n",
                   watermark="processing(0 seconds)")
    q = _start(panes, tmp_path)
    deadline = time.time() + 120
    while not q.recentProgress and time.time() < deadline and q.exception() is None:
        time.sleep(0.2)
    ahead = time.time() + 30
    (tmp_path / "events" / "0.json").write_text("".join(json.dumps(
        {"k": "a", "ts": datetime.fromtimestamp(ahead + i / 10, timezone.utc).isoformat(), "v": 1}) + "\n"
        for i in range(5)))
    rows = _wait(q, tmp_path, lambda rows: sum(r["n"] for r in rows) >= 5)
    assert sum(r["n"] for r in rows) == 5 and {r["pane_timing"] for r in rows} == {"ON_TIME"}


def test_processing_time_needs_the_batches_window_df_asks_for(spark):
    df = spark.readStream.format("rate").load()
    with pytest.raises(OptionError) as e:
        spark_windowing.window(df, window="tumbling(1 minute)", aggregate="count(*) AS n", noDataBatches="false")
    assert e.value.option == "noDataBatches" and "processing time" in str(e.value)
