"""Helpers of the maintenance-while-running tests (``tests/spark/test_maintenance_while_running.py``
with ``deltalake``; written to serve a delta-spark variant in tests/delta too): a retracting
session-window query over parquet files, kept running (the default trigger) while the test feeds it
files step by step, and the checks of its tables (imported by them, never collected)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from sink_helpers import TABLE_NAMES, pane_table, rows, run_tables

SEC = 1_000_000
T0 = 1_700_000_000 * SEC
STEPS = 6
#: Every table a user might maintain: the pane tables under ``panes/``, and the late table.
ALL_TABLES = (*TABLE_NAMES, "late")
#: Windows ending before this are closed after step 3 (the watermark then is past T0 + 60 s, and
#: the lateness and gap are a few seconds): a retention job may delete them from ``current``.
RETENTION_END = T0 + 30 * SEC
OPTIONS = {"source": "parquet", "maxFilesPerTrigger": "1", "timestampColumn": "ts", "keyColumns": "k",
           "window": "session(3 seconds)", "trigger": "AfterWatermark(early=AfterCount(3))",
           "accumulationMode": "accumulating_and_retracting", "allowedLateness": "4 seconds",
           "watermark": "bounded(2 seconds)", "aggregate": "count(*) AS n, sum(v) AS s"}


def write_step(events: Path, step: int) -> None:
    """Input file ``step``, 20 s after the previous one: per key two sessions of three events that
    each fire early, an event bridging the previous file's two sessions (they merge: retractions),
    and one event 60 s behind (the late table)."""
    events.mkdir(parents=True, exist_ok=True)
    base, keys, ts = T0 + step * 20 * SEC, [], []
    for k in ("k0", "k1", "k2"):
        offsets = [0, 500, 1000, 5000, 5500, 6000]
        ts += [base + o * 1000 for o in offsets] + [base - 60 * SEC]
        keys += [k] * 7
        if step:
            ts.append(base - 20 * SEC + 3 * SEC)
            keys.append(k)
    path = events / f"part-{step:02d}.parquet"
    pq.write_table(pa.table({"k": keys, "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
                             "v": list(range(len(ts)))}), path)
    os.utime(path, ns=(1_600_000_000_000_000_000 + step * 10**9,) * 2)   # the file source reads by mtime


def start(spark, root: Path):
    """The query over ``root/events`` into ``root/panes`` (late rows: ``root/late``), default trigger."""
    reader = spark.readStream.format("windowed").options(
        **OPTIONS, path=str(root / "events"), stateLocation=str(root / "state"), lateDataPath=str(root / "late"))
    return (reader.load().writeStream.format("windowed").option("path", str(root / "panes"))
            .option("checkpointLocation", str(root / "chk")).start())


def run_steps(spark, root: Path, between: Callable[[int], None] = lambda step: None) -> None:
    """Feed the running query ``STEPS`` files, one at a time, each processed before the next;
    ``between(step)`` runs after each step while the query is still active."""
    write_step(root / "events", 0)   # the parquet source reads its schema at load()
    q = start(spark, root)
    try:
        for step in range(STEPS):
            if step:
                write_step(root / "events", step)
            q.processAllAvailable()
            assert q.isActive, q.exception()
            between(step)
        q.processAllAvailable()   # whatever the last maintenance left to do
    finally:
        q.stop()
    assert q.exception() is None, q.exception()


def table_uri(root: Path, table: str) -> str:
    return str(root / "late") if table == "late" else str(root / "panes" / table)


def tables(root: Path) -> dict[str, list[tuple]]:
    """Every table's rows (a multiset), without the batch time (each run's wall clock) and, in
    ``current``, ``is_final`` (set when a window closes, by the batch the watermark passes it in)."""
    return run_tables(root, current_drop=("is_final",))


def replayed_current(root: Path) -> list[tuple]:
    """``current`` replayed from the pane log: per key and window the TRIGGER of the last batch
    that touched it, unless that batch only retracted it (rows as ``tables`` gives them)."""
    triggers = pane_table(table_uri(root, "triggers"))
    retractions = pane_table(table_uri(root, "retractions"))
    events = sorted([(r["batch_seq"], 1, r) for r in triggers.to_pylist()] +
                    [(r["batch_seq"], 0, r) for r in retractions.to_pylist()], key=lambda e: (e[0], e[1]))
    live: dict[tuple, dict] = {}
    for seq, is_trigger, r in events:
        kw = (r["k"], r["window_start"], r["window_end"])
        if is_trigger:
            live[kw] = r
        elif live.get(kw, {}).get("batch_seq") != seq:
            live.pop(kw, None)
    names = [n for n in triggers.column_names if n not in ("batch_time", "is_final")]
    return rows(pa.Table.from_pylist(list(live.values()), schema=triggers.schema).select(names))


def without_retired(current: list[tuple], root: Path) -> list[tuple]:
    """``current``'s rows less those a retention job deletes (``window_end < RETENTION_END``)."""
    end = pane_table(table_uri(root, "current")).drop_columns(["batch_time", "is_final"]).column_names.index(
        "window_end")
    return [r for r in current if r[end] >= RETENTION_END]


def assert_as_clean(root: Path, clean: Path, *, retired: bool) -> None:
    """The pane log and the late table hold exactly the clean run's rows (nothing lost or
    duplicated); ``current`` is the pane log's replay, less the retired windows when a retention
    job ran, and the clean run's ``current`` the same way."""
    got, want = tables(root), tables(clean)
    assert want["retractions"] and want["late"]               # the input does retract and drop late rows
    for t in ("triggers", "retractions", "late"):
        assert got[t] == want[t], t
    replay = replayed_current(root)
    if retired:
        replay, want["current"] = without_retired(replay, root), without_retired(want["current"], root)
        assert len(replay) < len(replayed_current(root))     # the retention job deleted something
    assert got["current"] == replay
    assert got["current"] == want["current"]
