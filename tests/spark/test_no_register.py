"""``format("windowed")`` without a ``register`` call: Spark finds the installed ``pyspark_windowed``
module at session start. Run in a fresh process (a Python script, a ``spark-submit`` job, a Spark
Connect client of a local Connect server), from a project directory that has a package of its own
named ``datasource`` (the plugin's old top-level name, which such a project shadowed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession

    import datasource                      # the project's own package, not ours
    assert datasource.OWN == "the project's", datasource

    out, mode = sys.argv[1], sys.argv[2]
    builder = SparkSession.builder.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
    if mode == "connect":   # a local Spark Connect server; this process is its client
        builder = builder.remote("local[1]")
    elif mode == "python":
        builder = builder.master("local[1]")
    spark = builder.getOrCreate()       # spark-submit: its --master
    panes = (spark.readStream.format("windowed").option("source", "generator")
             .option("totalEvents", "300").option("eventsPerBatch", "300").option("keys", "3")
             .option("timestampColumn", "event_time").option("keyColumns", "user_id")
             .option("window", "tumbling(1 minute)").option("aggregate", "count(*) AS n")
             .option("trigger", "AfterWatermark(early=AfterCount(1))").option("accumulationMode", "accumulating")
             .option("stateLocation", os.path.join(out, "state")).load())
    (panes.writeStream.format("windowed").option("path", os.path.join(out, "panes"))
     .option("checkpointLocation", os.path.join(out, "chk")).trigger(availableNow=True).start()
     .awaitTermination())
    n = spark.read.format("windowed").option("path", os.path.join(out, "panes")).option("table", "current") \\
        .load().agg({"n": "sum"}).first()[0]
    spark.sql("CREATE TEMPORARY VIEW cur USING windowed OPTIONS (path '%s', table 'current')"
              % os.path.join(out, "panes"))
    print("EVENTS", n, spark.sql("SELECT sum(n) FROM cur").first()[0])
    print("IMPORTED", sorted(m for m in sys.modules if m == "spark_windowing" or m.startswith("spark_windowing.")))
    spark.stop()
""")


# spark-submit marked slow (about a minute on 2 cores): the same lookup as a Python script's
# session, which CI runs; tests/spark/test_examples.py runs spark-submit jobs in CI
@pytest.mark.parametrize("mode", ["python", pytest.param("spark-submit", marks=pytest.mark.slow), "connect"])
def test_a_fresh_process_uses_the_format_without_registering_it(tmp_path, mode):
    project = tmp_path / "project"
    (project / "datasource").mkdir(parents=True)
    (project / "datasource" / "__init__.py").write_text("OWN = \"the project's\"\n")
    (project / "job.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    args = ["job.py", str(tmp_path / "out"), mode]
    if mode == "spark-submit":
        launcher = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]"]
    else:
        launcher = [sys.executable]
    done = subprocess.run(launcher + args, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines["EVENTS"] == "300 300"       # every generated event counted, through read and SQL
    assert lines["IMPORTED"] == "[]"          # the driver never imported spark_windowing
    # (the top-level spark_windowing_pyspark_zip, which the opt-in's .pth of the project's
    # virtualenvs imports at every interpreter start, is not the package)


WINDOW_DF_SCRIPT = textwrap.dedent("""
    from pyspark.sql import SparkSession
    import spark_windowing

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    events = spark.readStream.format("rate").load()
    try:
        spark_windowing.window(events, window="tumbling(1 minute)", timestampColumn="timestamp",
                               keyColumns="value", aggregate="count(*) AS n")
    except spark_windowing.WindowingError as e:
        print("ERROR", type(e).__name__, e)
    spark.stop()
""")


def test_window_df_says_to_set_pyspark_python_when_sparks_python_lacks_the_package(tmp_path):
    """The newcomer's mistake: a virtualenv's Python run without activating it, so Spark starts a
    Python without the package. ``window(df)`` names that Python, this one, and the variable to set,
    instead of Spark's bare ``[DATA_SOURCE_NOT_FOUND] ... windowed`` for a format the user never named."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    bare_python = str(bare / "bin" / "python")
    (tmp_path / "job.py").write_text(WINDOW_DF_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env["PYSPARK_PYTHON"] = bare_python
    done = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    error = next(line for line in done.stdout.splitlines() if line.startswith("ERROR"))
    assert error.startswith("ERROR WindowingError window(df) cannot start: Spark does not find the 'windowed' format")
    assert f"({bare_python!r})" in error and f"set PYSPARK_PYTHON={sys.executable} before" in error


def test_conf_defaults_set_after_register_apply_to_later_queries(spark, tmp_path):
    """``register`` makes each ``format("windowed")`` carry the conf as it is at that call."""
    import spark_windowing
    spark_windowing.register(spark)
    spark.conf.set("spark.windowed.aggregate", "count(*) AS from_conf")
    try:
        schema = (spark.readStream.format("windowed").option("source", "generator")
                  .option("timestampColumn", "event_time").option("keyColumns", "user_id")
                  .option("window", "tumbling(1 minute)").option("stateLocation", str(tmp_path / "s"))
                  .load().schema)
    finally:
        spark.conf.unset("spark.windowed.aggregate")
    assert "from_conf" in schema.fieldNames()
