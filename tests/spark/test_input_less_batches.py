"""Input-less micro-batches through Spark against the reference model (issue 13, defect 4).

Random keyed events over Delta versions, one version per micro-batch (``maxFilesPerTrigger=1``,
``availableNow``), then the micro-batches the source schedules without input because a timer is
due. Spark's panes must equal what ``tests/core/reference.py`` — an independent
element-at-a-time model — gives for the same micro-batches (events, watermark, batch time from the
offset log), and every session whose end the final watermark passed must have fired.
"""

from __future__ import annotations

import random
import time
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_windowing._time import MIN_TIME
from tests.spark._helpers import offsets, rows, run_panes
from tests.spark.test_source import SEC, T0, _ts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from reference import ReferenceStream  # noqa: E402

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
AGG = "count(*) AS n, sum(v) AS s"


def _bundles(seed: int, versions: int = 4, per: int = 60) -> list[list[dict]]:
    """Events 100 ms apart on 6 keys, disorder up to 1.5 s (below the watermark's 2 s bound)."""
    rnd = random.Random(seed)
    out, i = [], 0
    for _ in range(versions):
        bundle = []
        for _ in range(per):
            i += 1
            bundle.append({"k": f"k{rnd.randrange(6)}", "ts": T0 + i * 100_000 - rnd.randrange(1_500_000),
                           "v": rnd.randrange(1, 50)})
        out.append(bundle)
    return out


@pytest.mark.parametrize("seed,window,trigger,extra", [
    (1, "session(1 second)", "Default()", {}),
    (2, "session(700 milliseconds)", "AfterWatermark(early=AfterCount(3))", {"shards": "1"}),
    (3, "session(1 second)", "ContinuousEventTime(500 milliseconds)",
     {"stateMemoryRows": "4", "stateBuckets": "8"}),
])
def test_input_less_batches_fire_what_the_reference_model_fires(spark, tmp_path, seed, window, trigger, extra):
    bundles = _bundles(seed)
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": window, "trigger": trigger, "aggregate": AGG, "watermark": "bounded(2 seconds)",
            "accumulationMode": "accumulating", "maxFilesPerTrigger": "1",
            "stateLocation": str(tmp_path / "state"), **extra}
    chk = str(tmp_path / "chk")
    got = run_panes(spark, opts, chk)

    ref = ReferenceStream(window=window, trigger=trigger, aggregate=AGG, key_columns="k",
                          accumulation_mode="accumulating", timestamp_unit="us")
    batches = offsets(chk)
    input_less = []
    for start, end in batches:
        first = 0 if start is None else start["up"] + 1
        events = [r for v in range(first, end["up"] + 1) for r in bundles[v]]
        if start is not None and not events:
            input_less.append(end["seq"])
        ref.add_elements(events, watermark=None if end["wm"] <= MIN_TIME else end["wm"],
                         processing_time=end["bt"])
    want = pa.Table.from_pylist([{c: p[c] for c in got.column_names} for p in ref.take_panes()])
    assert rows(got, drop=("batch_seq",)) == rows(want, drop=("batch_seq",))

    # the path under test was taken: an input-less batch fired panes
    fired = set(got.column("batch_seq").to_pylist())
    assert input_less and fired & set(input_less)
    # every session whose end the final watermark passed has fired (sessions from all events)
    final_wm = batches[-1][1]["wm"]
    fired_windows = {(r["k"], r["window_end"]) for r in rows(got)}
    everything = ReferenceStream(window=window, aggregate=AGG, key_columns="k", timestamp_unit="us")
    everything.add_elements([r for b in bundles for r in b])
    everything.advance_watermark_to(final_wm)
    closed = [(p["k"], p["window_end"]) for p in everything.take_panes()]
    assert closed and set(closed) <= fired_windows


def _issue_case() -> list[list[dict]]:
    """The case the defect was reported with: 6 versions x 3,000 events on 40 keys, one event every
    37 ms, disorder up to 4 s (seed 0 gives the reported 2,398 sessions)."""
    rnd = random.Random(0)
    out, i = [], 0
    for _ in range(6):
        bundle = []
        for _ in range(3000):
            i += 1
            ts = T0 + i * 37_000 - rnd.randrange(4_000_000)
            bundle.append({"k": f"k{rnd.randrange(40)}", "ts": ts, "v": 1})
        out.append(bundle)
    return out


def _sessions(events: list[dict], gap: int) -> list[tuple[str, int, int]]:
    """Every session of the events, per key: sorted times, a new session where the gap is reached."""
    by_key: dict[str, list[int]] = {}
    for e in events:
        by_key.setdefault(e["k"], []).append(e["ts"])
    out = []
    for k, ts in by_key.items():
        ts.sort()
        start = end = None
        for t in ts:
            if end is not None and t < end:
                end = max(end, t + gap)
                continue
            if end is not None:
                out.append((k, start, end))
            start, end = t, t + gap
        out.append((k, start, end))
    return out


def _run_until_caught_up(spark, opts: dict, chk: str, last_version: int, final_wm: int) -> pa.Table:
    """processingTime mode: run until a batch has read the last version and one has the final
    watermark and no further batch follows for 2 s; return the panes."""
    name = "q_pt_" + str(abs(hash(chk)) % 10**8)
    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("memory").queryName(name).option("checkpointLocation", chk)
         .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            time.sleep(1)
            done = [e for _, e in offsets(chk) if e["up"] == last_version and e["wm"] == final_wm]
            if done and q.lastProgress and q.lastProgress["batchId"] == len(offsets(chk)) - 1:
                time.sleep(2)
                if q.lastProgress["batchId"] == len(offsets(chk)) - 1:
                    break
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    return spark.table(name).toArrow()


@pytest.mark.parametrize("mode", ["availableNow", "processingTime"])
def test_reported_case_every_session_the_final_watermark_closes_fires(spark, tmp_path, mode):
    """Defect 4's own case: every session whose end the final watermark passed is emitted, with the
    count of the reference sessions, in both trigger modes."""
    bundles = _issue_case()
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    events = [r for b in bundles for r in b]
    sessions = _sessions(events, 3 * SEC)
    assert len(sessions) == 2398
    final_wm = max(e["ts"] for e in events) - 5 * SEC
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": "session(3 seconds)", "aggregate": "count(*) AS n", "watermark": "bounded(5 seconds)",
            "maxFilesPerTrigger": "1", "stateLocation": str(tmp_path / "state")}
    chk = str(tmp_path / "chk")
    if mode == "availableNow":
        got = run_panes(spark, opts, chk)
    else:
        got = _run_until_caught_up(spark, opts, chk, last_version=len(bundles) - 1, final_wm=final_wm)
    assert offsets(chk)[-1][1]["wm"] == final_wm
    want = sorted((k, s, e, n) for k, s, e in sessions if e <= final_wm
                  for n in [sum(1 for x in events if x["k"] == k and s <= x["ts"] < e)])
    assert len(want) > 2300 and sum(1 for w in want if w[2] > final_wm - 2 * SEC) > 0
    fired = sorted((r["k"], r["window_start"], r["window_end"], r["n"]) for r in rows(got))
    assert fired == want


@pytest.mark.parametrize("end_of_input", ["continue", "fire"])
def test_end_of_a_bounded_input_fires_the_last_windows(spark, tmp_path, end_of_input):
    """``endOfInput=fire`` under availableNow: after the last file, one input-less batch moves the
    watermark to the end of time, so the sessions still open fire too and every event is in a
    pane (Beam's and Flink's end of a bounded input); ``continue`` (default) leaves them open for
    the next run."""
    from spark_windowing._time import GLOBAL_END
    rnd = random.Random(3)
    data = tmp_path / "events"
    for v in range(3):
        write_deltalake(str(data), pa.table({"k": [rnd.choice("abc") for _ in range(20)],
                                             "ts": [_ts(T0 + (v * 20 + i) * SEC) for i in range(20)]}), mode="append")
    opts = {"source": "delta", "path": str(data), "timestampColumn": "ts", "keyColumns": "k",
            "window": "session(5 seconds)", "aggregate": "count(*) AS n", "maxFilesPerTrigger": "1",
            "stateLocation": str(tmp_path / "state"), "endOfInput": end_of_input}
    panes = run_panes(spark, opts, str(tmp_path / "chk"))
    counted = sum(r["n"] for r in panes.to_pylist())
    last_wm = offsets(str(tmp_path / "chk"))[-1][1]["wm"]
    if end_of_input == "fire":
        assert counted == 60 and last_wm == GLOBAL_END
    else:
        assert counted < 60 and last_wm < GLOBAL_END   # the last sessions wait for more input


def test_processing_time_windows_fire_without_new_input(spark, tmp_path):
    """Processing-time windows (no timestampColumn): three files of two rows, one a batch, under a
    1-second processingTime trigger. Every window fires once the clock passes its end, also the
    last one, for which no more input comes (the watermark is the batch time). Waits until all 6
    rows are counted; on any machine that is a few seconds after the last file."""
    from deltalake import DeltaTable
    data = tmp_path / "events"
    data.mkdir()
    for f in range(3):
        (data / f"{f}.json").write_text("".join(f'{{"k": "a", "i": {2 * f + j}}}\n' for j in range(2)))
    reader = spark.readStream.format("windowed")
    for k, v in {"source": "json", "path": str(data), "schema": "k string, i long", "keyColumns": "k",
                 "window": "tumbling(3 seconds)", "aggregate": "count(*) AS n", "maxFilesPerTrigger": "1",
                 "stateLocation": str(tmp_path / "state")}.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("windowed").option("path", str(tmp_path / "panes"))
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(processingTime="1 second").start())
    try:
        deadline, counted = time.time() + 240, 0
        while time.time() < deadline and counted < 6 and q.exception() is None:
            time.sleep(1)
            if (tmp_path / "panes" / "triggers" / "_delta_log").exists():
                counted = sum(DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table().column("n").to_pylist())
        assert q.exception() is None
    finally:
        q.stop()
    assert counted == 6
    on_time = [r for r in DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table().to_pylist()]
    assert all(r["pane_timing"] == "ON_TIME" for r in on_time)
