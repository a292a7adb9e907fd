"""``window(df)``'s options: which it takes, their parsing into the operator's spec and settings
(``format("windowed")``'s own parsers: ``source.parse``), the ``schema`` a DataFrame may declare,
and the error for a restart that changed one the state was written with.

Upstream options of ``format("windowed")`` (``source``, ``path``, ``kafka.*``, ...) are refused:
the DataFrame is the upstream. ``schema`` declares the DataFrame's columns (``declared_schema``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.options.ddl import parse_ddl
from spark_windowing.datasource.options.reference import options_of
from spark_windowing.datasource.options.config import END_OF_INPUT
from spark_windowing.datasource.options.values import choice_option, int_option
from spark_windowing.datasource.source.parse import KNOWN_OPTIONS, operator_spec, time_options, unknown_option
from spark_windowing.errors import OptionError
from spark_windowing.operator.watermark import parse_watermark

__all__ = ["WINDOW_OPTIONS", "parse_window_options", "declared_schema", "refuse_changes"]

#: The options ``window(df)`` takes (lower case; names are case-insensitive).
WINDOW_OPTIONS = ("window", "trigger", "accumulationmode", "aggregate", "process", "evictor", "keycolumns",
                  "timestampcolumn", "timestampunit", "timestampcombiner", "allowedlateness",
                  "fireonlyupdatedpanes", "watermark", "latedatapath", "malformedevents", "shards",
                  "statebuckets", "statememoryrows", "queryname", "maxeventtimeahead", "statelocation",
                  "countorder", "schema", "nodatabatches", "watermarkidletimeout", "endofinput",
                  "checkpointlocation")
#: The documented spelling of each option (docs/options.md's registry, and docs/window-dataframe.md
#: for window(df)'s own), for error messages.
_SPELLED = {**{o.name.lower(): o.name for o in options_of("reader")},
            "nodatabatches": "noDataBatches", "checkpointlocation": "checkpointLocation"}
_ACCEPTED = ", ".join(_SPELLED.get(o, o) for o in WINDOW_OPTIONS)
_WHY_UPSTREAM = "an upstream option of format(\"windowed\"): window(df) windows the DataFrame it is given"
_WHY_CHECKPOINT = ("window(df) learns that the DataFrame's sources read all their input from Spark's offset log in "
                   "the query's checkpoint, which Spark does not give it")


def _check_names(raw: dict[str, Any]) -> dict[str, str]:
    """Lower-cased string options; upstream and unknown options refused (``schema`` is left out:
    ``declared_schema`` reads it)."""
    out: dict[str, str] = {}
    for name, value in raw.items():
        low = name.lower()
        if low == "schema":
            continue
        if low not in WINDOW_OPTIONS:
            if low in KNOWN_OPTIONS or "." in low:
                raise OptionError(name, value, f"the options of window(df): {_ACCEPTED}", why=_WHY_UPSTREAM)
            raise unknown_option(name, value, WINDOW_OPTIONS, "the options of window(df)", spelled=_SPELLED)
        out[low] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def parse_window_options(raw: dict[str, Any], default_shards: int = 2) -> dict[str, Any]:
    """Validate ``window(df)``'s options; returns the parsed spec, watermark and settings."""
    options = _check_names(raw)
    window_text, ts_col = time_options(options)
    spec = operator_spec(options, window_text, ts_col)
    wm = parse_watermark(options.get("watermark"), options.get("watermarkidletimeout"))
    if not ts_col and wm.kind == "bounded":   # processing-time windows: the watermark is the clock's
        wm = replace(wm, kind="processing")    # (format("windowed")'s rule: source.parse)
    proc_timers = "processingtime" in spec.trigger.spec().replace(" ", "").lower()
    malformed = options.get("malformedevents", "late").strip().lower()
    if malformed not in ("late", "fail"):
        raise OptionError("malformedEvents", options.get("malformedevents"), "late, fail with window(df)",
                          why="fail-if-all needs every shard's counts of a batch in one place")
    no_data = options.get("nodatabatches", "true").strip().lower()
    if no_data not in ("true", "false"):
        raise OptionError("noDataBatches", options.get("nodatabatches"), "true, false",
                          why="whether Spark runs a micro-batch without input for the windows the watermark closed")
    clock = not ts_col or wm.kind == "processing" or wm.idle_timeout is not None or proc_timers
    if clock and no_data == "false":
        raise OptionError("noDataBatches", options.get("nodatabatches"), "true (the default) with processing time",
                          why="processing-time windows, watermark=processing(...), watermarkIdleTimeout and "
                              "processing-time triggers need the batches window(df) asks Spark for without input")
    end, checkpoint = _end_of_input(options, no_data == "true")
    return {"spec": spec, "watermark": wm, "watermark_given": "watermark" in options, "malformed": malformed,
            "end_of_input": end, "checkpoint": checkpoint,
            "no_data_batches": no_data == "true", "processing_time_windows": not ts_col, "clock": clock,
            "proc_timers": proc_timers,
            "shards": int_option(options, "shards", minimum=1, default=default_shards),
            "buckets": int_option(options, "stateBuckets", minimum=1, default=64),
            "memory_rows": int_option(options, "stateMemoryRows", minimum=1, default=2_000_000),
            "late_path": options.get("latedatapath") or None, "query_name": options.get("queryname"),
            "state_location": (options.get("statelocation") or "").rstrip("/") or None}


def _end_of_input(options: dict[str, str], no_data: bool) -> tuple[str, str | None]:
    """``endOfInput`` (``continue``, ``fire``) and ``checkpointLocation``, which ``fire`` needs
    and nothing else reads (``source.ticks``: the end of the input)."""
    end = choice_option(options, "endOfInput", END_OF_INPUT)
    checkpoint = (options.get("checkpointlocation") or "").strip() or None
    if end == "fire" and checkpoint is None:
        raise OptionError("checkpointLocation", None, "the query's checkpoint location, the path given to "
                          "writeStream's checkpointLocation", why=f"endOfInput=fire needs it: {_WHY_CHECKPOINT}")
    if end == "fire" and not no_data:
        raise OptionError("noDataBatches", options.get("nodatabatches"), "true (the default) with endOfInput=fire",
                          why="the end fires in batches window(df) asks Spark for without input")
    if checkpoint is not None and end != "fire":
        raise OptionError("checkpointLocation", checkpoint, "no checkpointLocation, or endOfInput=fire beside it",
                          why="window(df) reads the query's checkpoint only to find the end of the input")
    return end, checkpoint


def declared_schema(options: dict[str, Any]) -> Any:
    """The ``schema`` option: the DataFrame's schema as a pyspark ``StructType`` (given as one, or
    as a DDL string: ``"user string, ts timestamp"``), or None when not given.

    With it ``window(df)`` does not analyze ``df`` (no ``df.schema``): a Spark Declarative
    Pipeline refuses any analysis inside a query function, so ``window(spark.readStream.table(...),
    schema=...)`` is how it windows another table of the pipeline. The declared columns must be
    the DataFrame's (each batch is checked: a missing column or a type its values cannot be cast to
    fails the query naming the option); a ``withWatermark`` on ``df`` is not seen then: give the
    ``watermark`` option."""
    given = next((v for k, v in options.items() if k.lower() == "schema"), None)
    if given is None:
        return None
    from pyspark.sql.types import DataType, StructType
    if isinstance(given, StructType):
        return given
    accepted = "a DDL string ('name type, ...') or a pyspark StructType: the DataFrame's columns"
    if not isinstance(given, str) or not given.strip():
        raise OptionError("schema", given, accepted, why="the schema of the DataFrame window(df) is given")
    try:
        return arrow_to_spark_schema(parse_ddl(given))     # the common types, with no call to Spark
    except OptionError:
        pass
    try:
        parsed = DataType.fromDDL(given)                   # the rest (arrays, maps, decimals), by Spark
    except Exception as e:
        raise OptionError("schema", given, accepted, why=f"Spark cannot parse it: {str(e).splitlines()[0]}") from e
    if not isinstance(parsed, StructType):
        raise OptionError("schema", given, accepted, why="it is one type, not a list of columns")
    return parsed


#: ``OperatorSpec.describe()`` keys -> the option that sets them (for the changed-spec error).
_SPEC_OPTIONS = {"window": "window", "trigger": "trigger", "accumulation_mode": "accumulationMode",
                 "allowed_lateness_us": "allowedLateness", "timestamp_combiner": "timestampCombiner",
                 "keys": "keyColumns"}


def refuse_changes(recorded: dict, now: dict, root: str, *, why_not_rescalable: str | None) -> None:
    """An ``OptionError`` naming what changed since the state at ``root`` was written: the spec,
    or ``shards`` when the state cannot be redistributed (``why_not_rescalable``)."""
    where = (f"the value this query's state was written with (under {root}, kept with the checkpoint); "
             "to change it, start with a new checkpointLocation and stateLocation")
    if recorded["shards"] != now["shards"] and why_not_rescalable is not None:
        raise OptionError("shards", now["shards"], f"{recorded['shards']}, {where}",
                          why=f"shards can change on restart, but not here: {why_not_rescalable}")
    if recorded["fingerprint"] != now["fingerprint"]:
        before, after = recorded.get("spec", {}), now["spec"]
        changed = [k for k in _SPEC_OPTIONS if before.get(k) != after.get(k)] or ["aggregate"]
        option = _SPEC_OPTIONS.get(changed[0], changed[0])
        raise OptionError(option, after.get(changed[0], "(changed)"),
                          f"{before.get(changed[0], 'the value')}, {where}",
                          why=f"the windowing spec changed since the checkpoint was written "
                              f"({', '.join(_SPEC_OPTIONS.get(k, k) for k in changed)})")
