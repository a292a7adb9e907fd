"""spark_windowing: Beam/Flink-style event-time windowing for Spark Structured Streaming.

One namespace: the operator (pure Python + Arrow/NumPy; never imports pyspark) and, in
``spark_windowing.datasource``, the Spark plugin behind ``format("windowed")``.

>>> import spark_windowing                  # doctest: +SKIP
>>> spark_windowing.register(spark)         # doctest: +SKIP

>>> from spark_windowing import OperatorSpec, WindowedOperator
>>> spec = OperatorSpec.from_options(window="sliding(10 minutes, 2 minutes)", aggregate="count(*) AS n",
...                                  trigger="AfterWatermark(early=AfterCount(100))")
>>> op = WindowedOperator(spec)

See ``spark_windowing.testing.TestStream`` to test a configuration without Spark.
"""

from typing import TYPE_CHECKING

from spark_windowing.errors import OptionError, ProcessError, SnapshotError, WindowingError

if TYPE_CHECKING:  # pragma: no cover
    from spark_windowing.operator.windowed import StepResult, WindowedOperator
    from spark_windowing.aggregates.process import ProcessContext
    from spark_windowing.operator.spec import OperatorSpec
    from spark_windowing.state.snapshot import restore, snapshot

#: What ``spark_windowing.<name>`` imports on first use (PEP 562): the operator's modules load
#: NumPy and the whole windowing stack, which a Spark Python worker that only commits a sink
#: batch or plans a read never needs; every Python worker process Spark starts pays its imports.
_LAZY = {"StepResult": "spark_windowing.operator.windowed", "WindowedOperator": "spark_windowing.operator.windowed",
         "ProcessContext": "spark_windowing.aggregates.process", "OperatorSpec": "spark_windowing.operator.spec",
         "restore": "spark_windowing.state.snapshot", "snapshot": "spark_windowing.state.snapshot"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'spark_windowing' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["register", "window", "attach_progress", "ivy_settings_path", "OperatorSpec", "WindowedOperator", "StepResult", "snapshot", "restore", "OptionError",
           "SnapshotError", "WindowingError", "ProcessContext", "ProcessError"]
__version__ = "0.1.0"


def register(spark):
    """Register the ``windowed`` format on ``spark`` with the session's ``spark.windowed.*`` conf
    entries as option defaults; return the registered class (see ``spark_windowing.datasource``).
    Imports pyspark only when called."""
    from spark_windowing.datasource import register as _register
    return _register(spark)


def window(df, **options):
    """Window the streaming DataFrame ``df`` with ``format("windowed")``'s operator options: a
    streaming DataFrame of panes, state in the query's checkpoint
    (``spark_windowing.datasource.window_df``). Imports pyspark only when called."""
    from spark_windowing.datasource.window_df import window as _window
    return _window(df, **options)


def attach_progress(spark, *args, **kwargs):
    """Print one progress line per micro-batch of every windowed query on ``spark``
    (``spark_windowing.datasource.progress.attach_progress``)."""
    from spark_windowing.datasource.progress import attach_progress as _attach
    return _attach(spark, *args, **kwargs)


def ivy_settings_path() -> str:
    """An ``ivysettings.xml`` for ``spark.jars.ivySettings`` that fetches ``spark.jars.packages``
    (delta-spark, Spark's Kafka connector) from Maven Central only, never from ``~/.m2``
    (``spark_windowing.tools.packages``)."""
    from spark_windowing.tools.packages import ivy_settings_path as _path
    return _path()


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
