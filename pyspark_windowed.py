"""Spark's automatic registration of ``format("windowed")``.

At session start Spark imports every installed top-level module whose name starts with
``pyspark_`` and registers its ``DefaultSource`` under ``DefaultSource.name()``
(``pyspark/sql/worker/lookup_data_sources.py``). This module is that entry point for
spark-windowing; everything else lives in ``spark_windowing``.
"""

from spark_windowing.datasource._plugin import WindowedDataSource as DefaultSource

__all__ = ["DefaultSource"]
