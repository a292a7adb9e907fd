"""A class-data-sharing archive of Spark's JVM classes for the test suite's JVMs (scripts/test.sh).

    python scripts/_spark_cds.py VENV "JVM OPTIONS"     # prints the archive's path, or nothing

Most of the suite's CPU goes to starting JVMs: every test that runs a job in a fresh process (a
``kill -9`` and restart, ``spark-submit``, ``spark-pipelines`` with its Spark Connect server)
starts one, and a fresh JVM loads and verifies ~15,000 of Spark's classes from its jars. A dynamic
CDS archive (JDK 13+: ``-XX:ArchiveClassesAtExit`` writes it, ``-XX:SharedArchiveFile`` maps it)
holds them parsed and verified: a fresh local-mode job with a first query took 11-13 CPU-s and
8.7-10 s instead of 19-22 CPU-s and 16-18 s (2 cores, 2026-12-07).

The archive is made once per virtualenv and kept under it (``<VENV>/spark-cds/<key>.jsa``), keyed on
the ``java`` Spark runs, pyspark's version and jar names and the JVM options, by a small local
job (a batch aggregation, ``window(df)`` over a few rows of Parquet into ``noop``) whose JVM
writes it at exit. A JVM whose class path or JDK differ from the archive's maps nothing and runs
as without it; ``-Xlog:cds*=off`` keeps it from saying so on standard output, which some tests
read. Making it failed: a line on stderr, no path printed, the suite runs without it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile


def archive_key(jvm_options: str) -> str:
    import pyspark
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    home = os.environ.get("JAVA_HOME")
    java = subprocess.run([os.path.join(home, "bin", "java") if home else "java", "-version"],
                          capture_output=True, text=True).stderr
    names = "\n".join(sorted(os.listdir(jars))) if os.path.isdir(jars) else ""
    return hashlib.sha256("\0".join([java, pyspark.__version__, jars, names, jvm_options]).encode()).hexdigest()[:16]


def make(venv: str, jvm_options: str) -> str | None:
    """The archive's path, made if missing; None when it could not be made."""
    folder = os.path.join(venv, "spark-cds")
    path = os.path.join(folder, archive_key(jvm_options) + ".jsa")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):      # an archive of another pyspark or JDK maps nothing: dropped
        os.remove(os.path.join(folder, old))
    partial = path + ".partial"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_SUBMIT_OPTS=f"{jvm_options} -XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off")
    print(f"[setup] making a class-data-sharing archive of Spark's classes for the suite's JVMs: {path}",
          file=sys.stderr)
    done = subprocess.run([sys.executable, __file__, "--job"], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0 or not os.path.exists(partial):
        print("[setup] no class-data-sharing archive (the suite runs without it):\n" + done.stderr[-2000:],
              file=sys.stderr)
        return None
    os.replace(partial, path)
    return path


def job() -> None:
    """The classes to archive: a local session's start, a batch query, a streaming ``window(df)``
    with its Python workers; the JVM is waited for, so that it writes the archive as it exits."""
    from pyspark.sql import SparkSession

    import spark_windowing
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    with tempfile.TemporaryDirectory() as tmp:
        spark.range(100).selectExpr("id % 7 AS k", "timestamp_seconds(id) AS ts", "CAST(id AS double) AS v") \
            .write.parquet(f"{tmp}/events")
        spark.read.parquet(f"{tmp}/events").groupBy("k").count().collect()
        events = spark.readStream.schema("k long, ts timestamp, v double").parquet(f"{tmp}/events")
        panes = spark_windowing.window(events, timestampColumn="ts", keyColumns="k", window="tumbling(10 seconds)",
                                       aggregate="count(*) AS n", stateLocation=f"{tmp}/state")
        query = panes.writeStream.format("noop").option("checkpointLocation", f"{tmp}/chk") \
            .trigger(availableNow=True).start()
        query.awaitTermination()
    proc = spark.sparkContext._gateway.proc
    spark.stop()
    proc.stdin.close()      # the gateway's JVM exits when its stdin closes: it writes the archive then
    proc.wait(timeout=300)


if __name__ == "__main__":
    if sys.argv[1:] == ["--job"]:
        job()
    else:
        made = make(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
        if made:
            print(made)
