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
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["register", "conf_defaults", "CONF_PREFIX", "CONF_DEFAULTS_OPTION"]

CONF_PREFIX = "spark.windowed."
#: The internal option through which a query carries the session's ``spark.windowed.*`` entries
#: (a JSON object, keys without the prefix); the data source merges it under explicit options.
CONF_DEFAULTS_OPTION = "__windowed_conf_defaults"


def register(spark: "SparkSession") -> type:
    """Apply ``spark.windowed.*`` conf entries as option defaults to every ``format("windowed")``
    of this process, and register the format on ``spark`` unless Spark found it installed;
    return the data source class."""
    from spark_windowing.datasource._plugin import WindowedDataSource

    _carry_conf_defaults()
    try:
        spark.dataSource.register(WindowedDataSource)
    except Exception as e:  # the installed pyspark_windowed is found first and cannot be replaced
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
            raise
    return WindowedDataSource


def conf_defaults(spark: "SparkSession") -> dict[str, str]:
    """The ``spark.windowed.*`` entries of ``spark``'s conf, keys without the prefix (the
    SparkContext's conf first, then the session's runtime conf, which wins)."""
    out = _conf_defaults_from_context(spark)
    out.update({k[len(CONF_PREFIX):]: v for k, v in spark.conf.getAll.items() if k.startswith(CONF_PREFIX)})
    return out


def _conf_defaults_from_context(spark: "SparkSession") -> dict[str, str]:
    try:
        pairs = spark.sparkContext.getConf().getAll()
    except Exception:  # Spark Connect has no SparkContext; RuntimeConf covers it above
        return {}
    return {k[len(CONF_PREFIX):]: v for k, v in pairs if k.startswith(CONF_PREFIX)}


def _reader_writer_classes() -> list[type]:
    """The pyspark classes with a ``format`` method that can name ``windowed``: classic and, when
    its dependencies are installed, Spark Connect."""
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter
    classes: list[type] = [DataFrameReader, DataStreamReader, DataStreamWriter]
    try:
        from pyspark.sql.connect.readwriter import DataFrameReader as ConnectReader
        from pyspark.sql.connect.streaming.readwriter import DataStreamReader as ConnectStreamReader
        from pyspark.sql.connect.streaming.readwriter import DataStreamWriter as ConnectStreamWriter
    except ImportError:  # pyspark without the connect extra
        return classes
    return classes + [ConnectReader, ConnectStreamReader, ConnectStreamWriter]


def _session_of(obj: Any) -> Any:
    """The SparkSession a reader or writer belongs to (its attribute differs by class)."""
    for name in ("_spark", "_client", "_session"):
        session = getattr(obj, name, None)
        if session is not None and hasattr(session, "conf"):
            return session
    raise TypeError(f"no SparkSession found on {type(obj).__name__}")


def _with_conf_defaults(original: Callable) -> Callable:
    def format(self: Any, source: str) -> Any:
        out = original(self, source)
        if isinstance(source, str) and source.lower() == "windowed":
            defaults = conf_defaults(_session_of(self))
            if defaults:
                out = out.option(CONF_DEFAULTS_OPTION, json.dumps(defaults, sort_keys=True))
        return out
    format.__doc__ = original.__doc__
    format.__wrapped__ = original  # type: ignore[attr-defined]
    format._windowed_conf_defaults = True  # type: ignore[attr-defined]
    return format


def _carry_conf_defaults() -> None:
    """Wrap ``format`` of pyspark's readers and writers once per process (idempotent)."""
    for cls in _reader_writer_classes():
        if not getattr(cls.format, "_windowed_conf_defaults", False):
            cls.format = _with_conf_defaults(cls.format)
