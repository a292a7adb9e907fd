"""A script that runs a windowed query and exits at once prints no Java stack trace on the way
out: ``register`` adds a streaming listener (the sink's lease release), and Spark's listener bus
delivers a stopped query's event after the fact, into an interpreter that is gone, unless the
listener is removed at exit (``sink.lease._remove_listener``). Its own interpreter: the exit is
what is tested."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

_SCRIPT = """
from pyspark.sql import SparkSession
import spark_windowing
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
spark_windowing.register(spark)
events = (spark.readStream.format("windowed").option("source", "generator").option("totalEvents", "40")
          .option("eventsPerBatch", "20").option("window", "tumbling(1 minute)").option("aggregate", "count(*) AS n")
          .option("stateLocation", {state!r}).load())
q = (events.writeStream.format("windowed").option("path", {panes!r}).option("checkpointLocation", {chk!r})
     .trigger(availableNow=True).start())
q.awaitTermination()
print("query done", q.exception() is None)
"""


def test_a_script_that_exits_right_after_its_query_prints_no_listener_error(tmp_path):
    code = _SCRIPT.format(state=str(tmp_path / "state"), panes=str(tmp_path / "panes"), chk=str(tmp_path / "chk"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "query done True" in out.stdout
    assert "PythonStreamingQueryListenerWrapper" not in out.stderr and "Connection refused" not in out.stderr, \
        out.stderr[-3000:]
