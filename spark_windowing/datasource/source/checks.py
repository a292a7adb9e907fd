"""Checks that make ordinary mistakes loud, for the windowed source (``reader``): the event-time
column's type at ``load()``, micro-batches without a readable event time (``malformedEvents``),
the producing spec put into the pane schema for the sink (``pane_spec``), and a restart's options
against those its state location was written with (``check_state_spec``).

Flink fails a query whose rowtime attribute is null or of a non-time type, and Spark's own
file sources fail fast (``mode=FAILFAST``) or keep malformed records aside (``PERMISSIVE``):
``malformedEvents`` takes a middle way by default (``fail-if-all``), since a wrong event-time
column makes every event malformed while a real stream has the odd bad record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql.types import StructType

from spark_windowing._arrow import field_type, get_column
from spark_windowing.datasource.tables import pane_spec
from spark_windowing.datasource.source import rescale
from spark_windowing.datasource.options.config import PROC_TIME_COLUMN, SourceConfig
from spark_windowing.errors import OptionError
from spark_windowing.panes import CORRUPT_RECORD, ORIGIN

#: Accepted event-time columns (the ``timestampColumn`` error's "Accepted:" part).
TIME_COLUMN_FORMS = ("a timestamp or date column, an ISO-8601 string column (e.g. '2026-01-01T12:00:00Z'), "
                     "or a numeric epoch column together with .option('timestampUnit', 's' | 'ms' | 'us')")


def check_time_column(schema: pa.Schema, name: str | None, unit: str | None, option: str = "timestampColumn") -> None:
    """The event-time column's upstream type can hold times: a timestamp, date or string (parsed
    as ISO-8601 per event), or a number with an explicit ``timestampUnit`` (a number without a unit
    is refused: a double of amounts read as epoch milliseconds puts every event in 1970)."""
    if not name:
        return
    ftype = field_type(schema, name)
    if ftype is None:
        return   # a missing column is the operator's error (raised before this)
    t = pa.types
    if t.is_timestamp(ftype) or t.is_date(ftype) or t.is_string(ftype) or t.is_large_string(ftype):
        return
    if t.is_integer(ftype) or t.is_floating(ftype) or t.is_decimal(ftype):
        if unit is None:
            raise OptionError(option, name, TIME_COLUMN_FORMS,
                              why=f"column {name!r} is {ftype}, a number; a number is an event time only "
                                  "with an explicit timestampUnit (s, ms or us since 1970-01-01 UTC). If it is "
                                  "not a time, name the event-time column instead")
        return
    raise OptionError(option, name, TIME_COLUMN_FORMS, why=f"column {name!r} is {ftype}, not a time")


def checked_pane_schema(cfg: SourceConfig, upstream: pa.Schema, panes: StructType) -> StructType:
    """The pane schema ``load()`` returns, after the event-time column's type is checked against
    the ``upstream`` schema; it carries the producing spec (:func:`with_produced_by`)."""
    if not cfg.processing_time_windows:
        check_time_column(upstream, cfg.spec.timestamp_column, cfg.spec.timestamp_unit)
    return with_produced_by(panes, cfg)


def recorded_options(cfg: SourceConfig) -> dict:
    """The options a state location's ``spec.json`` records (``pane_spec.produced_by``)."""
    return pane_spec.produced_by(cfg.spec, processing_time_column=PROC_TIME_COLUMN)


def with_produced_by(schema: StructType, cfg: SourceConfig) -> StructType:
    """The pane schema with the producing spec in ``window_start``'s metadata (``pane_spec``): the
    windowed sink reads it at ``streamWriter`` and refuses to mix panes of two specs in one table set."""
    return pane_spec.annotate(schema, pane_spec.produced_by(cfg.spec, processing_time_column=PROC_TIME_COLUMN))


def check_malformed(cfg: SourceConfig, start: dict, reports: list[dict], max_event: int | None) -> None:
    """``malformedEvents``: stop the query after a micro-batch whose events have no readable event
    time, when no event before had one (``fail-if-all``: the event-time column is most likely the
    wrong one), or after any event without one (``fail``). Checked on the driver over every
    shard's report of the batch just completed, before the next one is planned."""
    if cfg.malformed_events == "late" or not reports:
        return
    corrupt = sum(int(r.get("corrupt", 0)) for r in reports)
    if corrupt and cfg.malformed_events == "fail":
        sample = next((r["corrupt_sample"] for r in reports if r.get("corrupt_sample")), None)
        raise OptionError("malformedEvents", "fail", "fail-if-all (the default) or late, which send rows that "
                          "cannot be read to the late-data table as 'malformed' and go on",
                          why=f"{corrupt} row(s) of micro-batch {int(start['seq']) - 1} could not be read "
                              f"(e.g. {sample}); they went to the late-data table with reason 'malformed'")
    if cfg.processing_time_windows:
        return
    events = sum(int(r.get("events_in", 0)) for r in reports)
    bad = sum(int(r.get("time_malformed", 0)) for r in reports)
    if bad == 0 or (cfg.malformed_events == "fail-if-all" and (bad < events or max_event is not None)):
        return
    sample = next((r["time_sample"] for r in reports if r.get("time_sample") is not None), None)
    went = (f"went to the late-data table {cfg.late_data_path} with reason 'malformed'" if cfg.late_data_path
            else "were dropped (no lateDataPath) and counted as malformed")
    what = (f"all {events} events of micro-batch {int(start['seq']) - 1} have no readable event time in column "
            f"{cfg.spec.timestamp_column!r} (e.g. {sample}) and no event before had one"
            if bad == events and max_event is None else
            f"{bad} of the {events} events of micro-batch {int(start['seq']) - 1} have no readable event time in column "
            f"{cfg.spec.timestamp_column!r} (e.g. {sample}) and malformedEvents is 'fail'")
    raise OptionError("timestampColumn", cfg.spec.timestamp_column, f"{TIME_COLUMN_FORMS}; start again with a new "
                      "stateLocation and checkpointLocation after changing it. If such events are expected, "
                      ".option('malformedEvents', 'late') sends them to the late-data table and goes on",
                      why=f"{what}; they {went}, and no window got them")


def corrupt_sample(events: pa.Table, corrupt) -> tuple[int, str]:
    """How many rows the upstream could not read, and where the first came from and how it began."""
    i = int(np.flatnonzero(corrupt)[0])
    origin = events.column(ORIGIN)[i].as_py() if ORIGIN in events.column_names else None
    raw = events.column(CORRUPT_RECORD)[i].as_py() or ""
    return int(corrupt.sum()), (f"{origin}: " if origin else "") + repr(raw[:80])


def malformed_sample(events: pa.Table, column: str, valid) -> tuple[int, str]:
    """How many events have no readable event time (``valid`` is False), and one such value."""
    raw = get_column(events, column)[int(np.flatnonzero(~valid)[0])].as_py()
    return int((~valid).sum()), "null" if raw is None else repr(raw)[:80]


def spec_change_error(cfg: SourceConfig, recorded: dict, where: str, fix: str) -> OptionError:
    """The error for a state location written with another windowing spec, naming each changed
    option ``old → new`` (a previous release's ``spec.json`` records fewer options: a change it
    cannot show is named as one of the rest)."""
    now = pane_spec.produced_by(cfg.spec, processing_time_column=PROC_TIME_COLUMN)
    was = recorded.get("options") or pane_spec.from_describe(recorded.get("spec") or {})
    found = pane_spec.changes(was, now)
    if not found:
        return OptionError("aggregate", now.get("aggregate", now.get("process")), f"the options it was written "
                           f"with ({fix})", why=f"{where} another windowing spec; the options it records agree, "
                           "so another one changed: aggregate, process, evictor, timestampColumn, timestampUnit "
                           "or fireOnlyUpdatedPanes")
    name, _, value = found[0]
    return OptionError(name, value, f"the values it was written with ({fix})",
                       why=f"{where} another windowing spec: {pane_spec.describe_changes(found)}")


def check_state_spec(cfg: SourceConfig, recorded: dict, disjoint_upstream: bool = False) -> None:
    """Raise ``OptionError`` naming the option when ``cfg`` differs from what the state location
    was written with (``recorded``, its ``spec.json``) in a way the state cannot follow: the spec
    or ``stateBuckets`` (the key-bucket layout). ``shards`` may change (``rescale``) unless the
    windows or the upstream keep state a rescale cannot redistribute."""
    where = f"stateLocation {cfg.state_location} was written with"
    fix = "keep it unchanged for this state location, or start with a new stateLocation and checkpoint"
    rescale.check_rescale(cfg.spec, disjoint_upstream, cfg.state_location, int(recorded.get("shards", cfg.shards)),
                          cfg.shards)
    if recorded.get("fingerprint") != cfg.spec.fingerprint():
        raise spec_change_error(cfg, recorded, where, fix)
    if recorded.get("stateBuckets", cfg.state_buckets) != cfg.state_buckets:
        raise OptionError("stateBuckets", str(cfg.state_buckets), f"{recorded.get('stateBuckets')} ({fix})",
                          why=f"{where} stateBuckets={recorded.get('stateBuckets')}: the key-bucket layout of the "
                          "state is fixed (shards may change on restart, stateBuckets may not)")
