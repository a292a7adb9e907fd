"""The ``windowed`` DataSource class: one format for reading panes (stream), reading pane tables
(batch) and writing panes (stream sink). Each role lives in its own module; this one only routes.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from spark_windowing.datasource.options.spark_conf import CONF_DEFAULTS_OPTION


class WindowedDataSource(DataSource):
    """``format("windowed")``.

    * ``spark.readStream.format("windowed")``: upstream events -> windowed operator -> panes
      (options: ``docs/options.md``; see ``spark_windowing.datasource.source.reader``).
    * ``spark.read.format("windowed").option("path", P).option("table", "current")``: a pane table
      written by the sink, as a batch DataFrame (see ``spark_windowing.datasource.tables.table_reader``).
    * ``df.writeStream.format("windowed").option("path", P)``: the pane sink, three Delta tables
      ``P/triggers``, ``P/retractions``, ``P/current``, exactly once per micro-batch
      (see ``spark_windowing.datasource.sink.writer``).
    """

    @classmethod
    def name(cls) -> str:
        return "windowed"

    def __init__(self, options: dict[str, str]) -> None:
        """``options`` as Spark hands them over, plus the ``spark.windowed.*`` conf defaults that
        ``spark_windowing.register`` makes a query carry (``CONF_DEFAULTS_OPTION``): explicit
        options win; a conf default of a join option applies only to queries that name a
        ``source2``, and of ``countOrder`` only to count windows (so a conf-wide ``join`` or
        ``countOrder`` cannot break the other queries: ``parse.applicable_conf_defaults``)."""
        from spark_windowing.datasource.source.parse import applicable_conf_defaults
        explicit = {k.lower(): v for k, v in dict(options).items()}
        carried = json.loads(explicit.pop(CONF_DEFAULTS_OPTION.lower(), None) or "{}")
        defaults = applicable_conf_defaults(explicit, {k.lower(): v for k, v in carried.items()})
        self.options = {**defaults, **explicit}

    def _is_table_read(self) -> bool:
        return "table" in self.options

    def _is_ticks(self) -> bool:
        from spark_windowing.datasource.source.ticks import TICKS_OPTION
        return TICKS_OPTION.lower() in self.options

    def schema(self) -> StructType:
        """Validates every option (runs at ``load()``).

        Spark reports an exception raised here as ``PYTHON_DATA_SOURCE_ERROR`` followed by the
        Python traceback, message last; the message cannot lead (the JVM builds the text), but a
        bad option is the user's input, not our failure, so its traceback is cut to this frame.
        ``spark.sql.execution.pyspark.udf.hideTraceback.enabled=true`` leaves only the message."""
        from spark_windowing.errors import OptionError
        if self._is_ticks():   # window(df)'s ticks: a stream of no rows (source.ticks)
            from spark_windowing.datasource.source.ticks import ticks_schema
            return ticks_schema(self.options)
        try:
            if self._is_table_read():
                from spark_windowing.datasource.tables.table_reader import table_schema
                return table_schema(self.options)
            from spark_windowing.datasource.source.reader import stream_schema
            return stream_schema(self.options)
        except OptionError as e:
            raise e.with_traceback(None) from None

    def reader(self, schema: StructType) -> Any:
        from spark_windowing.datasource.tables.table_reader import PaneTableReader
        return PaneTableReader(self.options, schema)

    def streamReader(self, schema: StructType) -> Any:
        """``execution=executors``: ``source.reader``; ``execution=driver``: ``source.driver``;
        ``execution=auto`` (default): ``driver.AutoStreamReader``;
        ``window(df)``'s ticks: ``source.ticks``."""
        if self._is_ticks():
            from spark_windowing.datasource.source.ticks import TicksStreamReader
            return TicksStreamReader(self.options)
        execution = (self.options.get("execution") or "auto").strip().lower()
        if execution == "driver":
            from spark_windowing.datasource.source.driver import DriverStreamReader
            return DriverStreamReader(self.options, schema)
        if execution == "auto":
            from spark_windowing.datasource.source.driver import AutoStreamReader
            return AutoStreamReader(self.options, schema)
        from spark_windowing.datasource.source.reader import WindowedStreamReader
        return WindowedStreamReader(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from spark_windowing.datasource.sink.writer import PaneStreamWriter
        return PaneStreamWriter(self.options, schema, overwrite)

