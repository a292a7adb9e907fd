"""A SparkSession with delta-spark (the JVM Delta Lake), for the interoperability tests and their
subprocess jobs. The JVM package ``io.delta:delta-spark_<spark major.minor>_2.13:<delta-spark
version>`` comes from Maven Central through Spark's ``spark.jars.packages``, resolved with the
project's Ivy settings (Maven Central only, never ``~/.m2``) into a cache under
``$SPARK_WINDOWING_CACHE`` (default ``~/.cache/spark-windowing``), fetched once."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version


def delta_package() -> str:
    """The Maven coordinate of delta-spark's JVM package for the installed pyspark."""
    import pyspark
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{spark_minor}_2.13:{version('delta-spark')}"


def builder(app: str, *, warehouse: str | None = None, metastore: str | None = None):
    """A local[2] session builder with Delta's SQL extension and catalog; with ``metastore``, a Hive
    catalog kept in a Derby database at that directory (tables persist across sessions)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_windowing.tools.packages import jar_confs

    b = SparkSession.builder.master("local[2]").appName(app)
    for k, v in jar_confs(delta_package()).items():
        b = b.config(k, v)
    b = (b.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
         .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "2g")
         .config("spark.sql.streaming.stopTimeout", "30s")
         .config("spark.python.worker.reuse", "true"))
    if warehouse:
        b = b.config("spark.sql.warehouse.dir", warehouse)
    if metastore:
        b = (b.enableHiveSupport()
             .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                     f"jdbc:derby:;databaseName={metastore}/metastore_db;create=true"))
    return b
