"""The trigger tree's common parts: ``Trigger`` (the hooks every node has), ``Ctx`` (what the
hooks see of the window table and the micro-batch) and ``Column`` (a node's state column).

The trigger algebra (Beam vocabulary, plus Flink's continuous triggers), evaluated vectorized.

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
the epoch) and never finish. The leaves are in ``triggers.leaves``, the nodes with sub-triggers in
``triggers.composites``, the parser of the ``trigger`` option in ``triggers.grammar``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spark_windowing._time import MAX_TIME

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

