"""The trigger algebra (Beam vocabulary, plus Flink's continuous triggers), evaluated vectorized.

Triggers are immutable values that keep no state themselves (Beam's design); a trigger's state
lives in row-aligned NumPy columns of the operator's window table, namespaced by the node's path
in the trigger tree, so nested triggers never collide. Every hook works on a boolean mask over all
live (key, window) rows at once — one NumPy operation per trigger node per micro-batch, not a
Python call per window.

Rules follow Apache Beam's Python trigger driver (``apache_beam/transforms/trigger.py``):
``AfterWatermark(early, late)`` wraps ``early``/``late`` in ``Repeatedly``; ``AfterCount(n)``
counts elements since its last reset; ``AfterProcessingTime(d)`` fires ``d`` after the first
element of the pane; ``Repeatedly`` resets a finished sub-trigger; ``AfterAny`` / ``AfterAll`` fire
when any / all sub-triggers would; ``AfterEach`` runs sub-triggers in sequence; ``OrFinally(T, U)``
is ``AfterAny(T, U)``; ``Default()`` fires whenever the watermark is past the window end.
Flink's ``ContinuousEventTime(d)`` / ``ContinuousProcessingTime(d)`` fire every ``d`` (aligned to
the epoch) and never finish.

>>> parse_trigger("AfterWatermark(early=AfterCount(2), late=AfterProcessingTime(1 minute))").spec()
'AfterWatermark(early=AfterCount(2), late=AfterProcessingTime(60000000us))'

(Long module: the whole algebra — fifteen small trigger classes with the same hooks — and its
parser; each class is short.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from spark_windowing._parse import Call, parse_call
from spark_windowing._time import MAX_TIME, parse_duration
from spark_windowing.errors import OptionError

TRIGGER_FORMS = ("Default(), Never(), AfterWatermark([early=<T>][, late=<T>]), AfterCount(<n>=1,2,...), "
                 "AfterProcessingTime(<duration>), Repeatedly(<T>), AfterAny(<T>, ...), AfterAll(<T>, ...), "
                 "AfterEach(<T>, ...), OrFinally(<T>, <until T>), ContinuousEventTime(<duration>), "
                 "ContinuousProcessingTime(<duration>)")
NONE = MAX_TIME  # "no timer" in timer columns


class Ctx:
    """What trigger hooks see: the window table's columns and this micro-batch's times.

    * ``cols``: row-aligned state columns (trigger columns are named ``t<path>:<name>``).
    * ``end``: window end per row; ``wm``: input watermark; ``proc``: processing time.
    * ``n_new`` / ``min_ts_new``: elements added to each row in this batch, and their min timestamp.
    * ``passed``: which rows are past their window's end — the watermark reached it (``end <=
      wm``, the default) or, for count windows, the window holds its last element.

    The end-of-window timer is row-level (set by any element arriving before the window end,
    whatever part of the trigger is active), so it is not part of this context.
    """

    def __init__(self, cols: dict[str, np.ndarray], end: np.ndarray, wm: int, proc: int,
                 n_new: np.ndarray, min_ts_new: np.ndarray, passed: np.ndarray | None = None) -> None:
        self.cols, self.end, self.wm, self.proc = cols, end, wm, proc
        self.n_new, self.min_ts_new = n_new, min_ts_new
        self.passed = end <= wm if passed is None else passed

    def zeros(self) -> np.ndarray:
        return np.zeros(len(self.end), dtype=bool)

    def col(self, path: str, name: str) -> np.ndarray:
        return self.cols[f"t{path}:{name}"]


@dataclass(frozen=True)
class Column:
    """A trigger state column: its dtype, initial value and how merging windows combine it."""

    name: str
    dtype: type
    default: object
    combine: str  # "sum" | "any" | "max" | "min"


class Trigger:
    """Base class. Subclasses are frozen dataclasses; ``path`` names the node in the tree."""

    def children(self) -> tuple[tuple[str, "Trigger"], ...]:
        return ()

    def own_columns(self) -> tuple[Column, ...]:
        return ()

    def columns(self, path: str = "") -> list[tuple[str, Column]]:
        out = [(f"t{path}:{c.name}", c) for c in self.own_columns()]
        for sub, child in self.children():
            out.extend(child.columns(f"{path}.{sub}"))
        return out

    # --- hooks (masks are over all rows) -------------------------------------------------------
    def on_element(self, c: Ctx, path: str, m: np.ndarray) -> None:
        for sub, child in self.children():
            child.on_element(c, f"{path}.{sub}", m)

    def should_fire(self, c: Ctx, path: str) -> np.ndarray:
        raise NotImplementedError

    def on_fire(self, c: Ctx, path: str, m: np.ndarray) -> np.ndarray:
        """Update state of the rows in ``m`` that fire; return which rows' trigger finished."""
        raise NotImplementedError

    def reset(self, c: Ctx, path: str, m: np.ndarray) -> None:
        for col in self.own_columns():
            c.col(path, col.name)[m] = col.default
        for sub, child in self.children():
            child.reset(c, f"{path}.{sub}", m)

    def timers(self, c: Ctx, path: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(event-time timers, processing-time timers) columns; ``NONE`` where unset."""
        ev: list[np.ndarray] = []
        pt: list[np.ndarray] = []
        for sub, child in self.children():
            e, p = child.timers(c, f"{path}.{sub}")
            ev += e
            pt += p
        return ev, pt

    # --- static properties -------------------------------------------------------------------
    def has_ontime_pane(self) -> bool:
        return any(child.has_ontime_pane() for _, child in self.children())

    def spec(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.spec()


def _zeros(c: Ctx) -> np.ndarray:
    return c.zeros()


@dataclass(frozen=True)
class Default(Trigger):
    """Beam's default: an ON_TIME pane when the watermark passes the window end, then a LATE pane
    for every later batch that brings elements within allowed lateness. Never finishes. (A count
    window's end is its last element: one ON_TIME pane when it is complete.)"""

    def should_fire(self, c, path):
        return c.passed.copy()

    def on_fire(self, c, path, m):
        return _zeros(c)

    def has_ontime_pane(self):
        return True

    def spec(self):
        return "Default()"


@dataclass(frozen=True)
class Never(Trigger):
    """Never fires (windows expire silently). Use with an explicit flush elsewhere."""

    def should_fire(self, c, path):
        return _zeros(c)

    def on_fire(self, c, path, m):
        return _zeros(c)

    def spec(self):
        return "Never()"


@dataclass(frozen=True)
class AfterCount(Trigger):
    """Fires once at least ``count`` elements arrived since the last reset; then finishes."""

    count: int

    def __post_init__(self):
        if not isinstance(self.count, int) or self.count < 1:
            raise OptionError("trigger", self.spec(), TRIGGER_FORMS, why="AfterCount needs an integer >= 1")

    def own_columns(self):
        return (Column("count", np.int64, 0, "sum"),)

    def on_element(self, c, path, m):
        col = c.col(path, "count")
        col[m] += c.n_new[m]

    def should_fire(self, c, path):
        return c.col(path, "count") >= self.count

    def on_fire(self, c, path, m):
        return m.copy()

    def spec(self):
        return f"AfterCount({self.count})"


@dataclass(frozen=True)
class AfterProcessingTime(Trigger):
    """Fires ``delay`` (processing time) after the first element since the last reset; finishes."""

    delay: int

    def own_columns(self):
        return (Column("deadline", np.int64, NONE, "min"),)

    def on_element(self, c, path, m):
        col = c.col(path, "deadline")
        col[m & (col == NONE)] = c.proc + self.delay

    def should_fire(self, c, path):
        d = c.col(path, "deadline")
        return (d != NONE) & (d <= c.proc)

    def on_fire(self, c, path, m):
        return m.copy()

    def timers(self, c, path):
        return [], [c.col(path, "deadline")]

    def spec(self):
        return f"AfterProcessingTime({self.delay}us)"


@dataclass(frozen=True)
class ContinuousEventTime(Trigger):
    """Flink's ContinuousEventTimeTrigger: fires at marks ``m`` — the first the next multiple of
    ``interval`` after the window's first element, each next one ``m + interval`` — and when the
    watermark passes the window end; never finishes.

    * A mark fires once the watermark guarantees every element stamped ``<= m`` arrived: in our
      convention (nothing more with a timestamp ``< W``) when ``W > m``, not at ``W == m``.
    * Marks are capped at the window's max timestamp (``end - 1``), as Flink registers
      ``min(m + interval, window.maxTimestamp())``: the capped mark coincides with the end of the
      window, so nothing repeats during allowed lateness (late elements still fire, as in Flink).
    * Merging windows keep the smallest mark (Flink's merging state): a session's capped mark
      fires the merged session once the watermark passes it.
    * A watermark jump past several marks fires once (one firing per window and batch); the next
      mark is the first of ``m + k * interval`` not yet passed, capped.
    * No first mark is set for a window whose end the watermark has passed (Flink fires at once).
    """

    interval: int

    def own_columns(self):
        return (Column("next", np.int64, NONE, "min"),)

    def on_element(self, c, path, m):
        col = c.col(path, "next")
        first = m & (col == NONE) & (c.wm < c.end)
        col[first] = np.minimum(c.min_ts_new[first] // self.interval * self.interval + self.interval,
                                c.end[first] - 1)

    def _passed(self, c, path):
        nxt = c.col(path, "next")
        return (nxt != NONE) & (nxt < c.wm)

    def should_fire(self, c, path):
        return self._passed(c, path) | c.passed

    def on_fire(self, c, path, m):
        col = c.col(path, "next")
        up = m & self._passed(c, path)
        steps = (c.wm - col[up] + self.interval - 1) // self.interval
        col[up] = np.minimum(col[up] + steps * self.interval, c.end[up] - 1)
        return _zeros(c)

    def timers(self, c, path):
        # fires at the first watermark past the mark; a mark capped at the end is the end-of-window
        # timer (row-level), spent once the watermark passes the end
        nxt = c.col(path, "next")
        return [np.where((nxt != NONE) & (nxt < c.end - 1), nxt + 1, NONE)], []

    def spec(self):
        return f"ContinuousEventTime({self.interval}us)"


@dataclass(frozen=True)
class ContinuousProcessingTime(Trigger):
    """Flink's ContinuousProcessingTimeTrigger: fires every ``interval`` of processing time
    (aligned to the epoch) once the window has an element; never finishes."""

    interval: int

    def own_columns(self):
        return (Column("next", np.int64, NONE, "min"),)

    def on_element(self, c, path, m):
        col = c.col(path, "next")
        col[m & (col == NONE)] = c.proc // self.interval * self.interval + self.interval

    def should_fire(self, c, path):
        nxt = c.col(path, "next")
        return (nxt != NONE) & (nxt <= c.proc)

    def on_fire(self, c, path, m):
        col = c.col(path, "next")
        col[m & (col != NONE) & (col <= c.proc)] = c.proc // self.interval * self.interval + self.interval
        return _zeros(c)

    def timers(self, c, path):
        return [], [c.col(path, "next")]

    def spec(self):
        return f"ContinuousProcessingTime({self.interval}us)"


@dataclass(frozen=True)
class Repeatedly(Trigger):
    """Fires whenever ``underlying`` fires, resetting it when it finishes; never finishes."""

    underlying: Trigger

    def children(self):
        return (("r", self.underlying),)

    def should_fire(self, c, path):
        return self.underlying.should_fire(c, path + ".r")

    def on_fire(self, c, path, m):
        fin = self.underlying.on_fire(c, path + ".r", m)
        self.underlying.reset(c, path + ".r", m & fin)
        return _zeros(c)

    def spec(self):
        return f"Repeatedly({self.underlying.spec()})"


@dataclass(frozen=True)
class AfterWatermark(Trigger):
    """Fires when the watermark passes the window end (ON_TIME); ``early`` fires before that and
    ``late`` after it, both repeatedly. Without ``late`` it finishes at the ON_TIME pane."""

    early: Trigger | None = None
    late: Trigger | None = None

    def children(self):
        out = []
        if self.early is not None:
            out.append(("e", Repeatedly(self.early)))
        if self.late is not None:
            out.append(("l", Repeatedly(self.late)))
        return tuple(out)

    def own_columns(self):
        return (Column("late", np.bool_, False, "any"),) if self.late is not None else ()

    def _is_late(self, c, path):
        return c.col(path, "late") if self.late is not None else c.zeros()

    def on_element(self, c, path, m):
        is_late = self._is_late(c, path)
        m_early = m & ~is_late
        if self.early is not None:
            Repeatedly(self.early).on_element(c, path + ".e", m_early)
        if self.late is not None:
            Repeatedly(self.late).on_element(c, path + ".l", m & is_late)

    def should_fire(self, c, path):
        is_late = self._is_late(c, path)
        passed = c.passed
        out = ~is_late & passed
        if self.early is not None:
            out |= ~is_late & ~passed & Repeatedly(self.early).should_fire(c, path + ".e")
        if self.late is not None:
            out |= is_late & Repeatedly(self.late).should_fire(c, path + ".l")
        return out

    def on_fire(self, c, path, m):
        is_late = self._is_late(c, path)
        passed = c.passed
        fin = c.zeros()
        if self.late is not None:
            Repeatedly(self.late).on_fire(c, path + ".l", m & is_late)
        on_time = m & ~is_late & passed
        if self.late is not None:
            c.col(path, "late")[on_time] = True
        else:
            fin |= on_time
        if self.early is not None:
            Repeatedly(self.early).on_fire(c, path + ".e", m & ~is_late & ~passed)
        return fin

    def timers(self, c, path):
        is_late = self._is_late(c, path)
        ev: list[np.ndarray] = []
        pt: list[np.ndarray] = []
        for sub, child, active in (("e", self.early, ~is_late), ("l", self.late, is_late)):
            if child is not None:
                e, p = Repeatedly(child).timers(c, f"{path}.{sub}")
                ev += [np.where(active, t, NONE) for t in e]
                pt += [np.where(active, t, NONE) for t in p]
        return ev, pt

    def has_ontime_pane(self):
        return True

    def spec(self):
        parts = []
        if self.early is not None:
            parts.append(f"early={self.early.spec()}")
        if self.late is not None:
            parts.append(f"late={self.late.spec()}")
        return f"AfterWatermark({', '.join(parts)})"


@dataclass(frozen=True)
class AfterAny(Trigger):
    """Fires when any sub-trigger would; finishes when a sub-trigger that fired finishes."""

    triggers: tuple[Trigger, ...]

    def children(self):
        return tuple((str(i), t) for i, t in enumerate(self.triggers))

    def should_fire(self, c, path):
        out = c.zeros()
        for sub, t in self.children():
            out |= t.should_fire(c, f"{path}.{sub}")
        return out

    def on_fire(self, c, path, m):
        fin = c.zeros()
        for sub, t in self.children():
            p = f"{path}.{sub}"
            sf = m & t.should_fire(c, p)
            fin |= sf & t.on_fire(c, p, sf)
        return fin

    def spec(self):
        return f"{type(self).__name__}({', '.join(t.spec() for t in self.triggers)})"


@dataclass(frozen=True)
class OrFinally(AfterAny):
    """``OrFinally(body, until)``: fires as ``body`` does; finishes when ``until`` fires."""

    def spec(self):
        return f"OrFinally({self.triggers[0].spec()}, {self.triggers[1].spec()})"


@dataclass(frozen=True)
class AfterAll(Trigger):
    """Fires when all sub-triggers would; finishes when all of them finish."""

    triggers: tuple[Trigger, ...]

    def children(self):
        return tuple((str(i), t) for i, t in enumerate(self.triggers))

    def should_fire(self, c, path):
        out = ~c.zeros()
        for sub, t in self.children():
            out &= t.should_fire(c, f"{path}.{sub}")
        return out

    def on_fire(self, c, path, m):
        fin = m.copy()
        for sub, t in self.children():
            p = f"{path}.{sub}"
            sf = m & t.should_fire(c, p)
            fin &= sf & t.on_fire(c, p, sf)
        return fin

    def spec(self):
        return f"AfterAll({', '.join(t.spec() for t in self.triggers)})"


@dataclass(frozen=True)
class AfterEach(Trigger):
    """Runs sub-triggers one after the other; finishes after the last one finishes."""

    triggers: tuple[Trigger, ...]

    def children(self):
        return tuple((str(i), t) for i, t in enumerate(self.triggers))

    def own_columns(self):
        return (Column("index", np.int64, 0, "max"),)

    def on_element(self, c, path, m):
        idx = c.col(path, "index")
        for i, (sub, t) in enumerate(self.children()):
            t.on_element(c, f"{path}.{sub}", m & (idx == i))

    def should_fire(self, c, path):
        idx = c.col(path, "index")
        out = c.zeros()
        for i, (sub, t) in enumerate(self.children()):
            out |= (idx == i) & t.should_fire(c, f"{path}.{sub}")
        return out

    def on_fire(self, c, path, m):
        idx = c.col(path, "index")
        selected = [m & (idx == i) for i in range(len(self.triggers))]
        for i, (sub, t) in enumerate(self.children()):
            fin = t.on_fire(c, f"{path}.{sub}", selected[i])
            idx[selected[i] & fin] += 1
        return idx >= len(self.triggers)

    def timers(self, c, path):
        idx = c.col(path, "index")
        ev: list[np.ndarray] = []
        pt: list[np.ndarray] = []
        for i, (sub, t) in enumerate(self.children()):
            e, p = t.timers(c, f"{path}.{sub}")
            ev += [np.where(idx == i, x, NONE) for x in e]
            pt += [np.where(idx == i, x, NONE) for x in p]
        return ev, pt

    def spec(self):
        return f"AfterEach({', '.join(t.spec() for t in self.triggers)})"


# --- parsing -----------------------------------------------------------------------------------

def parse_trigger(text: str) -> Trigger:
    """Parse the ``trigger`` option; raise OptionError naming the value and accepted forms."""
    call = parse_call(text, option="trigger", accepted=TRIGGER_FORMS)
    return _build(call, str(text))


def _fail(text: str, why: str) -> OptionError:
    return OptionError("trigger", text, TRIGGER_FORMS, why=why)


def _sub(arg, text: str) -> Trigger:
    if not isinstance(arg, Call):
        if isinstance(arg, str) and arg.replace("_", "").isalnum() and not arg[0].isdigit():
            return _build(Call(arg), text)
        raise _fail(text, f"expected a trigger, got {arg!r}")
    return _build(arg, text)


def _duration(call: Call, text: str, *, allow_zero: bool) -> int:
    if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], str):
        raise _fail(text, f"{call.name} takes one duration")
    try:
        return parse_duration(call.args[0], option="trigger", allow_zero=allow_zero)
    except OptionError as e:
        raise _fail(text, f"{call.name}: {call.args[0]!r} is not a valid duration ({e.why or 'unknown unit'})") from None


def _build(call: Call, text: str) -> Trigger:
    name = call.name.lower()
    builders: dict[str, Callable[[], Trigger]] = {
        "default": lambda: _noargs(call, text, Default()),
        "never": lambda: _noargs(call, text, Never()),
        "aftercount": lambda: _after_count(call, text),
        "afterprocessingtime": lambda: AfterProcessingTime(_duration(call, text, allow_zero=True)),
        "continuouseventtime": lambda: ContinuousEventTime(_duration(call, text, allow_zero=False)),
        "continuousprocessingtime": lambda: ContinuousProcessingTime(_duration(call, text, allow_zero=False)),
        "repeatedly": lambda: Repeatedly(_one(call, text)),
        "afterany": lambda: AfterAny(_many(call, text, 1)),
        "afterall": lambda: AfterAll(_many(call, text, 1)),
        "aftereach": lambda: AfterEach(_many(call, text, 1)),
        "orfinally": lambda: OrFinally(_many(call, text, 2, 2)),
        "afterwatermark": lambda: _after_watermark(call, text),
    }
    if name not in builders:
        raise _fail(text, f"unknown trigger {call.name!r}")
    return builders[name]()


def _noargs(call: Call, text: str, trigger: Trigger) -> Trigger:
    if call.args or call.kwargs:
        raise _fail(text, f"{call.name}() takes no arguments")
    return trigger


def _after_count(call: Call, text: str) -> Trigger:
    if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], str):
        raise _fail(text, "AfterCount takes one integer")
    try:
        n = int(call.args[0])
    except ValueError:
        raise _fail(text, f"AfterCount: {call.args[0]!r} is not an integer") from None
    if n < 1:
        raise _fail(text, f"AfterCount: count must be >= 1, got {n}")
    return AfterCount(n)


def _one(call: Call, text: str) -> Trigger:
    if len(call.args) != 1 or call.kwargs:
        raise _fail(text, f"{call.name} takes one trigger")
    return _sub(call.args[0], text)


def _many(call: Call, text: str, lo: int, hi: int | None = None) -> tuple[Trigger, ...]:
    if call.kwargs or len(call.args) < lo or (hi is not None and len(call.args) > hi):
        want = f"{lo}" if hi == lo else f"at least {lo}"
        raise _fail(text, f"{call.name} takes {want} trigger(s)")
    return tuple(_sub(a, text) for a in call.args)


def _after_watermark(call: Call, text: str) -> Trigger:
    kw = {k.lower(): v for k, v in call.kwargs}
    unknown = set(kw) - {"early", "late"}
    if call.args or unknown:
        raise _fail(text, "AfterWatermark takes only early=<trigger> and late=<trigger>")
    return AfterWatermark(early=_sub(kw["early"], text) if "early" in kw else None,
                          late=_sub(kw["late"], text) if "late" in kw else None)
