"""What produced a set of panes: the windowing spec, as the option values a user wrote.

The windowed source puts it into the pane schema it returns at ``load()`` (the metadata of the
``window_start`` column, key :data:`METADATA_KEY`); Spark keeps a column's metadata through
``filter``, ``select`` and ``withColumnRenamed``, so it reaches the sink's ``streamWriter`` with the
schema. The sink records it in ``P/_spec.json`` (:data:`spark_windowing.datasource.storage.layout.SINK_SPEC`)
and refuses a query whose panes come from another spec (:data:`COMPARED`: the options that make
two queries' rows incomparable, e.g. 10- and 5-minute windows of the same events in ``current``).
The state location's ``spec.json`` records the same values (``options``), so a restart with other
options is refused naming each changed option ``old → new``.

>>> changes({"window": "tumbling(10 minutes)", "trigger": "Default()"},
...         {"window": "tumbling(5 minutes)", "trigger": "Default()"})
[('window', 'tumbling(10 minutes)', 'tumbling(5 minutes)')]
>>> describe_changes([("window", "tumbling(10 minutes)", "tumbling(5 minutes)")])
"window 'tumbling(10 minutes)' → 'tumbling(5 minutes)'"
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

from spark_windowing._time import format_duration
from spark_windowing.windows.kinds import TimestampCount

#: Key of the ``window_start`` column's metadata carrying the producing spec (a JSON object).
METADATA_KEY = "spark_windowing.producedBy"
#: The options whose change makes a pane table set mix incomparable rows; the sink refuses a
#: change of any of them (unless ``allowSpecChange``).
COMPARED = ("window", "keyColumns", "aggregate", "process", "evictor", "accumulationMode", "trigger",
            "timestampCombiner", "timestampColumn", "timestampUnit", "join", "countOrder")
#: Carried for the sink's upkeep of ``current`` (a window is final once the watermark passes
#: ``window_end + allowedLateness``), not compared: a changed lateness leaves rows comparable.
LATENESS_US = "allowedLatenessUs"
#: A previous release's ``spec.json`` records ``spec`` (``OperatorSpec.describe()``): its fields
#: under the option names.
_DESCRIBE_NAMES = {"window": "window", "trigger": "trigger", "accumulation_mode": "accumulationMode",
                   "timestamp_combiner": "timestampCombiner", "keys": "keyColumns",
                   "allowed_lateness_us": "allowedLateness", "join": "join"}


def produced_by(spec: Any, *, processing_time_column: str | None = None) -> dict[str, Any]:
    """The option values of ``spec`` (an ``OperatorSpec``) as the user would write them."""
    ts = spec.timestamp_column if spec.timestamp_column != processing_time_column else None
    doc: dict[str, Any] = {
        "window": _tidy_window(spec.window.spec()),
        "keyColumns": ", ".join(spec.key_columns),
        "trigger": spec.trigger.spec(),
        "accumulationMode": spec.accumulation_mode,
        "timestampCombiner": spec.timestamp_combiner,
        "timestampColumn": ts or "(none: processing time)",
        "timestampUnit": spec.timestamp_unit or "(default)",
        "allowedLateness": format_duration(spec.allowed_lateness) if spec.allowed_lateness else "0 seconds",
        "fireOnlyUpdatedPanes": "true" if spec.fire_only_updated_panes else "false",
        LATENESS_US: int(spec.allowed_lateness),
    }
    if spec.aggregate_text.startswith("process="):
        doc["process"] = spec.aggregate_text[len("process="):]
    else:
        doc["aggregate"] = spec.aggregate_text
    if spec.evictor is not None:
        doc["evictor"] = spec.evictor.spec()
    if spec.join is not None:
        doc["join"] = json.dumps(spec.join.describe(), sort_keys=True, default=str)
    if isinstance(spec.window, TimestampCount):
        doc["countOrder"] = "timestamp"  # count(n[, m]) in timestamp order; absent for arrival, as before
    return doc


def _tidy_window(text: str) -> str:
    """A window as a user writes it: without a zero offset (``tumbling(10 minutes)``)."""
    return re.sub(r", 0 microseconds\)$", ")", text)


def from_describe(described: Mapping[str, Any]) -> dict[str, Any]:
    """The option values a previous release's ``spec.json`` recorded (``spec``: ``describe()``)."""
    out: dict[str, Any] = {}
    for field, option in _DESCRIBE_NAMES.items():
        if field not in described:
            continue
        value = described[field]
        if field == "window":
            value = _tidy_window(str(value))
        elif field == "keys":
            value = ", ".join(value)
        elif field == "allowed_lateness_us":
            value = format_duration(int(value)) if value else "0 seconds"
        elif field == "join":
            value = json.dumps(value, sort_keys=True, default=str)
        out[option] = value
    return out


def changes(old: Mapping[str, Any], new: Mapping[str, Any],
            options: Iterable[str] | None = None) -> list[tuple[str, Any, Any]]:
    """``(option, old, new)`` for each option (of ``options``; default: every one either side
    records, but :data:`LATENESS_US`) whose value differs. Both sides written by this release
    record every option (one not set, e.g. ``evictor``, is absent); a previous release's record
    (no ``timestampColumn``) holds fewer, and an option it lacks is not compared."""
    full = "timestampColumn" in old and "timestampColumn" in new
    names = list(options) if options is not None else sorted((set(old) | set(new)) - {LATENESS_US})
    return [(n, old.get(n), new.get(n)) for n in names
            if (full or (n in old and n in new)) and old.get(n) != new.get(n)]


def describe_changes(found: list[tuple[str, Any, Any]]) -> str:
    """``window 'tumbling(10 minutes)' → 'tumbling(5 minutes)'; ...``."""
    return "; ".join(f"{name} {_show(old)} → {_show(new)}" for name, old, new in found)


def _show(value: Any) -> str:
    return "(not set)" if value is None else repr(value)


def to_metadata(doc: Mapping[str, Any]) -> dict[str, str]:
    return {METADATA_KEY: json.dumps(doc, sort_keys=True)}


def annotate(schema: Any, doc: Mapping[str, Any]) -> Any:
    """The pane ``StructType`` ``schema`` with ``doc`` (``produced_by``) in ``window_start``'s metadata."""
    from pyspark.sql.types import StructField, StructType
    return StructType([StructField(f.name, f.dataType, f.nullable, {**(f.metadata or {}), **to_metadata(doc)})
                       if f.name == "window_start" else f for f in schema.fields])


def from_schema(schema: Any) -> dict[str, Any] | None:
    """The producing spec a pane ``StructType`` carries (None: panes not from the windowed source,
    or a transformation that dropped the column metadata)."""
    try:
        raw = schema["window_start"].metadata.get(METADATA_KEY)
    except (KeyError, AttributeError):
        return None
    return json.loads(raw) if raw else None
