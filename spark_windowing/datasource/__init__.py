"""The Spark plugin: ``spark.readStream.format("windowed")`` and ``writeStream.format("windowed")``.

>>> import datasource                      # doctest: +SKIP
>>> spark_windowing.register(spark)             # doctest: +SKIP

``register`` registers the ``windowed`` format and turns every ``spark.windowed.<option>`` of the
Spark conf (``spark-submit --conf spark.windowed.window=...``) into a default for that option;
an explicit ``.option()`` wins. Nothing here starts Spark at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["register", "CONF_PREFIX"]

CONF_PREFIX = "spark.windowed."


def register(spark: "SparkSession") -> type:
    """Register the ``windowed`` data source on ``spark``; return the registered class.

    The ``spark.windowed.*`` conf entries present now become option defaults (they are baked into
    the registered class, because Python data sources run in worker processes that cannot see the
    session's conf).
    """
    from spark_windowing.datasource._plugin import make_data_source

    defaults = _conf_defaults_from_context(spark)
    defaults.update({k[len(CONF_PREFIX):]: v for k, v in spark.conf.getAll.items()
                     if k.startswith(CONF_PREFIX)})
    cls = make_data_source(defaults)
    spark.dataSource.register(cls)
    from spark_windowing.datasource.lease import add_release_listener
    add_release_listener(spark)   # a query that terminates gives its sink path up at once
    return cls


def _conf_defaults_from_context(spark: "SparkSession") -> dict[str, str]:
    try:
        pairs = spark.sparkContext.getConf().getAll()
    except Exception:  # Spark Connect has no SparkContext; RuntimeConf covers it above
        return {}
    return {k[len(CONF_PREFIX):]: v for k, v in pairs if k.startswith(CONF_PREFIX)}
