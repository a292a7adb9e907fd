"""Exactly once under ``kill -9``: the pipeline (tests/spark/sink_pipeline.py: test_panes -> windowed
sink) runs in a subprocess that is killed (SIGKILL to its whole process group: Python driver, JVM,
Python workers) at random moments and restarted from its checkpoint until it finishes. The three
tables must then equal those of an uninterrupted run, row for row (no duplicate, no missing row).

Kill moments alternate between two random schemes, so both the executors' work and the driver's
commit get hit::

    batch N starts (offsets/N appears) --- uniform(0, 2 s) ---> kill      ("during a batch")
    a new triggers commit appears      --- uniform(0, 60 ms) --> kill     ("inside the commit":
                                           retractions and current may not have committed yet)

The CI variant kills twice (once per scheme); the slow one 20 times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

import pane_source
from sink_helpers import TABLE_NAMES, pane_table, rows, run_pipeline, table_rows

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PIPELINE = HERE / "sink_pipeline.py"
KEYS = 6


@pytest.mark.spark
def test_kill_9_twice_then_tables_equal_uninterrupted_run(spark, tmp_path):
    _crash_and_compare(spark, tmp_path, kills=2, batches=8, seed=20240105)


@pytest.mark.spark
@pytest.mark.slow
def test_kill_9_twenty_times_then_tables_equal_uninterrupted_run(spark, tmp_path):
    _crash_and_compare(spark, tmp_path, kills=20, batches=48, seed=20240120)


def _crash_and_compare(spark, tmp_path: Path, *, kills: int, batches: int, seed: int) -> None:
    pane_source.register(spark)
    baseline = tmp_path / "baseline"
    run_pipeline(spark, baseline / "panes", baseline / "chk", batches=batches, keys=KEYS)

    crashed = tmp_path / "crashed"
    started = time.monotonic()
    landed = _run_with_kills(crashed, kills=kills, batches=batches, rng=random.Random(seed))
    print(f"seed={seed}, {time.monotonic() - started:.0f}s of runs; kills landed:", *landed, sep="\n  ")

    assert len(landed) == kills
    got = table_rows(crashed / "panes")
    assert got == table_rows(baseline / "panes")
    assert got == {t: rows(v) for t, v in pane_source.expected_tables(batches, KEYS).items()}
    assert not list((crashed / "panes" / "_staging").glob("*.parquet"))
    _assert_current_is_last_trigger(crashed / "panes")
    _assert_retractions_match_triggers(crashed / "panes")


# --------------------------------------------------------------------------- the kill loop

def _run_with_kills(work: Path, *, kills: int, batches: int, rng: random.Random) -> list[str]:
    """Start, kill and restart the pipeline until ``kills`` kills happened, then let it finish.
    Returns where each kill landed."""
    panes, chk = work / "panes", work / "chk"
    landed: list[str] = []
    work.mkdir(parents=True)
    for attempt in range(kills + 1):
        log = work / f"run-{attempt}.log"
        started = time.monotonic()
        proc = _start(panes, chk, batches, log)
        if len(landed) == kills:
            assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
            return landed
        scheme = "batch" if attempt % 2 == 0 else "commit"
        if not _wait_for_moment(proc, panes, chk, scheme, rng):
            pytest.fail(f"the pipeline finished (rc={proc.returncode}) before kill {len(landed) + 1}; "
                        f"raise `batches`\n{log.read_text()[-3000:]}")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _wait_until_group_gone(proc.pid)
        landed.append(f"{scheme} after {time.monotonic() - started:.1f}s: {_where(panes, chk)}")
    raise AssertionError("unreachable")


def _start(panes: Path, chk: Path, batches: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)]),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, str(PIPELINE), "--path", str(panes), "--checkpoint", str(chk),
             "--batches", str(batches), "--keys", str(KEYS), "--local-dir", str(log.parent / "spark-local")],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_moment(proc: subprocess.Popen, panes: Path, chk: Path, scheme: str,
                     rng: random.Random) -> bool:
    """Wait for the scheme's event, then a random delay; False if the process ended first."""
    if scheme == "batch":
        seen, probe, delay = _offsets(chk), lambda: _offsets(chk), rng.uniform(0.0, 2.0)
    else:
        seen, probe, delay = _log_versions(panes), lambda: _log_versions(panes), rng.uniform(0.0, 0.06)
    while probe() == seen:
        if proc.poll() is not None:
            return False
        time.sleep(0.01)    # polling an external process's files; nothing to wait on instead
    time.sleep(delay)       # the random part of the kill moment
    return proc.poll() is None


def _offsets(chk: Path) -> int:
    return len(list((chk / "offsets").glob("[0-9]*"))) if (chk / "offsets").exists() else 0


def _log_versions(panes: Path) -> int:
    log = panes / "triggers" / "_delta_log"
    return len(list(log.glob("*.json"))) if log.exists() else 0


def _wait_until_group_gone(pgid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        if all(_is_zombie(pid) for pid in _group_members(pgid)):
            return
        time.sleep(0.05)
    raise AssertionError(f"processes of group {pgid} survived SIGKILL: {_group_members(pgid)}")


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _where(panes: Path, chk: Path) -> str:
    """Where a kill landed: Spark's last offset/commit and each table's committed batch."""
    def last(d: Path) -> int:
        names = [int(p.name) for p in d.glob("[0-9]*")] if d.exists() else []
        return max(names, default=-1)

    done = {}
    for t in TABLE_NAMES:
        try:
            table = DeltaTable(str(panes / t))
        except TableNotFoundError:          # the kill came before the tables were created
            done[t] = "-"
            continue
        versions = [v for v in (table.transaction_version(a) for a in _app_ids(table)) if v is not None]
        done[t] = max(versions, default=-1)
    return f"offsets={last(chk / 'offsets')},commits={last(chk / 'commits')}," + \
        ",".join(f"{t}={v}" for t, v in done.items())


def _app_ids(table: DeltaTable) -> set[str]:
    return {c.get("txn", {}).get("appId") for c in _log_actions(table)} - {None}


def _log_actions(table: DeltaTable) -> list[dict]:
    log = Path(table.table_uri.removeprefix("file://")) / "_delta_log"
    return [json.loads(line) for f in sorted(log.glob("*.json")) for line in f.read_text().splitlines()]


# --------------------------------------------------------------------------- invariants

def _assert_current_is_last_trigger(panes: Path) -> None:
    """current = per key and window, the TRIGGER of the last batch that touched it, unless that
    batch only retracted it."""
    triggers = DeltaTable(str(panes / "triggers")).to_pyarrow_table().to_pylist()
    retractions = DeltaTable(str(panes / "retractions")).to_pyarrow_table().to_pylist()
    events = sorted([(r["batch_seq"], 1, r) for r in triggers] + [(r["batch_seq"], 0, r) for r in retractions],
                    key=lambda e: (e[0], e[1]))
    expected: dict[tuple, dict] = {}
    for seq, is_trigger, r in events:
        kw = (r["user_id"], r["window_start"], r["window_end"])
        if is_trigger:
            expected[kw] = r
        elif expected.get(kw, {}).get("batch_seq") != seq:      # no trigger for it in this batch
            expected.pop(kw, None)
    current = pane_table(panes / "current").to_pylist()
    assert len(current) == len({(r["user_id"], r["window_start"], r["window_end"]) for r in current})
    assert {(r["user_id"], r["window_start"], r["window_end"]): r for r in current} == expected


def _assert_retractions_match_triggers(panes: Path) -> None:
    """Every RETRACTION carries the values of an earlier TRIGGER of its key, window and pane index."""
    fields = ("user_id", "window_start", "window_end", "pane_index", "total", "n", "pane_timing",
              "is_final", "pane_timestamp")
    triggers = {tuple(r[f] for f in fields): r["batch_seq"]
                for r in DeltaTable(str(panes / "triggers")).to_pyarrow_table().to_pylist()}
    retractions = DeltaTable(str(panes / "retractions")).to_pyarrow_table().to_pylist()
    assert retractions
    for r in retractions:
        key = tuple(r[f] for f in fields)
        assert key in triggers, f"retraction without its trigger: {r}"
        assert triggers[key] < r["batch_seq"]
