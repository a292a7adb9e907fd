"""The ``spark.windowed.*`` conf entries as option defaults of ``format("windowed")``.

Spark hands a Python data source only its options (``spark_windowing.datasource`` says why), so the
driver passes the conf along: after ``carry_conf_defaults()``, every ``format("windowed")`` of a
pyspark reader or writer in this process adds one internal option (``CONF_DEFAULTS_OPTION``, JSON)
holding the session's ``spark.windowed.*`` entries as read at that call; the data source merges
them under the explicit options.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["CONF_PREFIX", "CONF_DEFAULTS_OPTION", "conf_defaults", "carry_conf_defaults"]

CONF_PREFIX = "spark.windowed."
#: The internal option through which a query carries the session's ``spark.windowed.*`` entries
#: (a JSON object, keys without the prefix); the data source merges it under explicit options.
CONF_DEFAULTS_OPTION = "__windowed_conf_defaults"


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


def carry_conf_defaults() -> None:
    """Wrap ``format`` of pyspark's readers and writers once per process (idempotent)."""
    for cls in _reader_writer_classes():
        if not getattr(cls.format, "_windowed_conf_defaults", False):
            cls.format = _with_conf_defaults(cls.format)
