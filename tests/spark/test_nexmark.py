"""NEXMark's windowed queries as one streaming query each (docs/nexmark.md), their final panes
checked against an independent Spark batch SQL reference over the same generated events:
``session_window`` for q11, ``window`` and a join for q8, ``window`` and a max per window for q5
and q7; q12 (processing-time windows) by its invariants. Small data (20,000 events),
``availableNow`` with ``endOfInput=fire``."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

import spark_windowing
from spark_windowing.datasource.upstreams.nexmark_events import NexmarkConfig, generate
from tests.spark._helpers import micros, run_panes

pytestmark = pytest.mark.spark
TOTAL = 20_000
EVENTS = {"source": "nexmark", "totalEvents": str(TOTAL), "eventsPerBatch": "5000", "endOfInput": "fire",
          "probDelayedEvent": "0.05", "occasionalDelay": "2 seconds"}
G = NexmarkConfig(total_events=TOTAL, prob_delayed_event=0.05, occasional_delay=2_000_000)


def _view(spark, kind: str, g: NexmarkConfig = G):
    name = f"nexmark_{kind}_{g.events_per_second}"
    spark.createDataFrame(generate(g, 0, TOTAL, kind).drop_columns(["extra"]).to_pandas()).createOrReplaceTempView(name)
    return name


def test_q11_user_sessions_equal_spark_session_window(spark, tmp_path):
    # delayed bids arrive behind the watermark: allowedLateness keeps them in their sessions
    panes = run_panes(spark, {**EVENTS, "nexmarkEvents": "bid", "keyColumns": "bidder", "timestampColumn": "date_time",
                              "window": "session(10 seconds)", "aggregate": "count(*) AS bids",
                              "accumulationMode": "accumulating_and_retracting", "allowedLateness": "1 hour",
                              "stateLocation": str(tmp_path / "state")}, str(tmp_path / "chk"))
    final = _final(panes)
    bids = _view(spark, "bid")
    want = {(r["bidder"], micros(r["s"]), micros(r["e"])): r["n"] for r in spark.sql(
        f"SELECT bidder, session_window.start AS s, session_window.end AS e, count(*) AS n FROM {bids} "
        "GROUP BY bidder, session_window(date_time, '10 seconds')").collect()}
    assert len(want) > 100 and final == want


def test_q8_new_users_equal_a_spark_join_of_windows(spark, tmp_path):
    panes = run_panes(spark, {**EVENTS, "nexmarkEvents": "person", "keyColumns": "id", "timestampColumn": "date_time",
                              "source2": "nexmark", "nexmarkEvents2": "auction", "keyColumns2": "seller",
                              "timestampColumn2": "date_time", "join": "inner", "window": "tumbling(10 seconds)",
                              "aggregate": "first(name) AS name", "aggregate2": "count(*) AS auctions",
                              "accumulationMode": "accumulating", "allowedLateness": "1 hour",
                              "stateLocation": str(tmp_path / "state")}, str(tmp_path / "chk"))
    # every window where a person and an auction of theirs met, on time or when a delayed one came
    got = {(r["id"], micros(r["window_start"]), r["name"]) for r in panes.to_pylist()}
    persons, auctions = _view(spark, "person"), _view(spark, "auction")
    want = {(r["id"], micros(r["s"]), r["name"]) for r in spark.sql(
        f"SELECT p.id, p.w.start AS s, p.name FROM "
        f"(SELECT id, name, window(date_time, '10 seconds') AS w FROM {persons}) p JOIN "
        f"(SELECT DISTINCT seller, window(date_time, '10 seconds') AS w FROM {auctions}) a "
        "ON p.id = a.seller AND p.w = a.w").collect()}
    assert len(want) > 5 and got == want


def test_q12_processing_time_windows_count_every_bid_once(spark, tmp_path):
    panes = run_panes(spark, {**EVENTS, "nexmarkEvents": "bid", "keyColumns": "bidder", "window": "tumbling(10 seconds)",
                              "aggregate": "count(*) AS bids", "stateLocation": str(tmp_path / "state")},
                      str(tmp_path / "chk")).to_pylist()
    bids = generate(G, 0, TOTAL, "bid")
    assert sum(r["bids"] for r in panes) == bids.num_rows
    windows = [(r["bidder"], micros(r["window_start"])) for r in panes]
    assert len(windows) == len(set(windows))                      # one pane per bidder and window
    assert all(micros(r["window_end"]) - micros(r["window_start"]) == 10_000_000 for r in panes)
    assert {r["bidder"] for r in panes} == set(bids.column("bidder").to_pylist())


#: 500 events per second: 40 s of event time, several windows of 10 s
SLOW = {**EVENTS, "eventsPerSecond": "500"}
G_SLOW = NexmarkConfig(total_events=TOTAL, prob_delayed_event=0.05, occasional_delay=2_000_000, events_per_second=500)
#: late (delayed) bids update their windows: each stage retracts what it fired before
LATE = {"accumulationMode": "accumulating_and_retracting", "allowedLateness": "1 hour",
        "trigger": "AfterWatermark(late=AfterCount(1))"}


def test_q7_highest_bids_equal_the_bids_at_spark_max_per_window(spark, tmp_path):
    panes = run_panes(spark, {**SLOW, **LATE, "nexmarkEvents": "bid", "timestampColumn": "date_time",
                              "window": "tumbling(10 seconds)",
                              "aggregate": "max_rows(price, auction, bidder, date_time) AS top",
                              "stateLocation": str(tmp_path / "state")}, str(tmp_path / "chk"))
    got = Counter((ws, r["auction"], r["price"], r["bidder"], micros(r["date_time"]))
                  for ws, rows in _final_rows(panes, "top").items() for r in rows)
    bids = _view(spark, "bid", G_SLOW)
    want = Counter((micros(r["s"]), r["auction"], r["price"], r["bidder"], micros(r["date_time"])) for r in spark.sql(
        f"SELECT b.w.start AS s, auction, price, bidder, date_time FROM "
        f"(SELECT *, window(date_time, '10 seconds') AS w FROM {bids}) b JOIN "
        f"(SELECT window(date_time, '10 seconds') AS w, max(price) AS p FROM {bids} GROUP BY 1) m "
        "ON b.w = m.w AND b.price = m.p").collect())
    assert len({w for w, *_ in want}) >= 4 and got == want


def test_q7_into_the_pane_sink_ends_with_every_window_final(spark, tmp_path):
    """The input's end (watermark at the end of time) reaches the sink's commit: ``current`` holds
    every window, final, its bids at the maximum carried as structs (year 9999 once broke it)."""
    from deltalake import DeltaTable
    reader = spark.readStream.format("windowed")
    for k, v in {**SLOW, "nexmarkEvents": "bid", "timestampColumn": "date_time", "window": "tumbling(10 seconds)",
                 "aggregate": "max_rows(price, auction, bidder, date_time) AS top",
                 "stateLocation": str(tmp_path / "state")}.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("windowed").option("path", str(tmp_path / "panes"))
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    current = DeltaTable(str(tmp_path / "panes" / "current")).to_pyarrow_table().to_pylist()
    bids = generate(G_SLOW, 0, TOTAL, "bid").to_pylist()
    windows = {micros(b["date_time"]) // 10_000_000 * 10_000_000 for b in bids}
    assert {micros(r["window_start"]) for r in current} == windows and all(r["is_final"] for r in current)
    for r in current:
        ws = micros(r["window_start"])
        top = max(b["price"] for b in bids if ws <= micros(b["date_time"]) < ws + 10_000_000)
        assert {x["price"] for x in r["top"]} == {top}


@pytest.mark.parametrize("how", ["two_stages", "most_frequent"])
def test_q5_hot_items_in_one_query_equal_spark_argmax_per_window(spark, tmp_path, how):
    """Bids per auction in sliding windows, then the auctions with the most bids per window (ties
    kept), in one streaming query: two windowings (window(df) over format("windowed")), or one
    with the ``most_frequent(1, auction)`` aggregate."""
    reader = spark.readStream.format("windowed")
    stage1 = {"keyColumns": "auction", "aggregate": "count(*) AS bids"} if how == "two_stages" else \
        {"aggregate": "most_frequent(1, auction) AS hot"}
    for k, v in {**SLOW, **LATE, "nexmarkEvents": "bid", "timestampColumn": "date_time", **stage1,
                 "window": "sliding(10 seconds, 2 seconds)", "stateLocation": str(tmp_path / "state1")}.items():
        reader = reader.option(k, v)
    hot = reader.load()
    if how == "two_stages":
        hot = spark_windowing.window(hot, **LATE, window="inherit", aggregate="max_rows(bids, auction) AS hot",
                                     stateLocation=str(tmp_path / "state2"))
    name = "q5_" + uuid.uuid4().hex[:8]
    q = (hot.writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    panes = spark.table(name).toArrow()
    count = "bids" if how == "two_stages" else "count"
    got = {ws: sorted((r["auction"], r[count]) for r in rows) for ws, rows in _final_rows(panes, "hot").items()}
    bids = _view(spark, "bid", G_SLOW)
    want: dict = {}
    for r in spark.sql(
            f"WITH c AS (SELECT window(date_time, '10 seconds', '2 seconds') AS w, auction, count(*) AS n "
            f"FROM {bids} GROUP BY 1, 2) "
            "SELECT c.w.start AS s, auction, n FROM c JOIN (SELECT w, max(n) AS m FROM c GROUP BY w) x "
            "ON c.w = x.w AND c.n = x.m").collect():
        want.setdefault(micros(r["s"]), []).append((r["auction"], r["n"]))
    assert any(len(v) > 1 for v in want.values())   # ties, kept
    assert len(want) > 10 and got == {ws: sorted(v) for ws, v in want.items()}


def _final_rows(panes, column: str) -> dict:
    """Per window start, the rows of the last TRIGGER pane not retracted after it (no key)."""
    out: dict = {}
    for r in sorted(panes.to_pylist(), key=lambda r: (r["batch_seq"], r["kind"] == "TRIGGER")):
        if r["kind"] == "RETRACTION":
            out.pop(micros(r["window_start"]), None)
        else:
            out[micros(r["window_start"])] = r[column]
    return out


def _final(panes) -> dict:
    """The last TRIGGER pane per key and window, minus the windows a RETRACTION withdrew after it."""
    out: dict = {}
    for r in sorted(panes.to_pylist(), key=lambda r: (r["batch_seq"], r["kind"] == "TRIGGER")):
        k = (r["bidder"], micros(r["window_start"]), micros(r["window_end"]))
        if r["kind"] == "RETRACTION":
            out.pop(k, None)
        else:
            out[k] = r["bids"]
    return out
