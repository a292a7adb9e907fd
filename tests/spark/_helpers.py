"""Helpers for the Spark tests: run a windowed query to completion and read what it produced."""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone

import pyarrow as pa

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def run_panes(spark, options: dict[str, str], checkpoint: str) -> pa.Table:
    """Run ``readStream.format("windowed")`` with availableNow into a memory sink; return all panes."""
    name = "q_" + uuid.uuid4().hex[:8]
    reader = spark.readStream.format("windowed")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("memory").queryName(name)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive, "query did not finish in time"
    assert q.exception() is None, q.exception()
    return spark.table(name).toArrow()


def micros(v) -> int | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        delta = v - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return v


def rows(table: pa.Table, drop: tuple[str, ...] = ()) -> list[dict]:
    """Pane rows as dicts with timestamps as µs ints, minus ``drop`` columns, in a canonical order."""
    out = []
    for r in table.to_pylist():
        d = {k: micros(v) for k, v in r.items() if k not in drop}
        for k, v in d.items():
            if isinstance(v, list):
                d[k] = sorted(v)
        out.append(d)
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True, default=str))


def offsets(checkpoint: str) -> list[tuple[dict, dict]]:
    """(start, end) offsets of every micro-batch from Spark's offset log."""
    d = os.path.join(checkpoint, "offsets")
    ends = {}
    for name in os.listdir(d):
        if name.isdigit():
            with open(os.path.join(d, name)) as f:
                lines = f.read().splitlines()
            ends[int(name)] = json.loads(lines[2])
    out, prev = [], None
    for b in sorted(ends):
        out.append((prev, ends[b]))
        prev = ends[b]
    return out


def run_noop(spark, options: dict[str, str], checkpoint: str) -> None:
    """Run (or resume) a windowed query with availableNow into the noop sink."""
    reader = spark.readStream.format("windowed")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()


def run_to_sink(spark, options: dict[str, str], tmp_path) -> str:
    """Run a windowed query with availableNow into the pane sink at ``tmp_path/panes``; return its
    checkpoint (``tmp_path/chk``), whose offset log a TestStream replay reads."""
    reader = spark.readStream.format("windowed")
    for k, v in options.items():
        reader = reader.option(k, v)
    chk = str(tmp_path / "chk")
    q = (reader.load().writeStream.format("windowed").option("path", str(tmp_path / "panes"))
         .option("checkpointLocation", chk).trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive, "query did not finish in time"
    assert q.exception() is None, q.exception()
    return chk


def replay_versions(stream, checkpoint: str, bundles: list[list[dict]]) -> None:
    """Feed a TestStream the micro-batches Spark ran over a Delta upstream written one version per
    bundle (``k`` string, ``ts``/``v``/``id`` ints): each batch's versions, watermark and batch time
    from the offset log."""
    empty = pa.table({"k": pa.array([], pa.string()), "ts": pa.array([], pa.int64()),
                      "v": pa.array([], pa.int64()), "id": pa.array([], pa.int64())})
    for start, end in offsets(checkpoint):
        first = 0 if start is None else start["up"] + 1
        events = [r for v in range(first, end["up"] + 1) for r in bundles[v]]
        stream.add_elements(events or empty, watermark=end["wm"], processing_time=end["bt"])


def committed_batches(checkpoint) -> int:
    """How many batches a streaming query's checkpoint has committed (``commits/<n>`` files)."""
    d = os.path.join(str(checkpoint), "commits")
    return len([n for n in os.listdir(d) if n.isdigit()]) if os.path.isdir(d) else 0


def run_and_kill(args: list[str], checkpoint, kill_at_commits: int | None, delay: float = 0.0, stderr=None) -> int:
    """Run ``args`` (a job that writes its streaming checkpoint at ``checkpoint``) as a process
    group; with ``kill_at_commits``, kill -9 the whole group (the Python driver and its JVM, no
    clean-up at all) ``delay`` seconds after the checkpoint holds that many committed batches,
    unless it ended by then. Counting commits, not seconds from the start: the kill lands after
    the query's first batch at any machine speed (a kill while Spark writes the query's very
    first offset leaves a temporary file in ``offsets/`` that Spark itself refuses to restart
    over, ``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Returns the exit code (-9: killed)."""
    import signal
    import subprocess
    import time
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if kill_at_commits is not None and committed_batches(checkpoint) >= kill_at_commits:
            try:
                return proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return -9
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"{args[1] if len(args) > 1 else args} did not finish in 300 s")
    return proc.returncode
