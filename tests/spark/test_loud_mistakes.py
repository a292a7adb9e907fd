"""Issue #27, "No silent wrong results": ordinary mistakes with the README's pipeline (events ->
``format("windowed")`` -> ``writeStream.format("windowed")`` -> SQL) fail loudly, naming what to
change, instead of producing wrong tables. Every test runs real Spark queries."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.spark.sink_helpers import TABLE_NAMES

pytestmark = pytest.mark.spark

#: The README's pipeline over generated orders: tumbling windows with early and late panes, retracting.
PIPELINE = {"source": "generator", "eventsPerBatch": "200", "totalEvents": "1200", "keys": "5",
            "eventInterval": "3 seconds", "disorder": "20 seconds", "seed": "3",
            "timestampColumn": "event_time", "keyColumns": "user_id", "window": "tumbling(10 minutes)",
            "aggregate": "sum(amount) AS revenue, count(*) AS orders",
            "trigger": "AfterWatermark(early=AfterCount(50), late=AfterCount(1))",
            "accumulationMode": "accumulating_and_retracting", "watermark": "bounded(10 seconds)",
            "allowedLateness": "1 minute", "shards": "2"}


def _reader(spark, options: dict[str, str]):
    reader = spark.readStream.format("windowed")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _write(frame, path: Path, checkpoint: Path, **sink: str):
    writer = frame.writeStream.format("windowed").option("path", str(path)).option("checkpointLocation", str(checkpoint))
    for k, v in sink.items():
        writer = writer.option(k, v)
    return writer


def _run(spark, options: dict[str, str], path: Path, checkpoint: Path, **sink: str) -> None:
    query = _write(_reader(spark, options), path, checkpoint, **sink).trigger(availableNow=True).start()
    query.awaitTermination(240)
    assert not query.isActive
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


def _versions(path: Path) -> dict[str, int]:
    return {t: DeltaTable(str(path / t)).version() for t in TABLE_NAMES}


def _failure(spark, options, path, checkpoint, **sink) -> str:
    """The message of the query's failure (at start() or while running)."""
    with pytest.raises(Exception) as caught:
        _run(spark, options, path, checkpoint, **sink)
    return str(caught.value)


# ------------------------------------------------------------------------- 1. changed window, same sink path

def test_a_changed_window_on_the_same_sink_path_is_refused_before_it_writes(spark, tmp_path):
    panes = tmp_path / "panes"
    _run(spark, {**PIPELINE, "stateLocation": str(tmp_path / "s1")}, panes, tmp_path / "c1")
    before = _versions(panes)

    # exactly what the reader's refusal said: a new stateLocation and checkpoint, same sink path
    five = {**PIPELINE, "window": "tumbling(5 minutes)", "stateLocation": str(tmp_path / "s2")}
    message = _failure(spark, five, panes, tmp_path / "c2")
    assert "window 'tumbling(10 minutes)' → 'tumbling(5 minutes)'" in message, message
    assert "new sink path" in message and ".option('allowSpecChange', 'true')" in message, message
    assert _versions(panes) == before          # nothing written, not even an empty commit
    recorded = json.loads((panes / "_spec.json").read_text())["producedBy"]
    assert recorded["window"] == "tumbling(10 minutes)" and recorded["keyColumns"] == "user_id"

    # the reader's own check names each changed option old → new (not always 'window')
    changed = {**PIPELINE, "window": "tumbling(5 minutes)", "accumulationMode": "accumulating",
               "stateLocation": str(tmp_path / "s1")}
    message = _failure(spark, changed, tmp_path / "other", tmp_path / "c1")
    assert "accumulationMode 'accumulating_and_retracting' → 'accumulating'" in message, message
    assert "window 'tumbling(10 minutes)' → 'tumbling(5 minutes)'" in message, message

    # the explicit way out: the user means it
    _run(spark, five, panes, tmp_path / "c3", allowSpecChange="true")
    assert json.loads((panes / "_spec.json").read_text())["producedBy"]["window"] == "tumbling(5 minutes)"


def test_a_sink_path_of_the_previous_release_gets_its_spec_recorded_on_the_next_batch(spark, tmp_path):
    panes = tmp_path / "panes"
    options = {**PIPELINE, "stateLocation": str(tmp_path / "s1"), "totalEvents": "400"}
    _run(spark, options, panes, tmp_path / "c1")
    (panes / "_spec.json").unlink()            # as the previous release left it
    _run(spark, {**options, "totalEvents": "800"}, panes, tmp_path / "c1")
    assert json.loads((panes / "_spec.json").read_text())["producedBy"]["window"] == "tumbling(10 minutes)"


# ------------------------------------------------------------------------- 2. a second query on the same sink path

def test_a_second_query_on_the_same_sink_path_is_refused_at_start(spark, tmp_path):
    """The first query fires panes every batch; the second (same spec, a trickle of events) fires
    none for many batches: the previous release refused it only at its first commit with panes."""
    panes = tmp_path / "panes"
    endless = {k: v for k, v in PIPELINE.items() if k != "totalEvents"}
    first = (_write(_reader(spark, {**endless, "eventsPerBatch": "200", "stateLocation": str(tmp_path / "s1")}),
                    panes, tmp_path / "c1").trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while len(first.recentProgress) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(first.recentProgress) >= 2, "the first query made no progress"
        second = (_write(_reader(spark, {**endless, "eventsPerBatch": "2", "stateLocation": str(tmp_path / "s2")}),
                         panes, tmp_path / "c2").trigger(processingTime="500 milliseconds").start())
        try:
            second.awaitTermination(60)
        except Exception:   # awaitTermination raises the query's failure
            pass
        assert not second.isActive, "the second query still runs"
        assert second.exception() is not None
        message = str(second.exception())
        assert f"the pane tables at {panes} are written by another query" in message, message
        assert f"spark-windowing-sink-{first.id}" in message and "writerLease" in message, message
        assert second.recentProgress == [], [p["batchId"] for p in second.recentProgress]   # not one batch
        # refused when its first batch was planned, before any task ran: no shard read or wrote its state
        assert not (tmp_path / "s2" / "reports").exists() and not (tmp_path / "s2" / "shards").exists()
        assert first.isActive and first.exception() is None
        seen = len(first.recentProgress)
        deadline = time.monotonic() + 60
        while len(first.recentProgress) < seen + 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(first.recentProgress) >= seen + 2, "the first query stopped making progress"
    finally:
        first.stop()
    # every commit in the tables is the first query's
    for table in TABLE_NAMES:
        writers = {json.loads(c["userMetadata"])["appId"] for c in DeltaTable(str(panes / table)).history()
                   if "userMetadata" in c}
        assert writers <= {f"spark-windowing-sink-{first.id}"}, (table, writers)
    # its restart from the same checkpoint is its own lease: never refused
    again = (_write(_reader(spark, {**endless, "eventsPerBatch": "200", "stateLocation": str(tmp_path / "s1")}),
                    panes, tmp_path / "c1").trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 60
        while not again.recentProgress and again.isActive and time.monotonic() < deadline:
            time.sleep(0.5)
        assert again.isActive and again.exception() is None and again.recentProgress
    finally:
        again.stop()


# ------------------------------------------------------------------------- 3. timestampColumn of the wrong type

def _orders(directory: Path) -> Path:
    directory.mkdir()
    with open(directory / "orders-0.json", "w") as f:
        for i in range(30):
            f.write(json.dumps({"order_id": i, "user": f"user-{i % 3}", "amount": 10.5 + i,
                                "ts": f"2026-01-01T00:{i:02d}:00Z"}) + "\n")
    return directory


def test_a_time_column_of_the_wrong_type_fails_at_load_or_in_the_first_batch(spark, tmp_path):
    orders = {"source": "json", "path": str(_orders(tmp_path / "orders")),
              "schema": "order_id BIGINT, user STRING, amount DOUBLE, ts STRING", "keyColumns": "user",
              "window": "tumbling(10 minutes)", "aggregate": "sum(amount) AS revenue"}
    # a double: refused at load(), saying that a number needs timestampUnit
    with pytest.raises(Exception) as caught:
        _reader(spark, {**orders, "timestampColumn": "amount", "stateLocation": str(tmp_path / "s0")})
    assert ("invalid option 'timestampColumn' = 'amount': column 'amount' is double, a number; a number is an "
            "event time only with an explicit timestampUnit") in str(caught.value), caught.value
    _reader(spark, {**orders, "timestampColumn": "amount", "timestampUnit": "s",      # said explicitly: fine
                    "stateLocation": str(tmp_path / "s0")})

    # strings that are not times: the first batch has no readable event time -> the query stops
    late = tmp_path / "late"
    bad = {**orders, "timestampColumn": "user", "keyColumns": "", "lateDataPath": str(late),
           "stateLocation": str(tmp_path / "s1")}
    message = _failure(spark, bad, tmp_path / "panes1", tmp_path / "c1")
    assert ("invalid option 'timestampColumn' = 'user': all 30 events of micro-batch 0 have no readable event "
            "time in column 'user' (e.g. 'user-0')") in message, message
    assert ".option('malformedEvents', 'late')" in message, message
    assert DeltaTable(str(late)).to_pyarrow_table().num_rows == 30      # nothing lost: all in the late table

    # opted in: they go to the late table and the query completes
    _run(spark, {**bad, "malformedEvents": "late", "lateDataPath": str(tmp_path / "late2"),
                 "stateLocation": str(tmp_path / "s2")}, tmp_path / "panes2", tmp_path / "c2")
    assert DeltaTable(str(tmp_path / "late2")).to_pyarrow_table().column("reason").to_pylist() == ["malformed"] * 30

    # the right column: runs
    _run(spark, {**orders, "timestampColumn": "ts", "stateLocation": str(tmp_path / "s3")},
         tmp_path / "panes3", tmp_path / "c3")
    # 3 users x windows [00:00, 00:10) and [00:10, 00:20); [00:20, 00:30) waits for a watermark past it
    assert DeltaTable(str(tmp_path / "panes3" / "current")).to_pyarrow_table().num_rows == 6


# ------------------------------------------------------------------------- 4. closed windows in current

def test_current_says_which_windows_are_closed_without_new_panes(spark, tmp_path):
    panes = tmp_path / "panes"
    # 10 batches (availableNow: the same ones at any speed) of 50 s of event time each, less than
    # allowedLateness (1 minute): an ON_TIME pane is not final, and with no disorder no late pane
    # follows; the window expires without a pane
    options = {**PIPELINE, "totalEvents": "1000", "eventsPerBatch": "100", "window": "tumbling(2 minutes)",
               "eventInterval": "500 milliseconds", "disorder": "0 seconds",
               "trigger": "AfterWatermark(early=AfterCount(5), late=AfterCount(1))", "stateLocation": str(tmp_path / "s")}
    query = _write(_reader(spark, options), panes, tmp_path / "c").trigger(availableNow=True).start()
    query.awaitTermination(240)
    assert not query.isActive and query.exception() is None
    triggers = DeltaTable(str(panes / "triggers")).to_pyarrow_table()
    current = DeltaTable(str(panes / "current")).to_pyarrow_table().to_pylist()
    watermark = max(_us(r["watermark"]) for r in triggers.to_pylist() if r["watermark"] is not None)
    lateness = 60_000_000   # allowedLateness 1 minute
    closed = [r for r in current if _us(r["window_end"]) + lateness <= watermark]
    still_open = [r for r in current if _us(r["window_end"]) + lateness > watermark]
    assert closed and still_open, (len(closed), len(still_open))
    assert all(r["is_final"] for r in closed), [(r["window_end"], r["is_final"]) for r in closed if not r["is_final"]]
    assert not any(r["is_final"] for r in still_open)
    # the pane log is not touched (an expiring window fires nothing): its tables are only appended
    # to, and windows current calls closed have no final pane there
    for table in ("triggers", "retractions"):
        assert {c["operation"] for c in DeltaTable(str(panes / table)).history()} <= {"CREATE TABLE", "WRITE"}
    final_panes = {(r["user_id"], r["window_end"]) for r in triggers.to_pylist() if r["is_final"]}
    assert [r for r in closed if (r["user_id"], r["window_end"]) not in final_panes]
    # the pane timeline frames the closed windows
    from spark_windowing.tools.plot import load_panes, plot_panes
    loaded = load_panes(str(panes)).to_pylist()
    assert {(r["user_id"], r["window_end"]) for r in loaded if r["window_closed"]} == \
        {(r["user_id"], r["window_end"]) for r in closed}
    drawn = plot_panes(load_panes(str(panes)), str(tmp_path / "timeline.png"), max_keys=5).summary
    assert drawn.closed == len({(r["user_id"], r["window_start"]) for r in closed}) and "closed windows" in drawn.describe()


def _us(value) -> int:
    return int(pa.scalar(value, pa.timestamp("us", tz="UTC")).cast(pa.int64()).as_py())


def test_a_state_spec_json_of_the_previous_release_names_the_changed_option(tmp_path):
    """A ``spec.json`` written before options were recorded holds ``describe()`` only: the
    options it has are compared by name; a change it cannot see is named as one of the rest."""
    from spark_windowing.datasource.source.parse import parse_options
    from spark_windowing.datasource.source.reader import check_state_spec
    from spark_windowing.errors import OptionError

    old = parse_options({**PIPELINE, "stateLocation": str(tmp_path)})
    recorded = {"fingerprint": old.spec.fingerprint(), "shards": 2, "stateBuckets": 64, "spec": old.spec.describe()}
    check_state_spec(old, recorded)
    with pytest.raises(OptionError, match="window 'tumbling\\(10 minutes\\)' → 'tumbling\\(5 minutes\\)'"):
        check_state_spec(parse_options({**PIPELINE, "window": "tumbling(5 minutes)", "stateLocation": str(tmp_path)}),
                         recorded)
    with pytest.raises(OptionError, match="the options it records agree, so another one changed: aggregate"):
        check_state_spec(parse_options({**PIPELINE, "aggregate": "max(amount) AS top",
                                        "stateLocation": str(tmp_path)}), recorded)
