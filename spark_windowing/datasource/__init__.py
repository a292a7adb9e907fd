"""The Spark plugin: ``spark.readStream.format("windowed")`` and ``writeStream.format("windowed")``.

With the package installed where Spark's Python finds it, ``format("windowed")`` needs no
registration: Spark looks up Python data sources at session start in every top-level module named
``pyspark_*`` that has a ``DefaultSource`` (``pyspark/sql/worker/lookup_data_sources.py``), and the
package ships ``pyspark_windowed``. The format then takes its options from ``.option()`` /
``.options()`` (and SQL ``OPTIONS``).

``spark.windowed.<option>`` conf entries (``spark-submit --conf spark.windowed.window=...``, a
``--properties-file``) are defaults for that option once the job has called::

    import spark_windowing
    spark_windowing.register(spark)

Why a call: Spark hands a Python data source only its options, never the session's conf (its
Python planner runs in a worker that gets none; ``PythonDataSourceV2`` has no
``SessionConfigSupport``), so the driver must pass the conf along. ``register`` makes every
``format("windowed")`` of this Python process (readStream, read, writeStream; classic and Spark
Connect) carry the session's ``spark.windowed.*`` entries *as read at that call* in one internal
option, which the data source merges under the explicit options: an explicit ``.option()`` wins,
and a conf entry set after ``register`` still applies to later queries. Where Spark did not find
``pyspark_windowed`` (the package is not installed for Spark's Python, e.g. a source checkout on
``sys.path`` only), ``register`` also registers the format for the session. Nothing here starts
Spark at import time.

The plugin's code by role (``docs/architecture.md``): ``source`` (the stream reader, shards),
``upstreams`` (one module per kind of input), ``sink`` (the pane sink), ``tables`` (the Delta
tables: pane tables, late table, upkeep, reads), ``storage`` (filesystems, conditional writes,
the layout of names), ``options`` (parsing and the option registry); beside them ``window_df``
(``spark_windowing.window(df)``), ``progress`` (the progress line) and ``_plugin`` (the data
source class Spark loads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_windowing.datasource.options.spark_conf import CONF_DEFAULTS_OPTION, CONF_PREFIX, carry_conf_defaults, conf_defaults

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["register", "conf_defaults", "CONF_PREFIX", "CONF_DEFAULTS_OPTION"]


def register(spark: "SparkSession") -> type:
    """Apply ``spark.windowed.*`` conf entries as option defaults to every ``format("windowed")``
    of this process, release a windowed sink's writer lease as soon as its query terminates
    (without ``register``, the lease of a stopped query lapses after the sink's ``writerLease``),
    and register the format on ``spark`` unless Spark found it installed; return the data source
    class."""
    from spark_windowing.datasource._plugin import WindowedDataSource
    from spark_windowing.datasource.sink.lease import add_release_listener

    carry_conf_defaults()
    add_release_listener(spark)   # a query that terminates gives its sink path up at once
    try:
        spark.dataSource.register(WindowedDataSource)
    except Exception as e:  # the installed pyspark_windowed is found first and cannot be replaced
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
    return WindowedDataSource
