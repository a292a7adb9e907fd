"""The triggers over sub-triggers: ``Repeatedly``, ``AfterWatermark(early, late)``, ``AfterAny``,
``OrFinally``, ``AfterAll`` and ``AfterEach`` (``triggers.tree`` has the rules)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from spark_windowing.triggers.tree import NONE, Column, Trigger


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
        return c.zeros()

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

