"""The Spark columns ``window(df)`` adds to each row before its shuffle (``window_df``): the
batch's time, the time the row moves the watermark to, and (there) the key's shard label.

Each is an expression Spark evaluates in the map stage, in the query's generated code; they are
written so that this code is the same in every micro-batch (``batch_time_column``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_windowing._arrow import field_type
from spark_windowing._time import UNIT_FACTORS
from spark_windowing.errors import OptionError
from spark_windowing.operator.spec import OperatorSpec

__all__ = ["WM_COLUMN", "BT_COLUMN", "PART_COLUMN", "DELAY_KEY", "batch_time_column", "watermark_time", "time_expr"]

#: Internal columns: the watermark's time (µs, delay subtracted), the batch time (µs), the shard label.
WM_COLUMN, BT_COLUMN, PART_COLUMN = "__sw_wm", "__sw_bt", "__sw_part"
#: The column metadata key of Spark's watermark marker (``EventTimeWatermark.delayKey``).
DELAY_KEY = "spark.watermarkDelayMs"


def time_expr(column: str, arrow_type: pa.DataType, unit: str | None):
    """A Spark expression: ``column`` as a timestamp, read as the operator reads it."""
    from pyspark.sql import functions as F
    c = F.col(column)
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return F.timestamp_micros(F.round(c * F.lit(UNIT_FACTORS[unit or "ms"])).cast("long"))
    return c.cast("timestamp")  # timestamp, date, ISO-8601 string


def batch_time_column(spark: Any):
    """Spark's batch timestamp (µs) as a column: ``current_timestamp()``, which Spark's streaming
    planner replaces by a literal of the batch's time (the offset log's: the same on a replay).

    Whole-stage codegen writes a timestamp literal into the generated Java, so that literal would
    make every micro-batch's map stage new code, compiled again in its tasks (~50 ms a task on 2
    cores, half the stage: docs/performance.md). Inside ``java_method`` (an expression Spark
    evaluates from the plan, not from generated code: ``CodegenFallback``) the literal stays out
    of the code, which Spark's code cache then serves from the second batch on (``Math.abs`` of the
    time is the time; Spark evaluates it per row, well under a µs). Where reflection is
    refused (``spark.sql.reflect.allowList``, the restricted SQL mode) or cannot be checked here
    (Spark Connect), plain ``unix_micros(current_timestamp())``."""
    from pyspark.sql import functions as F
    plain = F.unix_micros(F.current_timestamp())
    wrapped = F.expr("cast(java_method('java.lang.Math', 'abs', unix_micros(current_timestamp())) as long)")
    if getattr(spark, "_jsparkSession", None) is None:
        return plain
    try:
        spark.range(1).select(wrapped).schema   # analysis: refused here when reflection is not allowed
    except Exception:  # AnalysisException: METHOD_NOT_ALLOWED, restricted mode
        return plain
    return wrapped


def watermark_time(own: list, wm: Any, spec: OperatorSpec, in_schema: pa.Schema):
    """The Spark expression of ``__sw_wm``: the time this row moves the watermark to (µs, the delay
    subtracted; null: it moves none). ``own``: the DataFrame's ``withWatermark`` columns (their
    least ``column − delay``); else the ``watermark`` option (``bounded(d)``: the event time − d;
    ``column(c)``: c). An event beyond ``maxEventTimeAhead`` of the batch's time (the row's
    ``__sw_bt``, set before) moves no watermark: the step sends it to the late table as ``future``."""
    from pyspark.sql import functions as F
    if wm.kind == "processing" and not own:   # the clock's: the shards take it from the batch time
        return F.lit(None).cast("long")
    if own:
        times = [F.unix_micros(F.col(f"`{f.name}`").cast("timestamp")) - F.lit(int(f.metadata[DELAY_KEY]) * 1000)
                 for f in own]
        wm_time = times[0] if len(times) == 1 else F.least(*times)
    else:
        wm_col = wm.column if wm.kind == "column" else spec.timestamp_column
        wm_type = field_type(in_schema, wm_col)
        if wm_type is None:
            raise OptionError("watermark", f"column({wm_col})", f"column(<a column of {in_schema.names}>)",
                              why="no such column")
        delay = int(wm.delay) if wm.kind == "bounded" else 0
        wm_time = F.unix_micros(time_expr(wm_col, wm_type, spec.timestamp_unit)) - F.lit(delay)
    if spec.max_time_ahead is not None:
        event = F.unix_micros(time_expr(spec.timestamp_column, field_type(in_schema, spec.timestamp_column),
                                        spec.timestamp_unit))
        limit = F.col(BT_COLUMN) + F.lit(spec.max_time_ahead)
        wm_time = F.when(event.isNull() | (event <= limit), wm_time)
    return wm_time
