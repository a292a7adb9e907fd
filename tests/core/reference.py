"""A reference model of the windowed operator, written for obviousness, not speed.

It has the constructor keywords and methods of ``spark_windowing.testing.TestStream`` and emits
the same pane / late dicts, so tests can run both on the same input and compare. It works one
element at a time in plain Python and never imports ``spark_windowing``: it is an independent
reading of the semantics (docs/options.md, docs/semantics.md), so the two cross-check each other.

Time model: integer microseconds inside; inputs and outputs in ``timestamp_unit`` (output times
are floor-divided). Windows are half-open ``[start, end)``. The watermark starts unset (``None``,
read as minus infinity); processing time starts at 0.

One call (``add_elements``, ``advance_watermark_to``, ``advance_processing_time``) is one step:

1. every element of the bundle is checked (malformed, too late, closed) and added to its windows
   (sessions: proto-windows are merged per key first);
2. every candidate window (got elements, or a due timer) evaluates its trigger once;
3. windows with ``watermark >= end + allowed_lateness`` are removed.

Where the written contract leaves room, the model decides as follows (and says so here):

* Timers are one-shot and belong to the active part of the trigger. A window is a candidate in a
  step if it got elements, if its end-of-window timer fires (set by any element arriving while
  watermark < end; fires once when watermark >= end), or if a processing-time deadline /
  continuous mark was *reached in this step* (previous time < mark <= now) in the active part
  (AfterEach: the current sub-trigger; AfterWatermark: early before the on-time firing, late after).
* ContinuousEventTime sets its first mark from the earliest element of the bundle that first
  reaches it; ContinuousProcessingTime fires only on processing time (Flink), not at W >= end.
* AfterProcessingTime keeps its deadline until reset; AfterCount its count until reset.
* ``advance_watermark_to_infinity`` reports the watermark as the global window end.
* A session element dropped as "closed" reports its own proto-window bounds.
* A session group holding a finished window is finished (Beam): the closed window grows to the
  group's bounds, absorbing open windows of the group (their contents are dropped; under
  retracting, their last panes are retracted — a finished window's final pane stands).

Supported: tumbling / sliding / session (fixed gap or gap column) / global windows, keyed or not,
Default, AfterWatermark(early, late), AfterCount, AfterProcessingTime, Repeatedly, AfterAny,
AfterAll, AfterEach, OrFinally, Never, ContinuousEventTime, ContinuousProcessingTime, the three
accumulation modes, the three timestamp combiners, fire_only_updated_panes, and the aggregates
sum, count(*), count(x), avg, min, max, first, last, collect_list, count_distinct, and the ranked
rows top(n, x, c, ...), bottom(n, ...), max_rows(x, c, ...), min_rows(x, ...): the rows of the
window with a non-null x that fewer than n rows beat (SQL RANK() <= n), as {x, c, ...} dicts.

Process functions (the ``process`` hook): instead of ``aggregate``, a callable
``process(rows, new, evicted, expired) -> dict`` (lists of the element dicts, arrival order) gives a
pane's values, after the ``evictor`` (``count(n)``, ``time(d)``, ``delta(threshold, column)``, read
as Flink's ``evictBefore``) removed elements from the pane for good. ``new``: the pane's elements
that arrived since the window's last firing; ``evicted``: removed by the evictor at this firing;
``expired``: the previous pane when ``discarding`` (empty otherwise).
"""

from __future__ import annotations

import copy
import hashlib
import pickle
import re
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------------------------
# Time
# ----------------------------------------------------------------------------------------------

UNIT_US = {"us": 1, "ms": 1_000, "s": 1_000_000}
GLOBAL_START = -62_135_596_800_000_000          # 0001-01-01T00:00:00 UTC, in microseconds
GLOBAL_END = 253_402_300_799_999_999            # 9999-12-31T23:59:59.999999 UTC, in microseconds
WATERMARK_INFINITY = GLOBAL_END                 # what advance_watermark_to_infinity() reports

_DURATION_UNITS = {
    "microsecond": 1, "us": 1,
    "millisecond": 1_000, "ms": 1_000,
    "second": 1_000_000, "s": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 7 * 86_400_000_000,
}


def parse_duration(text: str) -> int:
    """'10 milliseconds' -> 10_000; '1 hour 30 minutes' -> 5_400_000_000 (microseconds)."""
    parts = text.strip().lower().split()
    if not parts or len(parts) % 2:
        raise ValueError(f"bad duration {text!r}")
    total = 0
    for amount, unit in zip(parts[::2], parts[1::2]):
        unit = unit[:-1] if unit.endswith("s") and unit[:-1] in _DURATION_UNITS else unit
        if unit not in _DURATION_UNITS or not re.fullmatch(r"-?\d+", amount):
            raise ValueError(f"bad duration {text!r}")
        total += int(amount) * _DURATION_UNITS[unit]
    return total


def _split_args(text: str) -> list[str]:
    """Split 'a, f(b, c), d' at top-level commas."""
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur.strip():
        args.append(cur.strip())
    return args


def _call(text: str) -> tuple[str, list[str]]:
    """'name(a, b)' -> ('name', ['a', 'b']); 'name' -> ('name', [])."""
    text = text.strip()
    m = re.fullmatch(r"(\w+)\s*(?:\((.*)\))?", text, re.S)
    if not m:
        raise ValueError(f"cannot parse {text!r}")
    return m.group(1), _split_args(m.group(2) or "")


# ----------------------------------------------------------------------------------------------
# Windows
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tumbling:
    size: int
    offset: int = 0

    def assign(self, t: int) -> list[tuple[int, int]]:
        start = (t - self.offset) // self.size * self.size + self.offset
        return [(start, start + self.size)]


@dataclass(frozen=True)
class Sliding:
    size: int
    slide: int
    offset: int = 0

    def assign(self, t: int) -> list[tuple[int, int]]:
        # The latest start s <= t with s = offset (mod slide), then walk back while t < s + size.
        s = (t - self.offset) // self.slide * self.slide + self.offset
        windows = []
        while t < s + self.size:
            windows.append((s, s + self.size))
            s -= self.slide
        return sorted(windows)


@dataclass(frozen=True)
class Session:
    gap: int | None = None           # microseconds, or None when gap_column is used
    gap_column: str | None = None


@dataclass(frozen=True)
class Global:
    def assign(self, t: int) -> list[tuple[int, int]]:
        return [(GLOBAL_START, GLOBAL_END)]


def parse_window(text: str):
    name, args = _call(text)
    name = name.lower()
    if name == "tumbling" and len(args) in (1, 2):
        return Tumbling(*(parse_duration(a) for a in args))
    if name == "sliding" and len(args) in (2, 3):
        return Sliding(*(parse_duration(a) for a in args))
    if name == "session" and len(args) == 1:
        if "=" in args[0]:
            kw, col = (p.strip() for p in args[0].split("=", 1))
            if kw.lower() != "gapcolumn":
                raise ValueError(f"bad session window {text!r}")
            return Session(gap_column=col)
        return Session(gap=parse_duration(args[0]))
    if name == "global" and not args:
        return Global()
    raise ValueError(f"bad window {text!r}")


# ----------------------------------------------------------------------------------------------
# Triggers: stateless specs; the state of one (key, window) is a nested dict the methods mutate.
# ctx is a Ctx (watermark, processing time, window end). Rules follow Beam Python's trigger.py.
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ctx:
    wm: int | None      # None = no watermark yet (minus infinity)
    pt: int
    end: int
    step: int = 0       # batch_seq of the step
    prev_wm: int | None = None   # watermark and processing time of the previous step
    prev_pt: int = 0

    def wm_at_least(self, t: int) -> bool:
        return self.wm is not None and self.wm >= t

    def wm_reached_now(self, t: int) -> bool:
        """An event-time timer at t fires in this step (one-shot: prev watermark < t <= now)."""
        return self.wm_at_least(t) and not (self.prev_wm is not None and self.prev_wm >= t)

    def pt_reached_now(self, t: int) -> bool:
        """A processing-time timer at t fires in this step (prev processing time < t <= now)."""
        return self.prev_pt < t <= self.pt


class Trigger:
    children: tuple = ()

    def new_state(self) -> dict:
        return {"children": [c.new_state() for c in self.children]}

    def on_element(self, st: dict, t: int, ctx: Ctx) -> None:
        for c, cs in zip(self.children, st["children"]):
            c.on_element(cs, t, ctx)

    def should_fire(self, st: dict, ctx: Ctx) -> bool:
        raise NotImplementedError

    def on_fire(self, st: dict, ctx: Ctx) -> bool:
        """Called when should_fire is true; returns True when the trigger has finished."""
        raise NotImplementedError

    def reset(self, st: dict) -> None:
        for c, cs in zip(self.children, st["children"]):
            c.reset(cs)

    def merge(self, states: list[dict]) -> dict:
        return {"children": [c.merge([s["children"][i] for s in states])
                             for i, c in enumerate(self.children)]}

    def timer_due(self, st: dict, ctx: Ctx) -> bool:
        """A timer of the active part of the trigger fires in this step: a processing-time
        deadline or a continuous mark was reached since the previous step (timers are one-shot:
        a deadline that stays reached does not make the window a candidate again)."""
        return any(c.timer_due(cs, ctx) for c, cs in zip(self.children, st["children"]))

    def has_watermark(self) -> bool:
        return any(c.has_watermark() for c in self.children)


@dataclass(frozen=True)
class Default(Trigger):
    def should_fire(self, st, ctx):
        return ctx.wm_at_least(ctx.end)

    def on_fire(self, st, ctx):
        return False

    def has_watermark(self):
        return True


@dataclass(frozen=True)
class Never(Trigger):
    def should_fire(self, st, ctx):
        return False

    def on_fire(self, st, ctx):
        return False


@dataclass(frozen=True)
class AfterCount(Trigger):
    n: int

    def new_state(self):
        return {"count": 0}

    def on_element(self, st, t, ctx):
        st["count"] += 1

    def should_fire(self, st, ctx):
        return st["count"] >= self.n

    def on_fire(self, st, ctx):
        return True

    def reset(self, st):
        st["count"] = 0

    def merge(self, states):
        return {"count": sum(s["count"] for s in states)}

    def timer_due(self, st, ctx):
        return False


@dataclass(frozen=True)
class AfterProcessingTime(Trigger):
    delay: int

    def new_state(self):
        return {"deadline": None}

    def on_element(self, st, t, ctx):
        if st["deadline"] is None:
            st["deadline"] = ctx.pt + self.delay

    def should_fire(self, st, ctx):
        return st["deadline"] is not None and ctx.pt >= st["deadline"]

    def on_fire(self, st, ctx):
        return True

    def reset(self, st):
        st["deadline"] = None

    def merge(self, states):
        deadlines = [s["deadline"] for s in states if s["deadline"] is not None]
        return {"deadline": min(deadlines) if deadlines else None}

    def timer_due(self, st, ctx):
        return st["deadline"] is not None and ctx.pt_reached_now(st["deadline"])


@dataclass(frozen=True)
class ContinuousEventTime(Trigger):
    """Flink's ContinuousEventTimeTrigger (as of FLINK-20443): a mark m fires once the watermark
    is past it (W > m: Flink's watermark W - 1 >= m), and whenever W >= end. The first mark is the
    next multiple of `interval` after the window's first bundle (its earliest element), set only
    while W < end; after a mark fires the next one is m + k * interval, the first not yet passed.
    Every mark is capped at the window's max timestamp (end - 1), where it is the end-of-window
    firing itself: nothing repeats after the end. Merging keeps the smallest mark."""
    interval: int

    def new_state(self):
        return {"next": None, "set_at_step": None}

    def on_element(self, st, t, ctx):
        if ctx.wm_at_least(ctx.end):            # Flink: fires at once, sets no mark
            return
        mark = min(t // self.interval * self.interval + self.interval, ctx.end - 1)
        if st["next"] is None:
            st["next"], st["set_at_step"] = mark, ctx.step
        elif st["set_at_step"] == ctx.step:      # elements of one bundle arrive together
            st["next"] = min(st["next"], mark)

    def _passed(self, st, ctx):
        return st["next"] is not None and ctx.wm_at_least(st["next"] + 1)

    def should_fire(self, st, ctx):
        return self._passed(st, ctx) or ctx.wm_at_least(ctx.end)

    def on_fire(self, st, ctx):
        # Flink re-registers only when the mark itself fired: firing because the watermark passed
        # the window end (onEventTime at maxTimestamp) registers no new mark
        if self._passed(st, ctx):
            m = st["next"]
            m += -(-(ctx.wm - m) // self.interval) * self.interval   # the first m + k * interval >= W
            st["next"] = min(m, ctx.end - 1)
        return False

    def reset(self, st):
        st["next"] = st["set_at_step"] = None

    def merge(self, states):
        marks = [s["next"] for s in states if s["next"] is not None]
        return {"next": min(marks) if marks else None, "set_at_step": None}

    def timer_due(self, st, ctx):
        return st["next"] is not None and ctx.wm_reached_now(st["next"] + 1)


@dataclass(frozen=True)
class ContinuousProcessingTime(Trigger):
    """Flink's ContinuousProcessingTimeTrigger: fires each time processing time passes the next
    multiple of `interval` after the window's first element; not at the window end (Flink)."""
    interval: int

    def new_state(self):
        return {"next": None}

    def on_element(self, st, t, ctx):
        if st["next"] is None:
            st["next"] = ctx.pt // self.interval * self.interval + self.interval

    def should_fire(self, st, ctx):
        return st["next"] is not None and ctx.pt >= st["next"]

    def on_fire(self, st, ctx):
        st["next"] = ctx.pt // self.interval * self.interval + self.interval
        return False

    def reset(self, st):
        st["next"] = None

    def merge(self, states):
        marks = [s["next"] for s in states if s["next"] is not None]
        return {"next": min(marks) if marks else None}

    def timer_due(self, st, ctx):
        return st["next"] is not None and ctx.pt_reached_now(st["next"])


@dataclass(frozen=True)
class Repeatedly(Trigger):
    children: tuple

    def should_fire(self, st, ctx):
        return self.children[0].should_fire(st["children"][0], ctx)

    def on_fire(self, st, ctx):
        if self.children[0].on_fire(st["children"][0], ctx):
            self.children[0].reset(st["children"][0])
        return False


@dataclass(frozen=True)
class AfterAny(Trigger):
    children: tuple

    def should_fire(self, st, ctx):
        return any(c.should_fire(cs, ctx) for c, cs in zip(self.children, st["children"]))

    def on_fire(self, st, ctx):
        finished = [c.on_fire(cs, ctx) for c, cs in zip(self.children, st["children"])
                    if c.should_fire(cs, ctx)]
        return any(finished)


@dataclass(frozen=True)
class AfterAll(Trigger):
    children: tuple

    def should_fire(self, st, ctx):
        return all(c.should_fire(cs, ctx) for c, cs in zip(self.children, st["children"]))

    def on_fire(self, st, ctx):
        finished = [c.on_fire(cs, ctx) for c, cs in zip(self.children, st["children"])
                    if c.should_fire(cs, ctx)]
        return all(finished)


@dataclass(frozen=True)
class AfterEach(Trigger):
    children: tuple

    def new_state(self):
        return {"index": 0, "children": [c.new_state() for c in self.children]}

    def on_element(self, st, t, ctx):
        i = st["index"]
        if i < len(self.children):
            self.children[i].on_element(st["children"][i], t, ctx)

    def should_fire(self, st, ctx):
        i = st["index"]
        return i < len(self.children) and self.children[i].should_fire(st["children"][i], ctx)

    def on_fire(self, st, ctx):
        i = st["index"]
        if self.children[i].on_fire(st["children"][i], ctx):
            st["index"] += 1
        return st["index"] == len(self.children)

    def reset(self, st):
        st["index"] = 0
        super().reset(st)

    def merge(self, states):
        merged = super().merge(states)
        merged["index"] = max(s["index"] for s in states)
        return merged

    def timer_due(self, st, ctx):
        i = st["index"]
        return i < len(self.children) and self.children[i].timer_due(st["children"][i], ctx)


@dataclass(frozen=True)
class AfterWatermark(Trigger):
    """children = (early or None, late or None), each already wrapped in Repeatedly."""
    children: tuple

    @property
    def early(self):
        return self.children[0]

    @property
    def late(self):
        return self.children[1]

    def new_state(self):
        return {"late_phase": False,
                "early": self.early.new_state() if self.early else None,
                "late": self.late.new_state() if self.late else None}

    def on_element(self, st, t, ctx):
        if st["late_phase"]:
            self.late.on_element(st["late"], t, ctx)
        elif self.early:
            self.early.on_element(st["early"], t, ctx)

    def should_fire(self, st, ctx):
        if st["late_phase"]:
            return self.late.should_fire(st["late"], ctx)
        if ctx.wm_at_least(ctx.end):
            return True
        return bool(self.early) and self.early.should_fire(st["early"], ctx)

    def on_fire(self, st, ctx):
        if st["late_phase"]:
            return self.late.on_fire(st["late"], ctx)
        if ctx.wm_at_least(ctx.end):
            st["late_phase"] = True
            return self.late is None
        self.early.on_fire(st["early"], ctx)
        return False

    def reset(self, st):
        st["late_phase"] = False
        for name, sub in (("early", self.early), ("late", self.late)):
            if sub:
                sub.reset(st[name])

    def merge(self, states):
        return {"late_phase": any(s["late_phase"] for s in states),
                "early": self.early.merge([s["early"] for s in states]) if self.early else None,
                "late": self.late.merge([s["late"] for s in states]) if self.late else None}

    def timer_due(self, st, ctx):
        if st["late_phase"]:
            return self.late.timer_due(st["late"], ctx)
        return bool(self.early) and self.early.timer_due(st["early"], ctx)

    def has_watermark(self):
        return True


def parse_trigger(text: str) -> Trigger:
    name, args = _call(text)
    key = name.lower()
    if key in ("default", "never"):
        if args:
            raise ValueError(f"{name} takes no arguments")
        return Default() if key == "default" else Never()
    if key == "aftercount":
        (n,) = args
        if int(n) < 1:
            raise ValueError("AfterCount needs n >= 1")
        return AfterCount(int(n))
    if key == "afterprocessingtime":
        return AfterProcessingTime(parse_duration(", ".join(args)))
    if key == "continuouseventtime":
        return ContinuousEventTime(parse_duration(", ".join(args)))
    if key == "continuousprocessingtime":
        return ContinuousProcessingTime(parse_duration(", ".join(args)))
    if key == "repeatedly":
        (sub,) = args
        return Repeatedly((parse_trigger(sub),))
    if key in ("afterany", "afterall", "aftereach", "orfinally"):
        subs = tuple(parse_trigger(a) for a in args)
        if key == "orfinally" and len(subs) != 2:
            raise ValueError("OrFinally takes two triggers")
        return {"afterany": AfterAny, "orfinally": AfterAny, "afterall": AfterAll,
                "aftereach": AfterEach}[key](subs)
    if key == "afterwatermark":
        early = late = None
        for a in args:
            kw, sub = (p.strip() for p in a.split("=", 1))
            if kw.lower() == "early":
                early = Repeatedly((parse_trigger(sub),))
            elif kw.lower() == "late":
                late = Repeatedly((parse_trigger(sub),))
            else:
                raise ValueError(f"AfterWatermark has no argument {kw!r}")
        return AfterWatermark((early, late))
    raise ValueError(f"unknown trigger {text!r}")


# ----------------------------------------------------------------------------------------------
# Aggregates
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Aggregate:
    func: str
    column: str | None      # None for count(*)
    name: str
    n: int = 0              # ranked rows: the rank kept
    carry: tuple = ()       # ranked rows: the other columns of a kept row


_FUNCS = ("sum", "count", "avg", "min", "max", "first", "last", "collect_list", "count_distinct")


_RANKED = ("top", "bottom", "max_rows", "min_rows")


def parse_aggregates(text: str) -> list[Aggregate]:
    aggs = []
    for part in _split_args(text):
        f = re.fullmatch(r"most_frequent\s*\(\s*(\d+)\s*,\s*(\w+)\s*\)(?:\s+as\s+(\w+))?", part.strip(), re.I)
        if f:
            aggs.append(Aggregate("most_frequent", f.group(2), f.group(3) or f"most_frequent({f.group(2)})",
                                  int(f.group(1))))
            continue
        r = re.fullmatch(r"(top|bottom|max_rows|min_rows)\s*\((.*)\)(?:\s+as\s+(\w+))?", part.strip(), re.I)
        if r:
            func, args = r.group(1).lower(), [a.strip() for a in r.group(2).split(",")]
            n = int(args.pop(0)) if func in ("top", "bottom") else 1
            carry = tuple(c for c in dict.fromkeys(args[1:]) if c != args[0])
            aggs.append(Aggregate(func, args[0], r.group(3) or f"{func}({args[0]})", n, carry))
            continue
        m = re.fullmatch(r"(\w+)\s*\(\s*([\w*]+)\s*\)(?:\s+as\s+(\w+))?", part.strip(), re.I)
        if not m or m.group(1).lower() not in _FUNCS:
            raise ValueError(f"bad aggregate {part!r}")
        func, col, alias = m.group(1).lower(), m.group(2), m.group(3)
        if col == "*" and func != "count":
            raise ValueError(f"bad aggregate {part!r}")
        aggs.append(Aggregate(func, None if col == "*" else col, alias or f"{func}({col})"))
    return aggs


@dataclass(frozen=True)
class Element:
    seq: int            # global arrival number
    t: int              # event time, microseconds
    row: dict           # the element as given


def evaluate(agg: Aggregate, elements: list[Element]) -> Any:
    """The aggregate over the elements (in arrival order)."""
    if agg.column is None:
        return len(elements)
    present = [e for e in elements if e.row.get(agg.column) is not None]
    vals = [e.row[agg.column] for e in present]
    if agg.func == "count":
        return len(vals)
    if agg.func == "collect_list":
        return vals
    if agg.func == "count_distinct":
        return len(set(vals))
    if agg.func in _RANKED:
        return ranked_rows(agg, present)
    if agg.func == "most_frequent":
        return most_frequent(agg, vals)
    if not vals:
        return None
    if agg.func == "sum":
        return sum(vals)
    if agg.func == "avg":
        return sum(vals) / len(vals)
    if agg.func == "min":
        return min(vals)
    if agg.func == "max":
        return max(vals)
    if agg.func == "first":     # smallest timestamp; ties: earliest arrival
        return min(present, key=lambda e: (e.t, e.seq)).row[agg.column]
    if agg.func == "last":      # largest timestamp; ties: latest arrival
        return max(present, key=lambda e: (e.t, e.seq)).row[agg.column]
    raise AssertionError(agg.func)


def ranked_rows(agg: Aggregate, present: list[Element]) -> list[dict]:
    """The rows fewer than n rows beat (larger x for top/max_rows, smaller for bottom/min_rows),
    best first, equal values ordered by the carried columns (nulls first)."""
    col, larger = agg.column, agg.func in ("top", "max_rows")

    def beats(a: Element, b: Element) -> bool:
        return a.row[col] > b.row[col] if larger else a.row[col] < b.row[col]
    kept = [e for e in present if sum(beats(o, e) for o in present) < agg.n]
    kept.sort(key=lambda e: [(0,) if e.row.get(c) is None else (1, e.row[c]) for c in agg.carry])
    kept.sort(key=lambda e: e.row[col], reverse=larger)
    return [{c: e.row.get(c) for c in (col, *agg.carry)} for e in kept]


def most_frequent(agg: Aggregate, vals: list) -> list[dict]:
    """The values fewer than n distinct values beat by their number of rows, most rows first,
    equal counts by value."""
    count = {v: vals.count(v) for v in vals}
    kept = [v for v in count if sum(c > count[v] for c in count.values()) < agg.n]
    kept.sort()
    kept.sort(key=lambda v: count[v], reverse=True)
    return [{agg.column: v, "count": count[v]} for v in kept]


def evict(evictor: str | None, elements: list[Element]) -> tuple[list[Element], list[Element]]:
    """(kept, evicted) per Flink's evictors, elements in arrival order."""
    if evictor is None or not elements:
        return list(elements), []
    name, args = _call(evictor)
    if name == "count":
        n = int(args[0])
        return (elements[-n:], elements[:-n]) if len(elements) > n else (list(elements), [])
    if name == "time":
        d = parse_duration(args[0])
        newest = max(e.t for e in elements)
        keep = [e.t > newest - d for e in elements]
    elif name == "delta":
        threshold, col = float(args[0]), args[1]
        last = elements[-1].row.get(col)
        keep = [not (e.row.get(col) is not None and last is not None and abs(e.row[col] - last) >= threshold)
                for e in elements]
    else:
        raise ValueError(f"bad evictor {evictor!r}")
    return ([e for e, k in zip(elements, keep) if k], [e for e, k in zip(elements, keep) if not k])


# ----------------------------------------------------------------------------------------------
# Per-window state
# ----------------------------------------------------------------------------------------------

@dataclass
class WindowState:
    start: int
    end: int
    trigger: dict
    elements: list[Element] = field(default_factory=list)   # everything since creation
    unfired: list[Element] = field(default_factory=list)    # since the last firing
    hold: list[int] = field(default_factory=list)           # timestamps for earliest / latest
    expired: list[Element] = field(default_factory=list)    # process: the discarded previous pane
    eow_timer: bool = False           # got an element while watermark < end; not yet fired
    non_early_emitted: bool = False   # an ON_TIME or LATE pane was emitted
    next_index: int = 0
    last_pane: dict | None = None     # the last emitted TRIGGER row
    finished: bool = False            # tombstone: the trigger finished


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------

class ReferenceStream:
    """Same constructor keywords and methods as spark_windowing.testing.TestStream."""

    def __init__(self, *, window: str, aggregate: str = "", trigger: str = "Default()",
                 accumulation_mode: str = "discarding", allowed_lateness: str = "0 seconds",
                 timestamp_combiner: str = "end_of_window", key_columns=None,
                 timestamp_column: str = "ts", timestamp_unit: str = "ms",
                 fire_only_updated_panes: bool = False, process=None, evictor: str | None = None) -> None:
        self._kwargs = dict(window=window, aggregate=aggregate, trigger=trigger, process=process, evictor=evictor,
                            accumulation_mode=accumulation_mode, allowed_lateness=allowed_lateness,
                            timestamp_combiner=timestamp_combiner, key_columns=key_columns,
                            timestamp_column=timestamp_column, timestamp_unit=timestamp_unit,
                            fire_only_updated_panes=fire_only_updated_panes)
        self.window = parse_window(window)
        self.trigger = parse_trigger(trigger)
        self.process = process
        self.evictor = evictor
        self.aggregates = [] if process is not None else parse_aggregates(aggregate)
        assert accumulation_mode in ("discarding", "accumulating", "accumulating_and_retracting")
        self.mode = accumulation_mode
        self.lateness = parse_duration(allowed_lateness)
        assert self.lateness >= 0
        assert timestamp_combiner in ("end_of_window", "earliest", "latest")
        self.combiner = timestamp_combiner
        if key_columns is None:
            self.key_columns: list[str] = []
        elif isinstance(key_columns, str):
            self.key_columns = [k.strip() for k in key_columns.split(",")]
        else:
            self.key_columns = list(key_columns)
        self.ts_col = timestamp_column
        self.unit = UNIT_US[timestamp_unit]
        self.only_updated = fire_only_updated_panes

        self.wm: int | None = None
        self.wm_infinite = False
        self.pt = 0
        self.prev_wm: int | None = None     # at the end of the previous step (one-shot timers)
        self.prev_pt = 0
        self.seq = 0                  # next batch_seq
        self.arrivals = 0             # next Element.seq
        self.windows: dict[tuple, dict[tuple[int, int], WindowState]] = {}
        self.panes: list[dict] = []
        self.late: list[dict] = []

    # --- public API ----------------------------------------------------------------------------

    def add_elements(self, rows: list[dict], *, watermark: int | None = None,
                     processing_time: int | None = None) -> None:
        """One bundle; ``watermark`` / ``processing_time`` (absolute, in the unit) move the clocks
        in the same step, as one Spark micro-batch does."""
        if watermark is not None:
            wm = watermark * self.unit
            if self.wm is not None and wm < self.wm:
                raise ValueError(f"watermark cannot go back from {self.wm} to {wm}")
            self.wm = wm
        if processing_time is not None:
            self.pt = max(self.pt, processing_time * self.unit)
        self._step(list(rows))

    def advance_watermark_to(self, t: int) -> None:
        wm = t * self.unit
        if self.wm_infinite or (self.wm is not None and wm < self.wm):
            raise ValueError(f"watermark cannot go back from {self.wm} to {wm}")
        self.wm = wm
        self._step([])

    def advance_watermark_to_infinity(self) -> None:
        self.wm, self.wm_infinite = WATERMARK_INFINITY, True
        self._step([])

    def advance_processing_time(self, d: int) -> None:
        if d < 0:
            raise ValueError("processing time cannot go back")
        self.pt += d * self.unit
        self._step([])

    def take_panes(self) -> list[dict]:
        out, self.panes = self.panes, []
        return out

    def take_late(self) -> list[dict]:
        out, self.late = self.late, []
        return out

    def snapshot(self) -> bytes:
        state = {k: v for k, v in self.__dict__.items() if k not in ("panes", "late")}
        return pickle.dumps((self._fingerprint(self._kwargs), state))

    @classmethod
    def restore(cls, blob: bytes, **kwargs) -> ReferenceStream:
        fingerprint, state = pickle.loads(blob)
        if fingerprint != cls._fingerprint(kwargs):
            raise ValueError("snapshot was taken under another spec")
        obj = cls(**kwargs)
        obj.__dict__.update(copy.deepcopy(state))
        return obj

    @staticmethod
    def _fingerprint(kwargs: dict) -> str:
        return hashlib.sha256(repr(sorted(kwargs.items())).encode()).hexdigest()

    # --- one step ------------------------------------------------------------------------------

    def _step(self, rows: list[dict]) -> None:
        touched: list[tuple[tuple, WindowState]] = []
        if isinstance(self.window, Session):
            self._add_session_elements(rows, touched)
        else:
            self._add_fixed_elements(rows, touched)
        self._fire(touched)
        self._expire()
        self.prev_wm, self.prev_pt = self.wm, self.pt
        self.seq += 1

    def _add_fixed_elements(self, rows, touched) -> None:
        for row in rows:
            parsed = self._parse_row(row)
            if parsed is None:
                continue
            key, el = parsed
            for start, end in self.window.assign(el.t):
                if self._too_late(end):
                    self._drop(row, "too_late", start, end)
                    continue
                ws = self.windows.setdefault(key, {}).get((start, end))
                if ws is None:
                    ws = WindowState(start, end, self.trigger.new_state())
                    self.windows[key][(start, end)] = ws
                if ws.finished:
                    self._drop(row, "closed", start, end)
                    continue
                self._add_to_window(ws, el)
                touched.append((key, ws))

    def _add_session_elements(self, rows, touched) -> None:
        protos: dict[tuple, list[tuple[int, int, Element]]] = {}
        for row in rows:
            parsed = self._parse_row(row)
            if parsed is None:
                continue
            key, el = parsed
            gap = self.window.gap
            if gap is None:
                raw = row.get(self.window.gap_column)
                if raw is None or raw <= 0:
                    self._drop(row, "malformed", None, None)
                    continue
                gap = raw * self.unit
            start, end = el.t, el.t + gap
            if self._too_late(end):
                self._drop(row, "too_late", start, end)
                continue
            protos.setdefault(key, []).append((start, end, el))
        for key, new in protos.items():
            self._merge_sessions(key, new, touched)

    def _merge_sessions(self, key, new, touched) -> None:
        """Merge this step's proto-windows of one key with its existing windows."""
        existing = self.windows.setdefault(key, {})
        items = [(ws.start, ws.end, "old", ws) for ws in existing.values()]
        items += [(s, e, "new", el) for s, e, el in new]
        items.sort(key=lambda it: (it[0], it[1]))
        groups: list[list] = []
        group_end = None
        for it in items:
            if groups and it[0] <= group_end:          # overlap or touch
                groups[-1].append(it)
                group_end = max(group_end, it[1])
            else:
                groups.append([it])
                group_end = it[1]
        for group in groups:
            olds = [it[3] for it in group if it[2] == "old"]
            news = sorted((it for it in group if it[2] == "new"), key=lambda it: it[3].seq)
            if not news:
                continue
            if any(ws.finished for ws in olds):
                # Beam: a window merged with a finished one is finished; the closed window grows
                # to cover the group (open windows in it are absorbed, their contents dropped)
                for s, e, _, el in news:
                    self._drop(el.row, "closed", s, e)
                start, end = min(it[0] for it in group), max(it[1] for it in group)
                if (start, end) != (olds[0].start, olds[0].end) or len(olds) > 1:
                    self._closed_window(key, olds, start, end)
                continue
            start, end = min(it[0] for it in group), max(it[1] for it in group)
            if len(olds) == 1 and (olds[0].start, olds[0].end) == (start, end):
                target = olds[0]
            else:
                target = self._merged_window(key, olds, start, end)
            for _, _, _, el in news:
                self._add_to_window(target, el)
            touched.append((key, target))

    def _closed_window(self, key, olds: list[WindowState], start: int, end: int) -> None:
        """A finished window [start, end) replacing `olds` (retracting the last panes of the open
        ones when retracting; a finished window's final pane stands)."""
        existing = self.windows[key]
        for ws in olds:
            del existing[(ws.start, ws.end)]
            if self.mode == "accumulating_and_retracting" and ws.last_pane is not None and not ws.finished:
                self.panes.append(self._retraction(ws.last_pane))
        existing[(start, end)] = WindowState(start, end, self.trigger.new_state(), finished=True)

    def _merged_window(self, key, olds: list[WindowState], start: int, end: int) -> WindowState:
        """A new window replacing `olds` (retracting their last panes when retracting)."""
        existing = self.windows[key]
        for ws in olds:
            del existing[(ws.start, ws.end)]
            if self.mode == "accumulating_and_retracting" and ws.last_pane is not None:
                self.panes.append(self._retraction(ws.last_pane))
        merged = WindowState(
            start, end,
            self.trigger.merge([ws.trigger for ws in olds]) if olds else self.trigger.new_state(),
            elements=sorted((e for ws in olds for e in ws.elements), key=lambda e: e.seq),
            unfired=sorted((e for ws in olds for e in ws.unfired), key=lambda e: e.seq),
            expired=sorted((e for ws in olds for e in ws.expired), key=lambda e: e.seq),
            hold=[t for ws in olds for t in ws.hold],
            eow_timer=any(ws.eow_timer for ws in olds))
        existing[(start, end)] = merged
        return merged

    # --- elements ------------------------------------------------------------------------------

    def _parse_row(self, row: dict):
        """(key, Element), or None after reporting a malformed row."""
        t = row.get(self.ts_col)
        key = tuple(row.get(k) for k in self.key_columns)
        if t is None or any(k is None for k in key):
            self._drop(row, "malformed", None, None)
            return None
        el = Element(self.arrivals, t * self.unit, row)
        self.arrivals += 1
        return key, el

    def _too_late(self, end: int) -> bool:
        return self.wm_infinite or (self.wm is not None and end + self.lateness <= self.wm)

    def _add_to_window(self, ws: WindowState, el: Element) -> None:
        ws.elements.append(el)
        ws.unfired.append(el)
        if self.wm is None or self.wm < ws.end:
            ws.eow_timer = True
        if self.wm is None or el.t >= self.wm:
            ws.hold.append(el.t)
        self.trigger.on_element(ws.trigger, el.t, self._ctx(ws))

    def _ctx(self, ws: WindowState) -> Ctx:
        return Ctx(self.wm, self.pt, ws.end, self.seq, self.prev_wm, self.prev_pt)

    # --- firing --------------------------------------------------------------------------------

    def _fire(self, touched) -> None:
        candidates: list[tuple[tuple, WindowState]] = []
        seen = set()
        for key, ws in touched:
            if id(ws) not in seen:
                seen.add(id(ws))
                candidates.append((key, ws))
        for key in sorted(self.windows, key=repr):
            for _, ws in sorted(self.windows[key].items()):
                if id(ws) in seen or ws.finished:
                    continue
                if self._eow_due(ws) or self.trigger.timer_due(ws.trigger, self._ctx(ws)):
                    seen.add(id(ws))
                    candidates.append((key, ws))
        for key, ws in candidates:
            if self.windows.get(key, {}).get((ws.start, ws.end)) is ws and not ws.finished:
                self._evaluate(key, ws)

    def _eow_due(self, ws: WindowState) -> bool:
        return ws.eow_timer and self.wm is not None and self.wm >= ws.end

    def _evaluate(self, key, ws: WindowState) -> None:
        ctx = self._ctx(ws)
        on_time_timer = self._eow_due(ws)
        if on_time_timer:
            ws.eow_timer = False
        if not self.trigger.should_fire(ws.trigger, ctx):
            return
        finished = self.trigger.on_fire(ws.trigger, ctx)

        if self.wm is None or self.wm < ws.end:
            timing = "EARLY"
        elif on_time_timer and not ws.non_early_emitted:
            timing = "ON_TIME"
        else:
            timing = "LATE"
        contents = ws.unfired if self.mode == "discarding" else ws.elements
        if self.process is not None:
            values = self._process(ws, contents)
        else:
            values = {a.name: evaluate(a, contents) for a in self.aggregates}
        timestamp = self._pane_timestamp(ws)
        expires = self.wm_infinite or (self.wm is not None and self.wm >= ws.end + self.lateness)

        skip = (self.only_updated and ws.last_pane is not None
                and all(ws.last_pane[n] == v for n, v in values.items()))
        if not skip:
            if self.mode == "accumulating_and_retracting" and ws.last_pane is not None:
                self.panes.append(self._retraction(ws.last_pane))
            pane = {**dict(zip(self.key_columns, key)),
                    "window_start": ws.start // self.unit, "window_end": ws.end // self.unit,
                    **values,
                    "kind": "TRIGGER", "pane_timing": timing, "pane_index": ws.next_index,
                    "is_final": finished or expires, "pane_timestamp": timestamp // self.unit,
                    **self._step_fields()}
            self.panes.append(pane)
            ws.last_pane = pane
            ws.next_index += 1
            if timing != "EARLY":
                ws.non_early_emitted = True

        ws.unfired = []
        if not (timing == "EARLY" and self.trigger.has_watermark()):
            ws.hold = []
        if finished:
            ws.finished = True
            ws.elements, ws.unfired, ws.hold, ws.expired = [], [], [], []

    def _process(self, ws: WindowState, contents: list[Element]) -> dict:
        kept, evicted = evict(self.evictor, contents)
        unfired = {e.seq for e in ws.unfired}
        new = [e for e in kept if e.seq in unfired]
        values = self.process([e.row for e in kept], [e.row for e in new], [e.row for e in evicted],
                              [e.row for e in ws.expired])
        if self.mode == "discarding":
            ws.expired = kept
        else:
            ws.elements, ws.expired = kept, []
        return values

    def _pane_timestamp(self, ws: WindowState) -> int:
        if self.combiner == "earliest" and ws.hold:
            return min(ws.hold)
        if self.combiner == "latest" and ws.hold:
            return max(ws.hold)
        return ws.end - 1

    def _retraction(self, last: dict) -> dict:
        return {**last, "kind": "RETRACTION", **self._step_fields()}

    def _step_fields(self) -> dict:
        return {"watermark": None if self.wm is None else self.wm // self.unit,
                "batch_time": self.pt // self.unit, "batch_seq": self.seq}

    def _drop(self, row: dict, reason: str, start: int | None, end: int | None) -> None:
        self.late.append({**row, "reason": reason,
                          "window_start": None if start is None else start // self.unit,
                          "window_end": None if end is None else end // self.unit,
                          **self._step_fields()})

    # --- expiry --------------------------------------------------------------------------------

    def _expire(self) -> None:
        for key in list(self.windows):
            wins = self.windows[key]
            for bounds in [b for b, ws in wins.items() if self._too_late(ws.end)]:
                del wins[bounds]
            if not wins:
                del self.windows[key]
