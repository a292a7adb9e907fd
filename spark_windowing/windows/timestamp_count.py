"""Count windows in timestamp order (``count(size[, slide])`` with ``countOrder=timestamp``):
Storm's event-time count windows, buffered per key and driven by the watermark.

The rule. Per key, an element is *counted* once the watermark has passed it (``ts < watermark``),
in timestamp order (ties: arrival order). Window ``j`` (``window_seq``) holds the key's counted
elements number ``max(0, (j+1)·slide − size) … (j+1)·slide − 1`` — Flink's ``countWindow(size,
slide)`` over that order, partial windows at the start included — and fires in the step whose
watermark counts its last element: once, ON_TIME, final. An element behind the watermark on
arrival (``ts < watermark``, the watermark of the step it arrives in) goes to the late output
(``too_late``, ``window_start = window_end`` = its timestamp); one exactly at the watermark is
accepted and counted at the next watermark move. Elements counted and not yet in a complete
window wait for more (as in Storm, an incomplete count window never fires, not even at the end of
the input).

Timestamp order is also the order of counting: an element is counted under a watermark it was
not behind when it arrived, so every element counted before it has a smaller timestamp. So the
windows do not depend on how elements were bundled, in what order they arrived within the
watermark's delay, or where the watermark stopped.

::

    count(1), lag 15 ms:  112:283  102:604  122:792 | watermark 107 | watermark 127
    watermark 107 counts  102          -> window 0 [604]
    watermark 127 counts  112, 122     -> window 1 [283], window 2 [792]

How it relates to Storm (``WindowManager`` with ``WatermarkCountTriggerPolicy`` and
``WatermarkCountEvictionPolicy``; ``tests/core/storm_port.py`` ports it): at a watermark ``W``
Storm counts the queued tuples with ``lastProcessedTs < ts <= W`` in *arrival* order and triggers
at every ``slide``-th, referencing the running maximum timestamp; each trigger's window is then
taken from the queue in arrival order among the tuples with ``ts <=`` that reference (expiring
the oldest-queued first). For input that arrives in timestamp order the two agree (the
differential test). Otherwise Storm's result depends on arrival order and goes wrong: with the
three tuples above, Storm's windows are ``[604]``, ``[604]``, ``[792]`` — its second trigger
expires 283 (queued first) instead of 604, so 604 is in two windows and 283 in none and not in
the late stream. Two more differences, both Storm's defects: a tuple with the timestamp of the
last trigger point of a watermark step that is not counted in that step is never counted (its
count resumes after ``lastProcessedTs``), so later windows lag by one tuple; and Storm counts a
tuple at ``ts == W`` at once, although tuples with that timestamp may still arrive (here it waits
for the next watermark, which is what lets equal timestamps be counted together).

State: the buffered elements not yet in every window they belong to — per key those from the
first element of the next incomplete window on, and those not yet counted — and per key the
number of elements counted so far (kept forever, like count windows' per-key counts). Each
evaluation sorts and searches with NumPy; there is no per-element or per-window Python loop.
"""

from __future__ import annotations

import numpy as np

from spark_windowing.windows.buffered import Evaluation, StepView, TimestampOrdinals, ranks
from spark_windowing.windows.kinds import TimestampCount


class TimestampCountLogic(TimestampOrdinals):
    """``count(size[, slide])`` with ``countOrder=timestamp``: see the module docstring."""

    window: TimestampCount

    def __init__(self, window: TimestampCount) -> None:
        super().__init__(window, window.step, 0)  # a late row names [ts, ts]: count windows' bounds are times

    def evaluate(self, view: StepView) -> Evaluation:
        out = Evaluation()
        counted = self._count(view.wm) if len(self.ts) else None
        if counted is None:
            return out
        t_el, ordn, krow = counted
        w = self.window
        if len(t_el):
            seq = (ordn + 1) // w.step - 1
            first = np.maximum(0, ordn + 1 - w.size)      # the window's first element's number
            sel = np.flatnonzero(self.ordinal >= 0)
            order = sel[np.lexsort((self.ordinal[sel], krow[sel]))]
            (r_ord, r_lo, r_hi), span = ranks(self.ordinal[order], first, ordn)
            comp = krow[order] * span + r_ord
            lo = np.searchsorted(comp, krow[t_el] * span + r_lo, side="left")
            hi = np.searchsorted(comp, krow[t_el] * span + r_hi, side="right")
            em = np.lexsort((seq, krow[t_el], self.ts[t_el]))  # in the order their last elements were counted
            out.closed += self._close_windows(view, t_el[em], seq[em], lo[em], hi[em], order)
        # keep what the next incomplete window of each key can hold, and what is not counted yet
        next_first = (self.counted[krow] // w.step + 1) * w.step - w.size
        self._keep((self.ordinal < 0) | (self.ordinal >= next_first))
        return out
