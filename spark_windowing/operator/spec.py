"""``OperatorSpec``: every windowing setting, parsed and validated once.

>>> spec = OperatorSpec.from_options(window="tumbling(1 minute)", aggregate="sum(x) AS s",
...                                  trigger="AfterWatermark(early=AfterCount(10))")
>>> spec.accumulation_mode, spec.allowed_lateness
('discarding', 0)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable

from spark_windowing._parse import parse_bool
from spark_windowing._time import DURATION_FORMS, UNIT_FACTORS, parse_duration
from spark_windowing.aggregates.parsing import AggregateSpec, parse_aggregates
from spark_windowing.aggregates.process import Evictor, check_target, load_process, parse_evictor
from spark_windowing.errors import OptionError
from spark_windowing.operator.join import JoinSpec, build_join
from spark_windowing.triggers.grammar import parse_trigger
from spark_windowing.triggers.leaves import Default, Never
from spark_windowing.triggers.tree import Trigger
from spark_windowing.windows.kinds import (CountWindow, GlobalWindow, RecordSliding, TimestampCount, WindowFn,
                                          parse_window)

ACCUMULATION_MODES = ("discarding", "accumulating", "accumulating_and_retracting")
TIMESTAMP_COMBINERS = ("end_of_window", "earliest", "latest")
TIMESTAMP_UNITS = tuple(UNIT_FACTORS)
#: ``countOrder``: how ``count(size[, slide])`` counts a key's elements.
COUNT_ORDERS = ("arrival", "timestamp")
COUNT_ORDER_FORMS = ("arrival (Flink's countWindow: in arrival order, the default), timestamp (Storm's "
                     "event-time count windows: the elements the watermark has passed, in timestamp order; late "
                     "elements to the late output) — with window=count(<size>[, <slide>])")


def _choice(option: str, value: str, choices: Iterable[str]) -> str:
    v = str(value).strip().lower()
    if v not in choices:
        raise OptionError(option, value, ", ".join(choices))
    return v


def parse_columns(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(c.strip().strip("`") for c in items if c.strip())


def _count_order(window: WindowFn, count_order: str | None, timestamp_column: str | None) -> WindowFn:
    """The window under ``countOrder``: ``count(size[, slide])`` counted in timestamp order
    (``TimestampCount``) for ``timestamp``; unchanged for ``arrival`` or no value. The option is
    refused with any other window, and ``timestamp`` without an event-time column."""
    if not _given(count_order):
        return window
    order = str(count_order).strip().lower()
    if order not in COUNT_ORDERS:
        raise OptionError("countOrder", count_order, COUNT_ORDER_FORMS)
    if not isinstance(window, CountWindow):
        why = ("count(<size>, <every>) and sliding(<size>, <n> elements) always count in timestamp order"
               if window.mixed and window.count_based else "only count(<size>[, <slide>]) windows count elements")
        raise OptionError("countOrder", count_order, COUNT_ORDER_FORMS, why=f"window={window.spec()}: {why}")
    if order == "arrival":
        return window
    if not timestamp_column:
        raise OptionError("countOrder", count_order, COUNT_ORDER_FORMS,
                          why="timestamp order needs an event-time column (timestampColumn) and its watermark")
    return TimestampCount.of(window)


def _mixed_checks(window: WindowFn, trigger: str | None, allowed_lateness: str) -> Trigger:
    """Mixed count/time windows (and count windows in timestamp order) fire each evaluation once,
    final: no trigger, no lateness. ``record_sliding`` fires each window once, when it closes
    (end + allowedLateness)."""
    sliding = isinstance(window, RecordSliding)
    kinds = "record_sliding(<size>)" if sliding else \
        "count(<size>, <every>), sliding(<size>, <n> elements) and count windows with countOrder=timestamp"
    if trigger is not None and str(trigger).strip() and parse_trigger(trigger).spec() != Default().spec():
        why = (f"{window.spec()} emits each window once, final, when the watermark passes its end plus "
               "allowedLateness (Kafka's suppress(untilWindowCloses))" if sliding else
               f"{window.spec()} fires each evaluation exactly once, as Storm does")
        raise OptionError("trigger", trigger, f"no trigger (or Default()) with {kinds}", why=why)
    if not sliding and parse_duration(allowed_lateness, option="allowedLateness"):
        raise OptionError("allowedLateness", allowed_lateness, f"0 seconds with {kinds}",
                          why="their windows are final when evaluated; late elements go to the late output")
    return Never()


def _given(value: object) -> bool:
    return value is not None and bool(str(value).strip())


def _aggregates_or_process(aggregate: str | None, process: str | None, evictor: str | None
                           ) -> tuple[tuple[AggregateSpec, ...], str, Evictor | None]:
    if _given(process) and _given(aggregate):
        raise OptionError("process", process, "either aggregate or process, not both",
                          why=f"aggregate is given too ({aggregate!r})")
    if _given(evictor) and not _given(process):
        raise OptionError("evictor", evictor, "an evictor together with process=module:function",
                          why="evictors apply to the elements of a process function's pane")
    if not _given(process):
        if not _given(aggregate):
            raise OptionError("aggregate", aggregate, "e.g. sum(amount) AS total, count(*) AS n; or process="
                              "module:function", why="required (unless process is given)")
        return parse_aggregates(str(aggregate)), str(aggregate), None
    target = check_target(str(process))
    load_process(target)  # importable, output_fields: fail at load(), not in a worker
    ev = parse_evictor(str(evictor)) if _given(evictor) else None
    return (AggregateSpec("process", None, "process", target=target),), f"process={target}", ev


@dataclass(frozen=True)
class OperatorSpec:
    """The windowed operator's configuration (docs/options.md and docs/semantics.md), all times in microseconds."""

    window: WindowFn
    trigger: Trigger
    aggregates: tuple[AggregateSpec, ...]
    aggregate_text: str = ""
    key_columns: tuple[str, ...] = ()
    timestamp_column: str | None = "ts"
    timestamp_unit: str | None = None
    accumulation_mode: str = "discarding"
    allowed_lateness: int = 0
    timestamp_combiner: str = "end_of_window"
    fire_only_updated_panes: bool = False
    evictor: Evictor | None = None   # with a process function (``spark_windowing.aggregates.process``)
    join: JoinSpec | None = None  # a second stream merged per key and window (spark_windowing.operator.join)
    #: µs an event's time may be ahead of the processing time; events further ahead go to the late
    #: output as ``future`` and never move a watermark (None: no bound). Not part of the
    #: fingerprint: it decides which events enter, not the shape of state.
    max_time_ahead: int | None = None

    @classmethod
    def from_options(cls, *, window: str, aggregate: str | None = None, process: str | None = None,
                     evictor: str | None = None, trigger: str | None = None,
                     key_columns: str | Iterable[str] | None = None, timestamp_column: str | None = "ts",
                     timestamp_unit: str | None = None, accumulation_mode: str = "discarding",
                     allowed_lateness: str = "0 seconds", timestamp_combiner: str = "end_of_window",
                     fire_only_updated_panes: object = False, join: str | None = None,
                     aggregate2: str | None = None, key_columns2: str | Iterable[str] | None = None,
                     timestamp_column2: str | None = None, max_event_time_ahead: str | None = None,
                     count_order: str | None = None) -> "OperatorSpec":
        """Build from option strings (Spark option names in snake_case); raise OptionError.
        Exactly one of ``aggregate`` and ``process`` (a process function is imported here, so
        a missing one fails now); ``evictor`` only with ``process``. ``join`` (``inner``,
        ``left``, ``outer``, ``cogroup``) merges a second stream; its ``aggregate2``,
        ``key_columns2`` and ``timestamp_column2`` default to the first's. ``max_event_time_ahead``:
        a duration, or ``off`` / None for no bound. ``count_order``: ``arrival`` / ``timestamp``
        for ``count(size[, slide])`` (None: arrival); the reader passes None as
        ``timestamp_column`` for processing-time windows."""
        aggregates, aggregate_text, ev = _aggregates_or_process(aggregate, process, evictor)
        w = _count_order(parse_window(window), count_order, timestamp_column)
        if w.mixed:  # Storm's count/time mixes, record_sliding: fire once (spark_windowing.windows.mixed)
            t: Trigger = _mixed_checks(w, trigger, allowed_lateness)
        elif trigger is None or not str(trigger).strip():
            t = Never() if isinstance(w, GlobalWindow) else Default()
        else:
            t = parse_trigger(trigger)
        unit = None
        if timestamp_unit is not None and str(timestamp_unit).strip():
            unit = _choice("timestampUnit", timestamp_unit, TIMESTAMP_UNITS)
        keys = parse_columns(key_columns)
        ts_col = timestamp_column.strip() if timestamp_column else None
        js, aggs = None, None
        if join is not None and str(join).strip():
            if _given(process):
                raise OptionError("process", process, "aggregate (stream 1) and aggregate2 (stream 2) with join",
                                  why="process functions are not available with join in this version")
            js, aggs = build_join(how=join, aggregate=aggregate, aggregate2=aggregate2, key_columns=keys,
                                  key_columns2=parse_columns(key_columns2) or None, timestamp_column=ts_col,
                                  timestamp_column2=timestamp_column2, window=w)
        return cls(
            window=w, trigger=t, aggregates=aggs if aggs is not None else aggregates,
            aggregate_text=aggregate_text, evictor=ev, key_columns=keys, join=js,
            timestamp_column=ts_col, timestamp_unit=unit,
            accumulation_mode=_choice("accumulationMode", accumulation_mode, ACCUMULATION_MODES),
            allowed_lateness=parse_duration(allowed_lateness, option="allowedLateness"),
            timestamp_combiner=_choice("timestampCombiner", timestamp_combiner, TIMESTAMP_COMBINERS),
            fire_only_updated_panes=parse_bool("fireOnlyUpdatedPanes", fire_only_updated_panes),
            max_time_ahead=_time_ahead(max_event_time_ahead),
        )

    @property
    def retracting(self) -> bool:
        return self.accumulation_mode == "accumulating_and_retracting"

    @property
    def discarding(self) -> bool:
        return self.accumulation_mode == "discarding"

    def fingerprint(self) -> str:
        """A digest of everything that shapes operator state; snapshots carry it."""
        doc = {
            "window": self.window.spec(), "trigger": self.trigger.spec(),
            "aggregates": [[a.func, a.column, a.alias, a.target] + ([True] if a.hidden else [])
                           + ([a.n, list(a.carry)] if a.labels else [])   # ranked rows
                           for a in self.aggregates],
            "keys": list(self.key_columns), "ts": self.timestamp_column, "unit": self.timestamp_unit,
            "mode": self.accumulation_mode, "lateness": self.allowed_lateness,
            "combiner": self.timestamp_combiner, "only_updated": self.fire_only_updated_panes,
        }
        if self.evictor is not None:  # only then, so snapshots of other specs keep their fingerprint
            doc["evictor"] = self.evictor.spec()
        if self.join is not None:  # absent for one stream: their fingerprints stay as they were
            doc["join"] = self.join.describe()
        if isinstance(self.window, CountWindow) and self.window.step < self.window.size:
            # count(size, slide) follows Flink's countWindow since issue #27; state written under
            # the earlier meaning (windows starting at every slide-th element) must not restore
            doc["count_windows"] = "flink"
        if isinstance(self.window, TimestampCount):  # countOrder=timestamp (absent for arrival: as before)
            doc["count_order"] = "timestamp"
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]

    def describe(self) -> dict[str, object]:
        out = {"window": self.window.spec(), "trigger": self.trigger.spec(),
               "accumulation_mode": self.accumulation_mode, "allowed_lateness_us": self.allowed_lateness,
               "timestamp_combiner": self.timestamp_combiner, "keys": list(self.key_columns)}
        if self.join is not None:
            out["join"] = self.join.describe()
        if isinstance(self.window, TimestampCount):
            out["count_order"] = "timestamp"
        return out


def _time_ahead(raw: str | None) -> int | None:
    """``maxEventTimeAhead``: a positive duration, or ``off`` (no bound)."""
    if raw is None or str(raw).strip().lower() in ("", "off", "none"):
        return None
    try:
        return parse_duration(str(raw), option="maxEventTimeAhead", allow_zero=False)
    except OptionError:
        raise OptionError("maxEventTimeAhead", raw, f"{DURATION_FORMS} (more than 0), or off (no bound)") from None
