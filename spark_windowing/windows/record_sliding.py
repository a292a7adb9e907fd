"""``record_sliding(size)``: Kafka Streams' sliding windows (KIP-450) with
``suppress(untilWindowCloses)``, buffered per key; ``spark_windowing.windows.mixed`` states the rules."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import factorize
from spark_windowing._time import MAX_TIME, MIN_TIME
from spark_windowing.windows.buffered import Evaluation, Late, MixedLogic, StepView, ranks
from spark_windowing.windows.kinds import RecordSliding


class RecordSlidingLogic(MixedLogic):
    """``record_sliding(size)``, Kafka Streams' KIP-450 sliding windows: see the module docstring.

    Per buffered element also: the watermark at its arrival (``arr_wm``; a window takes the
    elements that arrived while it was open) and whether a fired window held it (``in_pane``)."""

    window: RecordSliding

    def __init__(self, window: RecordSliding, lateness: int) -> None:
        super().__init__(window)
        self.lateness = int(lateness)
        self.grain = 1                 # the timestamps' grain in µs (1000 for ms epochs)
        self.done_wm = MIN_TIME        # watermark of the last evaluation
        self.arr_wm = np.empty(0, dtype=np.int64)
        self.in_pane = np.empty(0, dtype=bool)

    # A window [s, s + size] (inclusive) closes once watermark >= s + size + 1 µs + lateness.
    def _close(self, end: np.ndarray) -> np.ndarray:
        return end + 1 + self.lateness

    def late(self, view: StepView, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # every window holding ts ends at or before ts + size: too late once that one is closed
        w = self.window
        return self._close(ts + w.size) <= view.wm, ts - w.size, ts

    def add(self, view: StepView, events: pa.Table, key_table: pa.Table, ts: np.ndarray) -> Late | None:
        self.grain = view.grain
        n0 = len(self.ts)
        late = super().add(view, events, key_table, ts)
        self.arr_wm[n0:] = view.wm
        return late

    def _values(self, view: StepView, events: pa.Table) -> pa.Table:
        return events  # whole rows: an element no window took goes to the late output as it came

    def _appended(self, m: int) -> None:
        self.arr_wm = np.concatenate([self.arr_wm, np.full(m, self.done_wm, dtype=np.int64)])
        self.in_pane = np.concatenate([self.in_pane, np.zeros(m, dtype=bool)])

    def _kept(self, keep: np.ndarray) -> None:
        self.arr_wm, self.in_pane = self.arr_wm[keep], self.in_pane[keep]

    def _candidates(self, kid_o: np.ndarray, ts_o: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(key id, start) of every window the (key, time)-sorted elements bring, deduplicated:
        per distinct time t, ``[t − size, t]`` and ``[t + g, t + g + size]`` (possibly empty)."""
        head = np.ones(len(ts_o), dtype=bool)
        head[1:] = (kid_o[1:] != kid_o[:-1]) | (ts_o[1:] != ts_o[:-1])
        uk, ut = kid_o[head], ts_o[head]
        ck = np.concatenate([uk, uk])
        cs = np.concatenate([ut - self.window.size, ut + self.grain])
        o = np.lexsort((ck, cs))
        ck, cs = ck[o], cs[o]
        first = np.ones(len(cs), dtype=bool)
        first[1:] = (ck[1:] != ck[:-1]) | (cs[1:] != cs[:-1])  # left(t') == right(t) when t' = t + g + size
        return ck[first], cs[first]

    def _spans(self, kid_o, ts_o, ck, cs) -> tuple[np.ndarray, np.ndarray]:
        """Sorted positions [lo, hi) of each window's elements (ts in [start, start + size])."""
        (r_ts, r_s, r_e), span = ranks(ts_o, cs, cs + self.window.size)
        comp = kid_o * span + r_ts
        return (np.searchsorted(comp, ck * span + r_s, side="left"),
                np.searchsorted(comp, ck * span + r_e, side="right"))

    def evaluate(self, view: StepView) -> Evaluation:
        w, wm, prev, out = self.window, view.wm, self.done_wm, Evaluation()
        if wm <= prev:
            return out
        self.done_wm = wm
        if len(self.ts) == 0:
            return out
        assert self.keys is not None and self.values is not None
        # Windows closing now (prev < close <= wm) hold the elements that came before this step:
        # this step's elements arrived under watermark wm, when those windows were already closed.
        old = np.flatnonzero(self.arr_wm <= prev)
        if len(old):
            kid = factorize([self.keys.take(pa.array(old))])[0]
            o = np.lexsort((self.arr[old], self.ts[old], kid))
            order, kid_o = old[o], kid[o]
            ts_o = self.ts[order]
            ck, cs = self._candidates(kid_o, ts_o)
            close = self._close(cs + w.size)
            due = (close > prev) & (close <= wm)
            ck, cs = ck[due], cs[due]
            lo, hi = self._spans(kid_o, ts_o, ck, cs)
            full = hi > lo
            ck, cs, lo, hi = ck[full], cs[full], lo[full], hi[full]
            if len(cs):
                out.closed += self._close_windows(view, order[lo], cs, lo, hi, order, we=cs + w.size + 1)
                cover = np.bincount(lo, minlength=len(order) + 1) - np.bincount(hi, minlength=len(order) + 1)
                self.in_pane[order[np.cumsum(cover)[:-1] > 0]] = True
        # no window still to close can hold these: those no window took go to the late output
        gone = self._close(self.ts + w.size)
        lost = (gone > prev) & (gone <= wm) & ~self.in_pane
        if lost.any():
            sel = np.flatnonzero(lost)
            out.late.append(Late(self.values.take(pa.array(sel)), self.ts[sel] - w.size, self.ts[sel]))
        # an element is kept while the window starting just after it may still close
        self._keep(self._close(self.ts + self.grain + w.size) > wm)
        return out

    def next_timer(self) -> int:
        """The earliest watermark at which a window closes or an element is given up."""
        if len(self.ts) == 0:
            return MAX_TIME
        w = self.window
        kid = factorize([self.keys])[0] if self.keys is not None else np.zeros(0, dtype=np.int64)
        order = np.lexsort((self.ts, kid))
        kid_o, ts_o = kid[order], self.ts[order]
        # [t + g, t + g + size] holds an element iff the key's next later element is in it
        (r_ts,), span = ranks(ts_o)
        comp = kid_o * span + r_ts
        nxt = np.searchsorted(comp, comp, side="right")
        has_next = nxt < len(ts_o)
        nxt_c = np.minimum(nxt, len(ts_o) - 1)
        right = has_next & (kid_o[nxt_c] == kid_o) & (ts_o[nxt_c] <= ts_o + self.grain + w.size)
        times = np.concatenate([self._close(ts_o), self._close(ts_o[right] + self.grain + w.size),
                                self._close(self.ts[~self.in_pane] + w.size)])
        times = times[times > self.done_wm]
        return int(times.min()) if len(times) else MAX_TIME

    def _extra_state(self):
        return {"grain": self.grain, "done_wm": self.done_wm, "arr_wm": self.arr_wm, "in_pane": self.in_pane}

    def _restore_extra(self, doc):
        self.grain, self.done_wm = int(doc["grain"]), int(doc["done_wm"])
        self.arr_wm, self.in_pane = doc["arr_wm"], doc["in_pane"]
