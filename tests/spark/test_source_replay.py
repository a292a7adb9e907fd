"""Idempotent replay and time progress of the windowed source, on real Spark processes."""

from __future__ import annotations

import os
import random
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from tests.spark import _replay_job
from tests.spark._helpers import micros, offsets, rows, run_and_kill
from tests.spark.test_source import SEC, T0, _ts

pytestmark = pytest.mark.spark
JOB = os.path.join(os.path.dirname(__file__), "_replay_job.py")


def _write_events(path: str, versions: int, seed: int = 11, sizes: list[int] | None = None) -> None:
    """``versions`` Delta versions of 20 events each (``sizes``: of these many, cycled)."""
    rnd = random.Random(seed)
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    for b in range(versions):
        n = 20 if sizes is None else sizes[b % len(sizes)]
        table = pa.table({"k": [f"k{rnd.randrange(5)}" for _ in range(n)],
                          "ts": [_ts(T0 + b * 2 * SEC + rnd.randrange(-3 * SEC, 3 * SEC)) for _ in range(n)],
                          "v": [rnd.randrange(100) for _ in range(n)]}, schema=schema)
        write_deltalake(path, table, mode="append")


def _run(tmp, name: str, kill_at_commits: int | None, execution: str = "executors", delay: float = 0.0) -> int:
    """Run the job; with ``kill_at_commits``, kill -9 it ``delay`` seconds after its checkpoint
    holds that many committed batches. Return the exit code (its stderr: ``<name>_stderr.txt``,
    the last run's)."""
    with open(tmp / f"{name}_stderr.txt", "w") as err:
        return run_and_kill([sys.executable, JOB, str(tmp / "events"), str(tmp / f"{name}_state"),
                             str(tmp / f"{name}_chk"), str(tmp / f"{name}_out"), execution],
                            tmp / f"{name}_chk", kill_at_commits, delay, stderr=err)


def _committed_files(path) -> list[str]:
    """The files Spark's file sink committed, from its ``_spark_metadata`` log: a task killed with
    the driver can leave a partial or orphaned file in the directory, which readers must ignore
    (Spark's own reader of a sink directory does the same)."""
    import json
    from urllib.parse import unquote, urlparse
    log = os.path.join(str(path), "_spark_metadata")
    files: set[str] = set()
    for name in os.listdir(log):
        if not name.split(".")[0].isdigit():
            continue
        with open(os.path.join(log, name)) as f:
            for line in f.read().splitlines()[1:]:   # first line: the log format version
                entry = json.loads(line)
                local = unquote(urlparse(entry["path"]).path)
                if entry.get("action", "add") == "add":
                    files.add(local)
                else:
                    files.discard(local)
    return sorted(files)


def _panes(path) -> list[dict]:
    table = pa.concat_tables([pq.read_table(f) for f in _committed_files(path)])
    return rows(table.select(sorted(table.column_names)), drop=("batch_time",))


@pytest.mark.parametrize("execution", ["executors", "driver"])
def test_kill_9_and_restart_gives_the_panes_of_an_uninterrupted_run(spark, tmp_path, execution):
    """With ``execution=driver`` the batch a kill interrupts was stepped on the driver; the restart
    replays it in a task (nothing cached in the new process) from the snapshot at its start."""
    _write_events(str(tmp_path / "events"), versions=12)
    # the uninterrupted run in this process's session (the shared fixture: 2 cores, 2 shuffle
    # partitions, UTC, as the job's own session)
    _replay_job.run(spark, *(str(tmp_path / n) for n in ("events", "clean_state", "clean_chk", "clean_out")),
                    execution)
    rnd = random.Random(5)
    kills = 0
    for attempt in range(8):
        # after 1-3 of the ~13 batches, within 0.3 s: mid-run whatever the machine's speed
        code = _run(tmp_path, "crash", rnd.randint(1, 3) if kills < 1 else None, execution, rnd.uniform(0.0, 0.3))
        if code == 0:
            break
        assert code == -9, (tmp_path / "crash_stderr.txt").read_text()[-3000:]
        kills += 1
    assert code == 0 and kills >= 1, f"kills={kills}"
    clean, crashed = _panes(tmp_path / "clean_out"), _panes(tmp_path / "crash_out")
    assert len(clean) > 20
    assert {"TRIGGER", "RETRACTION"} <= {r["kind"] for r in clean}
    assert crashed == clean


def test_on_time_pane_within_two_trigger_intervals_without_new_input(spark, tmp_path):
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    write_deltalake(str(tmp_path / "events"), pa.table(
        {"k": ["a", "a", "a"], "ts": [_ts(T0 + SEC), _ts(T0 + 2 * SEC), _ts(T0 + 15 * SEC)], "v": [1, 2, 3]},
        schema=schema))
    interval_s = 2
    q = (spark.readStream.format("windowed").option("source", "delta").option("path", str(tmp_path / "events"))
         .option("timestampColumn", "ts").option("keyColumns", "k").option("window", "tumbling(10 seconds)")
         .option("aggregate", "sum(v) AS total").option("stateLocation", str(tmp_path / "state")).load()
         .writeStream.format("memory").queryName("ontime").option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(processingTime=f"{interval_s} seconds").start())
    try:
        deadline = time.time() + 240
        on_time = []
        while time.time() < deadline and not on_time:
            time.sleep(0.2)
            on_time = [r for r in spark.table("ontime").collect() if r["pane_timing"] == "ON_TIME"]
        assert on_time, "no ON_TIME pane"
        wanted = on_time[0]["batch_seq"] - 1  # batch_seq counts from 1, batchId from 0
        progress = {}
        while time.time() < deadline and wanted not in progress:  # progress is posted after the commit
            time.sleep(0.2)
            progress = {p["batchId"]: p for p in q.recentProgress}
    finally:
        q.stop()
    assert on_time[0]["total"] == 3 and micros(on_time[0]["window_start"]) == T0
    data_batch = min(b for b, p in progress.items() if p["numInputRows"] is not None)
    first = progress[data_batch]
    pane_batch = progress[wanted]
    # the very next trigger fires it, with no new input (its offset reads nothing more upstream):
    # "within two trigger intervals" as a fact about batches, true at any speed of the machine
    assert pane_batch["batchId"] == first["batchId"] + 1, "the ON_TIME pane needs the watermark of the data batch"
    ends = {batch: end for batch, (_, end) in enumerate(offsets(str(tmp_path / "chk")))}
    assert ends[pane_batch["batchId"]]["up"] == ends[first["batchId"]]["up"]
    from datetime import datetime
    t_data_done = datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp() + \
        first["durationMs"]["triggerExecution"] / 1000
    t_pane = datetime.fromisoformat(pane_batch["timestamp"].replace("Z", "+00:00")).timestamp()
    print(f"ON_TIME pane {t_pane - t_data_done:.2f} s after the data batch ({interval_s} s trigger)")


def test_processing_time_firing_schedules_its_own_batch(spark, tmp_path):
    """AfterProcessingTime(1 second): the EARLY pane comes in a later micro-batch with no new input."""
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    write_deltalake(str(tmp_path / "events"), pa.table({"k": ["a", "b"], "ts": [_ts(T0), _ts(T0 + SEC)],
                                                        "v": [1, 2]}, schema=schema))
    q = (spark.readStream.format("windowed").option("source", "delta").option("path", str(tmp_path / "events"))
         .option("timestampColumn", "ts").option("keyColumns", "k").option("window", "tumbling(1 hour)")
         .option("trigger", "AfterWatermark(early=AfterProcessingTime(1 second))")
         .option("aggregate", "sum(v) AS total").option("stateLocation", str(tmp_path / "state")).load()
         .writeStream.format("memory").queryName("proc_time").option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.time() + 60
        early = []
        while time.time() < deadline and len(early) < 2:
            time.sleep(0.2)
            early = [r for r in spark.table("proc_time").collect() if r["pane_timing"] == "EARLY"]
        progress = list(q.recentProgress)
    finally:
        q.stop()
    assert sorted((r["k"], r["total"]) for r in early) == [("a", 1), ("b", 2)]
    by_seq = {end["seq"]: (start, end) for start, end in offsets(str(tmp_path / "chk"))}
    for r in early:  # fired by a batch that read no new upstream data, >= 1 s after the data batch
        start, end = by_seq[r["batch_seq"]]
        assert start is not None and start["up"] == end["up"]
        data_end = next(e for s, e in by_seq.values() if (s is None or s["up"] != e["up"]))
        assert end["bt"] - data_end["bt"] >= SEC
    assert progress
