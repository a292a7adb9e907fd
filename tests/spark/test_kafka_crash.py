"""Exactly once from Kafka under ``kill -9`` and a broker restart: the pipeline
(tests/spark/kafka_pipeline.py: ``source=kafka`` -> windowed sink + late table) runs in a
subprocess that is killed (SIGKILL to its process group) right after a micro-batch started, and
restarted from its checkpoint; during the second run the broker is restarted as well (SIGKILL,
then started on the same data). The pane tables and the late table then equal those of an
uninterrupted run, row for row (all but ``batch_time``, the wall clock of each batch)."""

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

from tests.spark.kafka_helpers import new_topic, produce_json
from tests.spark.test_kafka import _options, _records
from tests.spark.test_sink_crash import _wait_until_group_gone

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # ~3 min (three pipeline runs, a broker restart)
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _tables(out: Path) -> dict[str, list[str]]:
    got = {}
    for name, path in [("triggers", out / "panes" / "triggers"), ("retractions", out / "panes" / "retractions"),
                       ("current", out / "panes" / "current"), ("late", out / "late")]:
        rows = DeltaTable(str(path)).to_pyarrow_table().drop_columns(["batch_time"]).to_pylist() \
            if DeltaTable.is_deltatable(str(path)) else []
        got[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return got


def _start(options: dict, out: Path, attempt: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    log = open(out / f"run-{attempt}.log", "w")
    return subprocess.Popen([sys.executable, str(HERE / "kafka_pipeline.py"), "--options", json.dumps(options),
                             "--out", str(out)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _batches(out: Path) -> int:
    d = out / "chk" / "offsets"
    return len(list(d.glob("[0-9]*"))) if d.exists() else 0


def _wait_for_new_batch(proc: subprocess.Popen, out: Path) -> None:
    seen = _batches(out)
    while _batches(out) <= seen and proc.poll() is None:
        time.sleep(0.02)  # polling another process's files


def test_kill_9_and_broker_restart_then_tables_equal_uninterrupted_run(spark, kafka_broker, tmp_path):
    from tests.spark.kafka_pipeline import run
    topic = new_topic(kafka_broker, partitions=3)
    recs = _records(11, 150, 3)
    produce_json(kafka_broker, topic, [r for _, r in recs], partition_of=lambda r: recs[r["id"]][0])
    extra = {"trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
             "accumulationMode": "accumulating_and_retracting", "maxOffsetsPerTrigger": "10"}

    base = tmp_path / "baseline"
    run(spark, _options(topic, kafka_broker, base, **extra), base)

    out = tmp_path / "crashed"
    out.mkdir()
    opts = _options(topic, kafka_broker, out, **extra)
    rng = random.Random(15)
    landed = []
    for attempt in range(2):
        proc = _start(opts, out, attempt)
        if attempt == 1:  # mid-run, the broker goes down hard and comes back on the same data
            _wait_for_new_batch(proc, out)
            kafka_broker.stop(kill=True)
            kafka_broker.start()
        _wait_for_new_batch(proc, out)
        time.sleep(rng.uniform(0.0, 1.0))
        if attempt == 1 and proc.poll() not in (None, 0):
            # on a slow machine the broker's restart can outlast the source's metadata timeout:
            # the query then fails on its own, naming the broker, which is a crash as good as
            # the kill (the next run continues from the checkpoint either way)
            log = (out / f"run-{attempt}.log").read_text(errors="replace")
            assert "no broker answered within" in log or "cannot read the offsets" in log, log[-3000:]
        else:
            assert proc.poll() is None, "the pipeline finished before the kill: add records"
            os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and Python workers
            proc.wait()
        _wait_until_group_gone(proc.pid)
        landed.append(_batches(out))
    proc = _start(opts, out, 2)
    assert proc.wait(timeout=600) == 0, (out / "run-2.log").read_text()[-3000:]
    assert len(landed) == 2 and landed[0] <= landed[1] < _batches(out)

    got, want = _tables(out), _tables(base)
    assert len(want["triggers"]) > 10 and len(want["retractions"]) > 0
    assert got == want
