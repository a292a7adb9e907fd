"""The leaf triggers: ``Default``, ``Never``, ``AfterCount``, ``AfterProcessingTime`` and Flink's
``ContinuousEventTime`` / ``ContinuousProcessingTime`` (``triggers.tree`` has the rules)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spark_windowing.errors import OptionError
from spark_windowing.triggers.tree import NONE, TRIGGER_FORMS, Column, Ctx, Trigger


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


