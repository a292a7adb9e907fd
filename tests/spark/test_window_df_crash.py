"""Exactly once for ``spark_windowing.window(df)``: kill -9 of the driver (and its JVM) mid-stream,
twice, and restarts from the same checkpoint give the pane table (Spark's file sink) and the late
table (Delta) of an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from deltalake import DeltaTable

from tests.spark._helpers import rows
from tests.spark.test_source_replay import _panes
from tests.spark.test_window_df import make_bundles, write_bundles

pytestmark = pytest.mark.spark
JOB = os.path.join(os.path.dirname(__file__), "_window_df_job.py")


def _commits(checkpoint) -> int:
    d = os.path.join(str(checkpoint), "commits")
    return len([n for n in os.listdir(d) if n.isdigit()]) if os.path.isdir(d) else 0


def _run(tmp, name: str, kill_at_commits: int | None, rnd: random.Random) -> int:
    """Run the job; with ``kill_at_commits``, kill -9 it (a random moment of the next batch) once
    its checkpoint holds that many committed batches. Return the exit code (-9: killed)."""
    chk = tmp / f"{name}_chk"
    proc = subprocess.Popen([sys.executable, JOB, str(tmp / "events"), str(chk), str(tmp / f"{name}_out"),
                             str(tmp / f"{name}_late")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if kill_at_commits is not None and _commits(chk) >= kill_at_commits:
            time.sleep(rnd.uniform(0.0, 1.5))
            os.killpg(proc.pid, signal.SIGKILL)  # the python driver and its JVM, no clean-up at all
            proc.wait()
            return -9
        time.sleep(0.1)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("the job did not finish in 300 s")
    return proc.returncode


def _late(path) -> list[dict]:
    return rows(DeltaTable(str(path)).to_pyarrow_table(), drop=("batch_time",))


def test_kill_9_and_restart_of_window_df_gives_the_tables_of_an_uninterrupted_run(tmp_path):
    write_bundles(str(tmp_path / "events"), make_bundles(3, n_bundles=9))
    rnd = random.Random(28)
    assert _run(tmp_path, "clean", None, rnd) == 0
    assert _run(tmp_path, "crash", 2, rnd) == -9
    assert _run(tmp_path, "crash", 5, rnd) == -9
    assert _run(tmp_path, "crash", None, rnd) == 0
    clean, crashed = _panes(tmp_path / "clean_out"), _panes(tmp_path / "crash_out")
    assert len(clean) > 20
    assert {"TRIGGER", "RETRACTION"} <= {r["kind"] for r in clean}
    assert crashed == clean
    late = _late(tmp_path / "clean_late")
    assert late and _late(tmp_path / "crash_late") == late
