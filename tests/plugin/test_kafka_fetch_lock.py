"""Processes that need the Kafka broker's jars at once (two pytest-xdist workers, or both steps of
scripts/test.sh, on a machine whose cache is empty) fetch them one at a time and once: the fetch
runs under an exclusive file lock, and whoever comes second finds it complete.

The fetch itself (Ivy from Maven Central) is replaced here by a slow stand-in that records when it
ran, so the test needs no network; everything around it is scripts/kafka_broker.py's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROCESS = r"""
import importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("kafka_broker", sys.argv[1])
kb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kb)

def slow_fetch(version, lib):
    started = time.time()
    time.sleep(1.0)
    lib.mkdir(parents=True)
    (lib / ".complete").write_text(version)
    with open(sys.argv[2], "a") as out:
        out.write(json.dumps([started, time.time()]) + "\n")

kb._fetch = slow_fetch
print(kb.kafka_lib("9.9.9"))
"""


def test_two_processes_fetch_the_broker_once_one_at_a_time(tmp_path):
    runs = tmp_path / "fetches.jsonl"
    env = {**os.environ, "SPARK_WINDOWING_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", PROCESS, str(ROOT / "scripts" / "kafka_broker.py"), str(runs)],
                              env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    lib = tmp_path / "cache" / "kafka-9.9.9" / "lib"
    assert outs == [str(lib)] * 3
    fetches = [json.loads(line) for line in runs.read_text().splitlines()]
    assert len(fetches) == 1, fetches       # the others waited and reused it
    assert (lib / ".complete").read_text() == "9.9.9"
