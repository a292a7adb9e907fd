"""Parity with Spark: over the same topic, Spark's own Kafka source plus native
``groupBy(window(...))`` / ``session_window`` (append mode: each window once, when the watermark
passes it) emit the same windows and values as the ON_TIME panes of ``source=kafka``.

The records are at most 3 s out of order under a 5 s bounded delay (no late data on either side),
and every partition ends with a record far ahead, so the per-partition watermark (the minimum
over partitions) and Spark's stream-wide one close the same windows.

Spark's Kafka connector (``spark-sql-kafka-0-10``) is published on Maven Central per Spark
version, and not (yet) for the newest pyspark, so this test lives with the interoperability tests
that ``scripts/test.sh`` runs in its second virtualenv (pyspark 4.2, see ``scripts/_setup_delta.sh``):
the native job runs on that pyspark with the connector of the same version.

``spark_windowing.window(df)`` over Spark's Kafka source + ``from_json`` (issue #28) gives the same
windows too: one ON_TIME pane each (the default trigger; no late data), equal to ours."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark._helpers import micros, offsets, run_panes
from tests.spark.kafka_helpers import new_topic, produce_json
from tests.spark.test_source import SEC, T0

pytestmark = pytest.mark.spark
HERE = Path(__file__).resolve().parent
MAX_OFFSETS = "50"  # per micro-batch on both sides: several batches, watermarks advancing between them


def _native(kafka_broker, topic: str, window: str, tmp_path, engine: str = "native", checkpoint: str = "") -> list[list]:
    out = tmp_path / f"{engine}-{window.replace(':', '-')}.json"
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1]), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, str(HERE / "_kafka_native_job.py"), kafka_broker.bootstrap, topic,
                           str(out), window, "5", MAX_OFFSETS, engine, checkpoint], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return sorted(json.loads(out.read_text()))


def _topic(kafka_broker) -> str:
    """A 2-partition topic of 120 JSON records, 5 keys, about one record every 0.7 s of event time,
    up to 3 s out of order; each partition ends with a record far ahead."""
    topic = new_topic(kafka_broker, partitions=2)
    rnd = random.Random(3)
    rows = []
    for i in range(120):
        rows.append({"k": f"k{rnd.randrange(5)}", "ts": T0 + i * 700_000 - rnd.randrange(3 * SEC), "v": i, "id": i})
    rows += [{"k": "end", "ts": T0 + 1000 * SEC, "v": 0, "id": 1000 + p} for p in range(2)]
    produce_json(kafka_broker, topic, rows, partition_of=lambda r: r["id"] % 2)
    return topic


def _ours_on_time(delta_spark, kafka_broker, topic: str, window: str, tmp_path) -> list[list]:
    opt = {"tumbling:10": "tumbling(10 seconds)", "session:4": "session(4 seconds)"}[window]
    ours = run_panes(delta_spark, {
        "source": "kafka", "kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": topic,
        "startingOffsets": "earliest", "maxOffsetsPerTrigger": MAX_OFFSETS, "schema": "k string, ts long, v long, id long",
        "timestampColumn": "ts", "timestampUnit": "us", "keyColumns": "k", "window": opt,
        "aggregate": "count(*) AS n, sum(v) AS total", "watermark": "bounded(5 seconds)",
        "stateLocation": str(tmp_path / f"state-{window}")}, str(tmp_path / f"chk-{window}"))
    assert len(offsets(str(tmp_path / f"chk-{window}"))) >= 3, window  # several micro-batches
    return sorted([r["k"], micros(r["window_start"]), micros(r["window_end"]), r["n"], r["total"]]
                  for r in ours.to_pylist() if r["pane_timing"] == "ON_TIME")


@pytest.mark.parametrize("window", ["tumbling:10", pytest.param("session:4", marks=pytest.mark.slow)])
def test_same_on_time_windows_as_sparks_kafka_source_and_native_windows(delta_spark, kafka_broker, tmp_path,
                                                                        window):
    """Against Spark's Kafka source and ``window()`` (CI) or ``session_window`` (marked slow: a
    second Spark process with the Kafka connector, about a minute)."""
    topic = _topic(kafka_broker)
    native = _native(kafka_broker, topic, window, tmp_path)
    assert len(native) > 8, window
    assert _ours_on_time(delta_spark, kafka_broker, topic, window, tmp_path) == native, window


@pytest.mark.slow  # about 45 s on 2 cores; window(df) = format("windowed") runs in CI in tests/spark/test_window_df.py
def test_window_df_over_sparks_kafka_source_and_from_json_gives_the_same_windows(delta_spark, kafka_broker,
                                                                                   tmp_path):
    topic = _topic(kafka_broker)
    chk = str(tmp_path / "window_df_chk")
    _native(kafka_broker, topic, "session:4", tmp_path, engine="window_df", checkpoint=chk)
    # window(df) steps only for input (Spark runs a stateless query's batch only then): the windows
    # the far-ahead records closed fire with the next records, read by a restart from the checkpoint
    produce_json(kafka_broker, topic, [{"k": "end", "ts": T0 + 1001 * SEC, "v": 0, "id": 2000 + p} for p in range(2)],
                 partition_of=lambda r: r["id"] % 2)
    panes = _native(kafka_broker, topic, "session:4", tmp_path, engine="window_df", checkpoint=chk)
    assert {p[5] for p in panes} == {"ON_TIME"}, panes
    got = sorted(p[:5] for p in panes)
    assert len(got) > 8
    assert got == _ours_on_time(delta_spark, kafka_broker, topic, "session:4", tmp_path)
