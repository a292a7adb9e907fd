"""Exactly once for ``spark_windowing.window(df)``: kill -9 of the driver (and its JVM) mid-stream
and a restart from the same checkpoint give the pane table (Spark's file sink) and the late
table (Delta) of an uninterrupted run over the same micro-batches.

The same micro-batches: Spark's file source logs the files of a batch (``sources/0/<n>``) before the
batch's offsets (``offsets/<n>``). A kill between the two leaves a logged entry no batch names; the
restarted query plans its next batch to the next entry, so that batch reads two files (Spark's
batching, not ours: every file is still read once). Panes depend on batch boundaries (early
firings, the watermark per batch), so the uninterrupted run is made to read the crashed run's
batches: one file per batch, holding that batch's files' rows."""

from __future__ import annotations

import json
import os
import random
import sys

import pytest
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from tests.spark import _window_df_job
from tests.spark._helpers import rows, run_and_kill
from tests.spark.test_source_replay import _panes
from tests.spark.test_window_df import make_bundles, write_bundles

pytestmark = pytest.mark.spark
JOB = os.path.join(os.path.dirname(__file__), "_window_df_job.py")


def _run(tmp, name: str, kill_at_commits: int | None, rnd: random.Random) -> int:
    """Run the job; with ``kill_at_commits``, kill -9 it (a random moment of the next batch) once
    its checkpoint holds that many committed batches. Return the exit code (-9: killed)."""
    chk = tmp / f"{name}_chk"
    return run_and_kill([sys.executable, JOB, str(tmp / "events"), str(chk), str(tmp / f"{name}_out"),
                         str(tmp / f"{name}_late")], chk, kill_at_commits, rnd.uniform(0.0, 1.5))


def _log(path) -> list[str]:
    """The JSON lines of a Spark metadata-log file (after its version line)."""
    with open(path) as f:
        return [line for line in f.read().splitlines()[1:] if line.strip()]


def batch_files(checkpoint) -> list[list[str]]:
    """The file names each micro-batch of the query read, in batch order, from its checkpoint:
    batch n reads the file-source log entries after batch n-1's ``logOffset`` up to its own."""
    chk, out, last = str(checkpoint), [], -1
    batches = sorted(int(n) for n in os.listdir(os.path.join(chk, "offsets")) if n.isdigit())
    for b in batches:
        # the file source's offset (window(df)'s ticks, a second source, have their own line)
        log_offset = next(json.loads(line)["logOffset"] for line in _log(os.path.join(chk, "offsets", str(b)))
                          if line.startswith("{") and "logOffset" in line)
        out.append([os.path.basename(json.loads(line)["path"])
                    for entry in range(last + 1, log_offset + 1)
                    for line in _log(os.path.join(chk, "sources", "0", str(entry)))])
        last = log_offset
    return out


def write_planned(events, planned, batches: list[list[str]]) -> dict[str, list[str]]:
    """``planned``: one file per non-empty batch of ``batches``, holding its files' rows, timed in
    batch order (so the file source reads them one batch each, as the crashed run did). Returns
    each new file's name -> the names of the files it holds."""
    os.makedirs(planned)
    made = {}
    for i, names in enumerate(b for b in batches if b):
        made[name := f"part-{i:04d}.parquet"] = names
        path = os.path.join(str(planned), name)
        pq.write_table(pa.concat_tables(pq.read_table(os.path.join(str(events), n)) for n in names), path)
        os.utime(path, ns=(1_600_000_000_000_000_000 + i * 10**9,) * 2)
    return made


def _late(path) -> list[dict]:
    return rows(DeltaTable(str(path)).to_pyarrow_table(), drop=("batch_time",))


def test_kill_9_and_restart_of_window_df_gives_the_tables_of_an_uninterrupted_run(spark, tmp_path):
    write_bundles(str(tmp_path / "events"), make_bundles(3, n_bundles=9))
    rnd = random.Random(28)
    assert _run(tmp_path, "crash", 3, rnd) == -9
    assert _run(tmp_path, "crash", None, rnd) == 0
    batches = batch_files(tmp_path / "crash_chk")
    assert sorted(n for b in batches for n in b) == sorted(os.listdir(tmp_path / "events"))  # each file once
    made = write_planned(tmp_path / "events", tmp_path / "planned", batches)
    # the uninterrupted run in this process's session (2 cores, 2 shuffle partitions, UTC)
    _window_df_job.run(spark, *(str(tmp_path / n) for n in ("planned", "clean_chk", "clean_out", "clean_late")))
    assert [[n for p in b for n in made[p]] for b in batch_files(tmp_path / "clean_chk")] == batches
    clean, crashed = _panes(tmp_path / "clean_out"), _panes(tmp_path / "crash_out")
    assert len(clean) > 20
    assert {"TRIGGER", "RETRACTION"} <= {r["kind"] for r in clean}
    assert crashed == clean
    late = _late(tmp_path / "clean_late")
    assert late and _late(tmp_path / "crash_late") == late
    # the state of the restarted run was where the first run left it: under the job's warehouse,
    # in the directory of the query id the checkpoint keeps (no stateLocation option); beside it
    # ``ticks``, where each run's shards name that directory for window(df)'s ticks (source.ticks)
    assert sorted(os.listdir(tmp_path / "crash_chk_warehouse" / "window-df-state")) == \
        sorted([_query_id(tmp_path / "crash_chk"), "ticks"])


def _query_id(checkpoint) -> str:
    with open(os.path.join(str(checkpoint), "metadata")) as f:
        return json.load(f)["id"]
