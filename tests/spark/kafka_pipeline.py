"""The Kafka crash test's pipeline, run as a subprocess: ``source=kafka`` -> windowed sink (and
the late-data table) from a checkpoint under ``availableNow``; exit code 0 when it finished.

    python tests/spark/kafka_pipeline.py --options '{"source": "kafka", ...}' --out DIR

The test kills the whole process group (driver, JVM, Python workers) with SIGKILL at random
moments and starts the script again on the same checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT)]


def run(spark, options: dict[str, str], out: Path) -> None:
    reader = spark.readStream.format("windowed")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("windowed").option("path", str(out / "panes"))
         .option("checkpointLocation", str(out / "chk")).trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--options", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_windowing
    spark = (SparkSession.builder.master("local[2]").appName("kafka-crash-pipeline")
             .config("spark.ui.enabled", "false")
             .config("spark.local.dir", str(Path(args.out) / "spark-local"))
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    run(spark, json.loads(args.options), Path(args.out))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
