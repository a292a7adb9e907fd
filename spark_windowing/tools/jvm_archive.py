"""A class-data sharing (CDS) archive of the JVM classes a windowed query loads: Spark starts faster.

    python -m spark_windowing.tools.jvm_archive ~/.cache/spark-classes.jsa
    export SPARK_SUBMIT_OPTS="-XX:SharedArchiveFile=$HOME/.cache/spark-classes.jsa"
    # or: spark-submit --driver-java-options "-XX:SharedArchiveFile=..." app.py

A Spark driver JVM loads ~12,000 classes of Spark, Scala and Hadoop before its first micro-batch
ends, each read from a jar, parsed and verified. A JVM started with ``-XX:SharedArchiveFile=A``
maps those of them that the archive ``A`` holds, already parsed and verified. Measured on a
2-core machine (2026-11-27, docs/performance.md "The JVM's class loading"): a new process with a
local SparkSession and a small query 7.2-7.9 s instead of 12.8-13.3 s; the demo
(``scripts/demo.sh``) 45.7 s instead of 54.2 s (medians of 3). The gain is the JVM's start:
what a query's first micro-batch spends starting Python processes stays.

:func:`write` runs a windowed query in miniature (the generator through the pane sink, two
micro-batches, then Spark SQL over the pane tables) in a Spark driver started with
``-XX:ArchiveClassesAtExit``; the JVM writes the archive as it exits (~1 minute in all, once).

The archive is only valid for the JDK and the very jar files (same paths, sizes, times) it was
written with: the pyspark installation of the Python that wrote it, or a Spark distribution whose
``jars`` directory has the same path on every machine. A JVM that finds them changed (pyspark
upgraded, another virtualenv) prints one ``[warning][cds]`` line and loads its classes as usual —
nothing breaks, the start is just not faster; write the archive again then. On a cluster the
executors can use it too (``spark.executor.extraJavaOptions``) when their ``SPARK_HOME`` is the
same path with the same jars. Needs Java 13 or newer (dynamic archives); Spark 4 needs 17 anyway.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

#: This module's name, as ``python -m`` runs it (the writing run is this module run again).
MODULE = "spark_windowing.tools.jvm_archive"


@dataclass(frozen=True)
class Archive:
    """A written archive: where, how large, how long writing it took."""

    path: str
    size: int
    seconds: float

    @property
    def java_option(self) -> str:
        """The JVM option that uses it."""
        return java_option(self.path)


def java_option(path: str) -> str:
    """``-XX:SharedArchiveFile=<path>`` (absolute), to add to ``SPARK_SUBMIT_OPTS`` or to
    ``spark-submit --driver-java-options``."""
    return f"-XX:SharedArchiveFile={os.path.abspath(path)}"


def write(path: str, *, python: str = sys.executable, timeout: float = 900) -> Archive:
    """Write the archive to ``path`` (through ``path.tmp``, renamed when complete: a half-written
    archive is never used) with a Spark driver of ``python``'s pyspark. Raises ``RuntimeError``
    with the driver's output when the run fails or leaves no archive."""
    path = os.path.abspath(path)
    if not os.path.isdir(os.path.dirname(path)):
        raise ValueError(f"jvm_archive: the directory of {path!r} does not exist; create it first")
    partial = path + ".tmp"
    if os.path.exists(partial):
        os.remove(partial)
    env = {**os.environ, "SPARK_SUBMIT_OPTS": dump_options(os.environ.get("SPARK_SUBMIT_OPTS", ""), partial),
           "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="spark-windowing-jvm-archive-") as work:
        done = subprocess.run([python, "-m", MODULE, "--workload", work], env=env, cwd=work,
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not os.path.exists(partial):
        if os.path.exists(partial):      # the JVM writes it at exit even after a failed query
            os.remove(partial)
        raise RuntimeError(f"jvm_archive: the Spark run that writes {path} failed (exit code {done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    os.replace(partial, path)
    return Archive(path, os.path.getsize(path), time.monotonic() - started)


def dump_options(submit_opts: str, archive: str) -> str:
    """The ``SPARK_SUBMIT_OPTS`` of the run that writes ``archive``: the user's options (memory,
    system properties) without an archive in use (``-XX:SharedArchiveFile``: rewriting one after a
    pyspark upgrade), plus ``-XX:ArchiveClassesAtExit=<archive>``."""
    kept = [o for o in shlex.split(submit_opts) if not o.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit="))]
    return shlex.join(kept + [f"-XX:ArchiveClassesAtExit={archive}"])


def _workload(work: str) -> None:
    """The query in miniature; then stop Spark and wait for its JVM, which writes the archive as it
    exits (on the end of its standard input, which pyspark holds open)."""
    from pyspark.sql import SparkSession

    from spark_windowing.datasource import register

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    options = {"source": "generator", "totalEvents": "400", "eventsPerBatch": "200", "keys": "4",
               "timestampColumn": "event_time", "keyColumns": "user_id", "window": "session(30 seconds)",
               "aggregate": "count(*) AS clicks, sum(amount) AS revenue",
               "trigger": "AfterWatermark(early=AfterCount(5))", "accumulationMode": "accumulating_and_retracting",
               "watermark": "bounded(5 seconds)", "shards": "2", "stateLocation": f"{work}/state",
               "lateDataPath": f"{work}/late"}
    (spark.readStream.format("windowed").options(**options).load()
     .writeStream.format("windowed").option("path", f"{work}/panes")
     .option("checkpointLocation", f"{work}/chk").trigger(availableNow=True).start().awaitTermination())
    spark.read.format("windowed").option("path", f"{work}/panes").option("table", "current").load() \
        .createOrReplaceTempView("clicks")
    spark.sql("SELECT window(window_start, '10 minutes').start AS period, user_id, sum(clicks) AS clicks "
              "FROM clicks GROUP BY 1, 2 ORDER BY clicks DESC").collect()
    gateway = spark.sparkContext._gateway
    spark.stop()
    gateway.proc.stdin.close()
    gateway.proc.wait(600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}",
                                     description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("archive", help="where to write the archive (e.g. ~/.cache/spark-classes.jsa)")
    parser.add_argument("--workload", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.workload:
        _workload(args.archive)
        return 0
    print(f"writing {args.archive} (a Spark driver runs a small windowed query; about a minute) ...", flush=True)
    try:
        archive = write(os.path.expanduser(args.archive))
    except (ValueError, RuntimeError) as e:
        print(e, file=sys.stderr)
        return 1
    print(f"wrote {archive.path}: {archive.size >> 20} MB in {archive.seconds:.0f} s. Use it with\n"
          f"  export SPARK_SUBMIT_OPTS={shlex.quote(archive.java_option)}\n"
          f"or spark-submit --driver-java-options {shlex.quote(archive.java_option)} ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
