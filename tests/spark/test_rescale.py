"""Rescaling a query's shards across restarts (issue #29), on real Spark.

The same stream runs twice, restarted from its checkpoint twice mid-stream: once with 2 shards
throughout, once with 2, then 5, then 3 shards. The pane tables (``triggers``, ``retractions``,
``current``) and the late rows must be identical. Then a run is killed with kill -9 during the
first micro-batch after a rescale and restarted: identical again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.spark import _rescale_job
from tests.spark._helpers import offsets, rows
from tests.spark.test_source import SEC, T0, _ts

pytestmark = pytest.mark.spark
JOB = os.path.join(os.path.dirname(__file__), "_rescale_job.py")
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])


def _append_events(path: str, first: int, last: int, seed: int = 29) -> None:
    """Versions ``first``..``last - 1`` of the events table: 24 events over 12 keys per version,
    out of order by up to 3 s, and from the third version on two events 8 s and 20 s behind:
    early, on-time and late panes, and dropped (late) rows."""
    for b in range(first, last):
        rnd = random.Random(seed * 1000 + b)
        n = 24
        times = [T0 + b * 2 * SEC + rnd.randrange(-3 * SEC, 3 * SEC) for _ in range(n)]
        if b >= 2:
            times[:2] = [T0 + (b * 2 - 8) * SEC, T0 + (b * 2 - 20) * SEC]
        write_deltalake(path, pa.table({"k": [f"k{rnd.randrange(12)}" for _ in range(n)], "ts": [_ts(t) for t in times],
                                        "v": [rnd.randrange(100) for _ in range(n)]}, schema=SCHEMA), mode="append")


def _tables(out) -> dict[str, list[dict]]:
    """Every pane table and the late rows, in a canonical order, without the wall-clock column."""
    found = {}
    for name in ("triggers", "retractions", "current", "late"):
        table = DeltaTable(str(out / name)).to_pyarrow_table()
        found[name] = rows(table.select(sorted(table.column_names)), drop=("batch_time",))
    return found


def _paths(tmp_path, run: str) -> tuple[str, str, str, str]:
    return (str(tmp_path / "events"), str(tmp_path / f"{run}_state"), str(tmp_path / f"{run}_chk"),
            str(tmp_path / f"{run}_out"))


def _run_in_process(spark, case: str, shards: int, paths) -> None:
    q = _rescale_job.start(spark, case, shards, *paths)
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()


# Marked slow (40-90 s each on 2 cores): CI runs the kill test below, which rescales 2 -> 5 -> 3
# too (session windows, a kill in the first batch at 5 shards) and compares with an unrescaled run.
@pytest.mark.slow
@pytest.mark.parametrize("case", ["tumbling", "session"])
def test_rescale_2_5_3_gives_the_tables_of_an_unrescaled_run(spark, tmp_path, case):
    events = str(tmp_path / "events")
    for phase, (first, last) in enumerate([(0, 3), (3, 6), (6, 9)]):
        _append_events(events, first, last)
        _run_in_process(spark, case, 2, _paths(tmp_path, "plain"))
        _run_in_process(spark, case, (2, 5, 3)[phase], _paths(tmp_path, "rescaled"))
    shard_counts = [end["shards"] for _, end in offsets(str(tmp_path / "rescaled_chk"))]
    assert {2, 5, 3} <= set(shard_counts) and shard_counts == sorted(shard_counts, key=[2, 5, 3].index)
    plain, rescaled = _tables(tmp_path / "plain_out"), _tables(tmp_path / "rescaled_out")
    assert len(plain["triggers"]) > 20 and plain["late"]
    if case == "session":
        assert plain["retractions"]
    assert {r["pane_timing"] for r in plain["triggers"]} >= {"EARLY", "ON_TIME", "LATE"}
    assert rescaled == plain
    shard_dirs = sorted(os.listdir(tmp_path / "rescaled_state" / "shards"))
    assert shard_dirs[:3] == ["0000", "0001", "0002"]


def _start_job(case: str, shards: int, paths) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, JOB, case, str(shards), *paths], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 240) -> bool:
    """kill -9 the job (driver and JVM) once ``ready()``; False if it ended first."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if ready():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.005)
    proc.wait(timeout=max(1.0, deadline - time.time()))
    return False


def test_kill_9_during_the_first_batch_after_a_rescale_then_restart(spark, tmp_path):
    """The runs before the kill share this process's Spark session; the killed run and its restart
    are processes of their own (kill -9 takes the driver and its JVM)."""
    case, events = "session", str(tmp_path / "events")
    _append_events(events, 0, 3)
    for run in ("plain", "crash"):
        _run_in_process(spark, case, 2, _paths(tmp_path, run))
    _append_events(events, 3, 7)
    _run_in_process(spark, case, 2, _paths(tmp_path, "plain"))
    new_shard = tmp_path / "crash_state" / "shards" / "0004"  # a shard only the new count has
    proc = _start_job(case, 5, _paths(tmp_path, "crash"))
    assert _kill_when(proc, lambda: new_shard.exists() and any(new_shard.iterdir())), "the job ended before the kill"
    chk = tmp_path / "crash_chk"
    rescale_batch = next(b for b, (_, end) in enumerate(offsets(str(chk))) if end["shards"] == 5)
    assert not (chk / "commits" / str(rescale_batch)).exists(), "killed after the batch committed"
    assert _start_job(case, 3, _paths(tmp_path, "crash")).wait(300) == 0  # the replay, then 3 shards
    counts = [end["shards"] for _, end in offsets(str(chk))]
    assert counts[rescale_batch] == 5 and counts[-1] == 3
    assert _tables(tmp_path / "crash_out") == _tables(tmp_path / "plain_out")
