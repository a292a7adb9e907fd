"""The crash test's pipeline, run as a subprocess: ``test_panes`` -> windowed sink, from a
checkpoint, until the source is exhausted; exit code 0 when it got there.

    python tests/spark/sink_pipeline.py --path P --checkpoint C --batches 16 --keys 6

The crash test kills the whole process group (this Python driver, its JVM and Python workers)
with SIGKILL at random moments and starts the script again on the same checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--batches", type=int, required=True)
    parser.add_argument("--keys", type=int, default=6)
    parser.add_argument("--local-dir", default=None, help="spark.local.dir (scratch of killed runs)")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_windowing
    import pane_source
    from sink_helpers import run_pipeline

    builder = SparkSession.builder
    if args.local_dir:
        builder = builder.config("spark.local.dir", args.local_dir)
    spark = (builder.master("local[2]").appName("sink-crash-pipeline")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")   # quick JVM start
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    pane_source.register(spark)
    run_pipeline(spark, Path(args.path), Path(args.checkpoint), batches=args.batches, keys=args.keys)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
