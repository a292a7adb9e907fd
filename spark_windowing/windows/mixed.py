"""Buffered window kinds, in event time, per key: Storm's mixed count/time windows and Kafka
Streams' record-sliding windows (KIP-450).

Storm's ``BaseWindowedBolt.withWindow`` mixes a count length with a time slide and the other way
round. Here they are per key and driven by the watermark:

``count(n, d[, offset])`` — Storm's ``withWindow(Count n, Duration d)``
    Boundaries ``b = offset + k·d`` (aligned to the epoch). Once the watermark reaches ``b``, every
    key with at least one element in ``[b − d, b)`` gets one window: its last ``n`` elements with
    ``ts < b``, in timestamp order (ties: arrival order). ``window_seq = k``. An element whose
    first boundary (the first ``b > ts``) is at or behind the watermark is late (``too_late``).

    ::

        count(3, 10 s), one key       e1  e2 e3   e4        e5
        ts                            2   5  8    12        31
        boundary 10 (wm >= 10)  -> [e1 e2 e3]            window_seq 1
        boundary 20             -> [e2 e3 e4]            window_seq 2
        boundary 30             -> (nothing new in [20, 30): no window)
        boundary 40             -> [e3 e4 e5]            window_seq 4

``sliding(d, n elements)`` — Storm's ``withWindow(Duration d, Count n)``
    Every ``n``-th element of a key in timestamp order (ties: arrival order) triggers a window with
    the key's elements in ``(t − d, t]``, ``t`` the triggering element's time; it is evaluated once
    the watermark passes ``t`` (``watermark > t``: every element with ``ts <= t`` is in).
    ``window_seq`` = the trigger's number per key (0-based). An element with ``ts < watermark`` is
    late: its place in the key's timestamp order may already have been counted.

``record_sliding(size)`` — Kafka Streams' ``SlidingWindows`` (KIP-450) with ``suppress(untilWindowCloses)``
    Windows ``[s, s + size]``, both bounds inclusive, one per distinct set of a key's records
    within ``size`` of each other. Per distinct record time ``t`` the candidates are ``[t − size, t]``
    (ending at the record) and ``[t + g, t + g + size]`` (starting just after it; it exists only if
    it holds records), ``g`` the timestamps' grain (the unit of integer epoch columns, 1 ms by
    default as in Kafka; 1 µs otherwise). Every window a key can have with a distinct record set is
    one of these (a set changes only where a record enters at ``s + size`` or leaves at ``s``), and
    no two candidates with different starts hold the same set, so there is no window per
    millisecond: at most two per distinct timestamp.

    A window closes once ``watermark >= end + 1 µs + allowedLateness`` and then fires once (ON_TIME,
    final) with the records that arrived while it was open — a record joins every open window that
    holds it, and brings its two candidates if they are open when it arrives. Its records are those
    of earlier micro-batches: this batch's records arrived under the new watermark, when the windows
    it closes were already closed (Kafka's per-record rule, with the batch as the unit of arrival).
    A record is late on arrival when ``[t, t + size]``, the last window that could hold it, is closed
    (Kafka: ``t + 1 + size <= streamTime − grace``); a record kept for windows that later records
    might have opened, where none did, goes to the late output when ``[t, t + size]`` closes — so
    every record is in a pane or in the late output. Late rows carry ``[t − size, t]``.

    ::

        record_sliding(5 s), one key:    8000   9200          12400
        [3000, 8000]                     x                               (ends at 8000)
        [4200, 9200]                     x      x                        (ends at 9200)
        [7400, 12400]                    x      x             x          (ends at 12400)
        [8001, 13001]                           x             x          (starts after 8000)
        [9201, 14201]                                         x          (starts after 9200)

>>> from spark_windowing.testing import TestStream
>>> s = TestStream(window="count(3, 10 milliseconds)", aggregate="collect_list(ts) AS t")
>>> s.add_elements([{"ts": t} for t in (2, 5, 8, 12, 31)])
>>> s.advance_watermark_to(40)
>>> [(p["window_seq"], p["t"]) for p in s.take_panes()]
[(1, [2, 5, 8]), (2, [5, 8, 12]), (4, [8, 12, 31])]
>>> s = TestStream(window="sliding(10 milliseconds, 2 elements)", aggregate="collect_list(ts) AS t")
>>> s.add_elements([{"ts": t} for t in (8, 2, 5, 12, 30, 15, 31)])
>>> s.advance_watermark_to(40)
>>> [(p["window_seq"], p["t"]) for p in s.take_panes()]
[(0, [2, 5]), (1, [5, 8, 12]), (2, [30])]
>>> s = TestStream(window="record_sliding(5 seconds)", aggregate="collect_list(ts) AS t")
>>> s.add_elements([{"ts": t} for t in (8000, 9200, 12400)])
>>> s.advance_watermark_to(20_000)
>>> [(p["window_start"], p["window_end"], p["t"]) for p in s.take_panes()]
[(3000, 8000, [8000]), (4200, 9200, [8000, 9200]), (7400, 12400, [8000, 9200, 12400]), (8001, 13001, [9200, 12400]), (9201, 14201, [12400])]

Late rows (``lateDataPath``) carry, as ``window_start``/``window_end``, ``[b − d, b)`` for the
first boundary ``b`` the element missed (``count``), or ``[ts, ts + d)``, the trigger times whose
windows it could have joined (``sliding``).

All of them fire each window exactly once: ON_TIME, ``is_final``, ``pane_index`` 0, no retractions (a
window is never re-fired). ``record_sliding`` pane rows carry ``[window_start, window_end]`` = the
window, ``window_end`` inclusive (documented; every other kind's is exclusive), ``pane_timestamp`` =
that end, or the first / last record's time under the ``earliest`` / ``latest`` combiners. The
count-based kinds' pane rows carry ``window_start``/``window_end`` = the window's first and
last element timestamps (as count windows do), ``pane_timestamp`` = the last element's time
(``t`` for ``sliding(d, n elements)``), and ``window_seq`` as above, which the sink uses to tell
windows apart. So ``accumulationMode``, ``timestampCombiner`` and ``fireOnlyUpdatedPanes`` change
nothing here; a ``trigger`` other than ``Default()`` is rejected, and so is a non-zero
``allowedLateness`` except with ``record_sliding`` (where it is Kafka's grace period).
Aggregates see a window's elements in timestamp order (ties: arrival order).

How this relates to Storm (``storm-client/.../windowing``, the ``Watermark*Policy`` classes with
a timestamp field and lag):

* ``count(n, d)`` = ``WatermarkTimeTriggerPolicy`` + ``WatermarkCountEvictionPolicy``: at each
  window end ``b <= watermark`` Storm processes the last ``n`` events with ``ts <= b`` in *arrival*
  order (the queue order) and expires the rest. Differences: (1) boundaries are half-open here
  (``ts < b``, the project's ``[start, end)`` model, so a window is complete exactly when the
  watermark reaches ``b``; Storm includes ``ts == b`` although such an event may still arrive);
  (2) "last n" is by timestamp (arrival order breaks ties), so the result does not depend on the
  order of out-of-order arrivals; for in-order input it is Storm's choice; (3) Storm's single window
  fires at every boundary once it holds events, even when nothing changed; per key that would emit
  an identical pane every ``d`` for every idle key forever (and infinitely many at the end of input),
  so a key is evaluated only at boundaries where its window changed — exactly Storm's activations
  with a non-empty ``newEvents`` list.
* ``sliding(d, n elements)`` = ``WatermarkCountTriggerPolicy`` + ``WatermarkTimeEvictionPolicy``:
  Storm counts, at each watermark ``W``, the events with ``ts`` in ``(lastProcessedTs, W]`` in arrival
  order and triggers at the running maximum timestamp of every ``n``-th; the window is
  ``(t − d, t]``. Differences: counting is in timestamp order, so a trigger does not depend on how
  events were bundled or on where watermarks fell (for in-order input with distinct timestamps the
  two agree); equal timestamps right after a trigger are counted (Storm skips events with
  ``ts == lastProcessedTs``); and a trigger at ``t`` waits for ``watermark > t``.
* Late elements go to the late output (Storm's ``withLateTupleStream``), never vanish.

State: the buffered elements (their key, timestamp, arrival number and the aggregate input
columns) — windows overlap arbitrarily, so values are kept, not partials — pruned after each
evaluation to what later windows can still use: per key the last ``n`` elements before the last
boundary plus everything after it (``count``), or the elements with ``ts > watermark − d``
(``sliding``). ``sliding`` also keeps one counter per key (elements counted so far), forever, like
count windows' per-key counts. The work per step is NumPy sorting and searching over the buffer;
there is no per-element or per-window Python loop. ``record_sliding`` keeps whole input rows (for
the late output), the watermark each arrived under and whether a pane held it, and prunes a record
once the window starting just after it has closed; each evaluation sorts the buffer by (key, time),
builds the candidate windows of the distinct times and finds each window's records with
``searchsorted``.

Code: the buffer, its evaluation hooks and what they return (``StepView``, ``Evaluation``,
``Closed``, ``Late``) are in ``spark_windowing.windows.buffered``, with the timestamp-order
numbering ``sliding(d, n elements)`` shares with count windows in timestamp order
(``countOrder=timestamp``, ``spark_windowing.windows.timestamp_count``); ``count`` and
``sliding(d, n elements)`` here; ``record_sliding`` in ``spark_windowing.windows.record_sliding``.
"""


from __future__ import annotations

import numpy as np

from spark_windowing._time import MAX_TIME
from spark_windowing.windows.buffered import Evaluation, MixedLogic, StepView, TimestampOrdinals, ranks
from spark_windowing.windows.kinds import CountEvery, RecordSliding, SlidingEvery, TimestampCount, WindowFn
from spark_windowing.windows.record_sliding import RecordSlidingLogic
from spark_windowing.windows.timestamp_count import TimestampCountLogic


def build_logic(window: WindowFn, lateness: int = 0) -> "MixedLogic":
    """The buffered logic of a window kind with ``mixed`` set (``lateness``: allowedLateness, µs)."""
    if isinstance(window, CountEvery):
        return CountEveryLogic(window)
    if isinstance(window, SlidingEvery):
        return SlidingEveryLogic(window)
    if isinstance(window, RecordSliding):
        return RecordSlidingLogic(window, lateness)
    if isinstance(window, TimestampCount):
        return TimestampCountLogic(window)
    raise TypeError(f"not a mixed window: {window!r}")


class CountEveryLogic(MixedLogic):
    """``count(n, d[, offset])``: see the module docstring."""

    window: CountEvery

    def __init__(self, window: CountEvery) -> None:
        super().__init__(window)
        self.done_k: int | None = None  # last boundary index evaluated

    def _boundary_index(self, t: int) -> int:
        """Largest k with offset + k·every <= t."""
        return (t - self.window.offset) // self.window.every

    def late(self, view: StepView, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w = self.window
        first = (ts - w.offset) // w.every + 1        # index of the first boundary after ts
        late = first <= self._boundary_index(view.wm)
        we = w.offset + first * w.every
        return late, we - w.every, we

    def evaluate(self, view: StepView) -> Evaluation:
        w, out = self.window, Evaluation()
        k_now = self._boundary_index(view.wm)
        if self.done_k is not None and k_now <= self.done_k:
            return out
        k_prev, self.done_k = self.done_k, k_now
        if len(self.ts) == 0:
            return out
        order, kid_o, first = self._sorted()
        ts_o = self.ts[order]
        c = (ts_o - w.offset) // w.every + 1
        due = c <= k_now
        if k_prev is not None:
            due &= c > k_prev
        b_now = np.int64(max(w.offset + k_now * w.every, -(2 ** 62)))
        if due.any():
            # one window per (key, boundary) with an element just before the boundary
            wk, wc = kid_o[due], c[due]
            head = np.ones(len(wk), dtype=bool)
            head[1:] = (wk[1:] != wk[:-1]) | (wc[1:] != wc[:-1])   # sorted by (key, ts): runs
            wk, wc = wk[head], wc[head]
            b = w.offset + wc * w.every
            (r_ts, r_b), span = ranks(ts_o, b)
            hi = np.searchsorted(kid_o * span + r_ts, wk * span + r_b, side="left")
            lo = np.maximum(first[wk], hi - w.size)
            tie = np.lexsort((wk, wc))  # emit in boundary order
            out.closed += self._close_windows(view, order[first[wk]][tie], wc[tie], lo[tie], hi[tie], order)
        # keep per key the last n elements before b_now and everything at or after it
        (r_ts, r_b), span = ranks(ts_o, np.array([b_now]))
        comp = kid_o * span + r_ts
        before = np.searchsorted(comp, np.unique(kid_o) * span + r_b[0], side="left")
        p_now = np.empty(len(first), dtype=np.int64)
        p_now[np.unique(kid_o)] = before
        keep_o = (ts_o >= b_now) | (np.arange(len(ts_o)) >= p_now[kid_o] - w.size)
        keep = np.zeros(len(ts_o), dtype=bool)
        keep[order[keep_o]] = True
        self._keep(keep)
        return out

    def next_timer(self) -> int:
        w = self.window
        if len(self.ts) == 0:
            return MAX_TIME
        c = (self.ts - w.offset) // w.every + 1
        if self.done_k is not None:
            c = c[c > self.done_k]
        return int(w.offset + c.min() * w.every) if len(c) else MAX_TIME

    def _extra_state(self):
        return {"done_k": self.done_k}

    def _restore_extra(self, doc):
        self.done_k = doc["done_k"]


class SlidingEveryLogic(TimestampOrdinals):
    """``sliding(d, n elements)``: see the module docstring."""

    window: SlidingEvery

    def __init__(self, window: SlidingEvery) -> None:
        super().__init__(window, window.every, window.size)

    def evaluate(self, view: StepView) -> Evaluation:
        w, out = self.window, Evaluation()
        if len(self.ts) == 0:
            return out
        wm = view.wm
        counted = self._count(wm)
        if counted is not None and len(counted[0]):
            t_el, ordn, _ = counted
            order, kid_o, _ = self._sorted()
            kid = np.empty(len(order), dtype=np.int64)
            kid[order] = kid_o
            t, tk = self.ts[t_el], kid[t_el]
            (r_el, r_t, r_lo), span = ranks(self.ts[order], t, t - w.size)
            comp = kid_o * span + r_el
            hi = np.searchsorted(comp, tk * span + r_t, side="right")
            lo = np.searchsorted(comp, tk * span + r_lo, side="right")
            seq = (ordn + 1) // w.every - 1
            em = np.lexsort((seq, tk, t))  # emit in trigger-time order
            out.closed += self._close_windows(view, t_el[em], seq[em], lo[em], hi[em], order)
        # later triggers have t >= wm, so they need only ts > wm - size
        self._keep(self.ts > wm - w.size)
        return out
