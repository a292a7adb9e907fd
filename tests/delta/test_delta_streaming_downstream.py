"""Ordinary Spark streaming after ours: ``spark.readStream.format("delta").load("P/triggers")``
tails the pane history of a windowed query while it runs and sees every committed row exactly
once (across a stop and restart of the windowed query from its checkpoint, too)."""

from __future__ import annotations

import time

import pytest
from deltalake import DeltaTable

from sink_helpers import rows

WINDOWED = {"source": "generator", "totalEvents": "900", "eventsPerBatch": "150", "keys": "5",
            "eventInterval": "100 milliseconds", "timestampColumn": "event_time", "keyColumns": "user_id",
            "window": "tumbling(5 seconds)", "trigger": "AfterWatermark(early=AfterCount(10))",
            "accumulationMode": "accumulating", "aggregate": "sum(amount) AS total, count(*) AS n",
            "watermark": "bounded(1 second)"}


def start_windowed(spark, tmp_path):
    reader = spark.readStream.format("windowed")
    for k, v in {**WINDOWED, "stateLocation": str(tmp_path / "state")}.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.format("windowed").option("path", str(tmp_path / "panes"))
            .option("checkpointLocation", str(tmp_path / "chk_up")).trigger(processingTime="1 second").start())


def wait_for_version(uri: str, version: int, query) -> None:
    deadline = time.time() + 180
    while not DeltaTable.is_deltatable(uri) or DeltaTable(uri).version() < version:
        assert time.time() < deadline and query.isActive, query.exception()
        time.sleep(0.2)


@pytest.mark.spark
def test_delta_stream_tails_the_triggers_of_a_running_windowed_query(delta_spark, tmp_path):
    triggers = str(tmp_path / "panes" / "triggers")
    upstream = start_windowed(delta_spark, tmp_path)
    downstream = None
    try:
        wait_for_version(triggers, 2, upstream)
        upstream.stop()                                 # pause the windowed query mid-stream
        downstream = (delta_spark.readStream.format("delta").load(triggers)
                      .writeStream.format("memory").queryName("pane_history")
                      .option("checkpointLocation", str(tmp_path / "chk_down")).start())
        downstream.processAllAvailable()
        first = delta_spark.table("pane_history").count()
        upstream = start_windowed(delta_spark, tmp_path)  # resumes from its checkpoint
        upstream.processAllAvailable()
        downstream.processAllAvailable()
        tailed = [p["numInputRows"] for p in downstream.recentProgress if p["numInputRows"] > 0]
    finally:
        upstream.stop()
        if downstream is not None:
            downstream.stop()
    assert upstream.exception() is None and downstream.exception() is None

    committed = DeltaTable(triggers)
    got = delta_spark.table("pane_history").toArrow()
    assert 0 < first < got.num_rows                     # rows arrived in more than one batch
    assert len(tailed) >= 2 and sum(tailed) == got.num_rows
    assert rows(got) == rows(committed.to_pyarrow_table())
