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

(Over 500 lines: a quarter is this description; the three kinds share the buffer and its
evaluation hooks, and the operator sees them only through ``StepView``, ``Evaluation`` and
``MixedLogic``'s ``add`` / ``evaluate`` / ``next_timer``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_windowing import aggregates as agg
from spark_windowing._arrow import factorize, field_type
from spark_windowing._time import GLOBAL_END, MAX_TIME, MIN_TIME, UNIT_FACTORS
from spark_windowing.windows import CountEvery, RecordSliding, SlidingEvery, WindowFn



@dataclass(frozen=True)
class StepView:
    """What buffered logic sees of the operator's step: the watermark ``wm``, the batch ``seq``
    (arrival numbers of folded elements), the bound aggregates and the timestamps' grain."""

    wm: int
    seq: int
    aggs: list[agg.BoundAggregate]
    grain: int = 1


@dataclass(frozen=True)
class Closed:
    """Windows one evaluation closes, each to fire once (ON_TIME, final), in the order given.

    Window ``w`` has key row ``keys[w]`` and bounds ``ws[w]``/``we[w]`` (count-based kinds:
    ``ws`` = window_seq, ``we`` = GLOBAL_END). Its contents are aggregated already:
    ``partials``/``res`` (``aggregates.preaggregate``'s form) hold the rows for windows
    ``windows``; ``first_ts``/``last_ts`` are its first and last element times (the pane
    timestamp under the earliest / latest combiners)."""

    keys: pa.Table
    ws: np.ndarray
    we: np.ndarray
    windows: np.ndarray
    res: dict[str, np.ndarray]
    partials: dict[str, Any]
    first_ts: np.ndarray
    last_ts: np.ndarray


@dataclass(frozen=True)
class Late:
    """Elements that no window can take any more (``too_late``): their input rows and the
    window each late row names."""

    rows: pa.Table
    ws: np.ndarray
    we: np.ndarray


@dataclass
class Evaluation:
    """What one ``evaluate`` produced: windows to fire, then elements given up."""

    closed: list[Closed] = field(default_factory=list)
    late: list[Late] = field(default_factory=list)


def build_logic(window: WindowFn, lateness: int = 0) -> "MixedLogic":
    """The buffered logic of a window kind with ``mixed`` set (``lateness``: allowedLateness, µs)."""
    if isinstance(window, CountEvery):
        return CountEveryLogic(window)
    if isinstance(window, SlidingEvery):
        return SlidingEveryLogic(window)
    if isinstance(window, RecordSliding):
        return RecordSlidingLogic(window, lateness)
    raise TypeError(f"not a mixed window: {window!r}")


class MixedLogic:
    """Buffered elements of a mixed window and their evaluation (one instance per operator)."""

    def __init__(self, window: WindowFn) -> None:
        self.window = window
        self.keys: pa.Table | None = None      # key columns per buffered element
        self.values: pa.Table | None = None    # aggregate input columns per buffered element
        self.ts = np.empty(0, dtype=np.int64)
        self.arr = np.empty(0, dtype=np.int64)  # arrival number (tie-break)
        self.next_arr = 0

    # ---- hooks called by the operator
    def add(self, view: StepView, events: pa.Table, key_table: pa.Table, ts: np.ndarray) -> Late | None:
        """Buffer the batch's valid elements; return those already too late (None if none)."""
        late, ws, we = self.late(view, ts)
        out = None
        if late.any():
            out = Late(events.take(pa.array(np.flatnonzero(late))), ws[late], we[late])
        keep = np.flatnonzero(~late)
        if len(keep):
            take = pa.array(keep)
            self._append(key_table.take(take), self._values(view, events).take(take), ts[keep])
        return out

    def _values(self, view: StepView, events: pa.Table) -> pa.Table:
        """The columns buffered per element: what the aggregates read."""
        return agg.input_columns(view.aggs, events)

    def evaluate(self, view: StepView) -> Evaluation:
        """The windows the watermark ``view.wm`` closes, and elements given up; prunes the buffer."""
        raise NotImplementedError

    def late(self, view: StepView, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per element: too late on arrival, and the window its late row names."""
        raise NotImplementedError

    def next_timer(self) -> int:
        raise NotImplementedError

    # ---- buffer
    def _append(self, keys: pa.Table, values: pa.Table, ts: np.ndarray) -> None:
        m = len(ts)
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self.keys = pa.concat_tables([self.keys, keys.cast(self.keys.schema)]).combine_chunks()
            self.values = pa.concat_tables([self.values, values], promote_options="permissive").combine_chunks()
        self.ts = np.concatenate([self.ts, ts.astype(np.int64)])
        self.arr = np.concatenate([self.arr, np.arange(self.next_arr, self.next_arr + m, dtype=np.int64)])
        self.next_arr += m
        self._appended(m)

    def _appended(self, m: int) -> None:
        pass

    def _keep(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        assert self.keys is not None and self.values is not None
        sel = pa.array(np.flatnonzero(keep))
        self.keys, self.values = self.keys.take(sel), self.values.take(sel)
        self.ts, self.arr = self.ts[keep], self.arr[keep]
        self._kept(keep)

    def _kept(self, keep: np.ndarray) -> None:
        pass

    def _sorted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Buffer order by (key, ts, arrival), the key ids in that order, and each key's first position."""
        assert self.keys is not None
        kid = factorize([self.keys])[0]
        order = np.lexsort((self.arr, self.ts, kid))
        kid_o = kid[order]
        first = np.full(int(kid.max()) + 1 if len(kid) else 0, -1, dtype=np.int64)
        first[kid_o[::-1]] = np.arange(len(kid_o))[::-1]
        return order, kid_o, first

    def _close_windows(self, view: StepView, rep: np.ndarray, seq: np.ndarray, lo: np.ndarray,
                       hi: np.ndarray, order: np.ndarray, we: np.ndarray | None = None) -> list[Closed]:
        """Windows ``w`` with the buffered elements ``order[lo[w]:hi[w]]`` (sorted positions, by
        time), the key of buffered element ``rep[w]``, ``window_seq = seq[w]`` (count-based kinds)
        or the window ``[seq[w], we[w])`` (record_sliding), aggregated now (before the buffer is
        pruned)."""
        assert self.keys is not None and self.values is not None
        m = len(rep)
        if m == 0:
            return []
        folded = self._fold_ranges(view, lo, hi, order)
        if folded is None:
            lengths = hi - lo
            win = np.repeat(np.arange(m), lengths)
            pos = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + lo[win]
            src = order[pos]
            values = agg.input_columns(view.aggs, self.values)
            arrival = (view.seq << 32) + np.arange(len(win), dtype=np.int64)
            folded = agg.preaggregate(view.aggs, values.take(pa.array(src)), win, self.ts[src], None, arrival)
        windows, res, partials = folded
        return [Closed(self.keys.take(pa.array(rep)), seq.astype(np.int64),
                       np.full(m, GLOBAL_END, dtype=np.int64) if we is None else we.astype(np.int64),
                       windows, res, partials, self.ts[order[lo]], self.ts[order[hi - 1]])]

    def _fold_ranges(self, view: StepView, lo: np.ndarray, hi: np.ndarray, order: np.ndarray
                     ) -> tuple[np.ndarray, dict, dict] | None:
        """Aggregate each window's elements ``order[lo[w]:hi[w]]`` straight from the ranges with
        ``np.ufunc.reduceat``, without expanding (element, window) pairs: memory follows the windows,
        not windows x elements per window (record_sliding windows overlap heavily). Only for
        sum / avg / count / min / max over integer or float columns; returns None otherwise, and
        the caller folds the expanded pairs. Returns (windows, res, partials), windows ``0..m-1``."""
        aggs = view.aggs
        if not aggs or any(a.spec.func not in agg.COMBINABLE for a in aggs):
            return None
        assert self.values is not None
        columns: dict[str, Any] = {}
        for a in aggs:
            if a.spec.column is not None and a.spec.column not in columns:
                col = self.values.column(a.spec.column)
                if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
                    return None
                columns[a.spec.column] = col.take(pa.array(order)).combine_chunks()
        idx = _ranges(lo, hi)
        ts = self.ts[order]
        res = {"n": (hi - lo).astype(np.int64), "min_ts": _reduce(np.minimum, ts, idx),
               "max_ts": _reduce(np.maximum, ts, idx)}
        partials: dict[str, Any] = {}
        for a in aggs:
            p, f = a.prefix, a.spec.func
            if f == "count_star":
                partials[p + "n"] = res["n"]
                continue
            col = columns[a.spec.column]
            cnt = _reduce(np.add, np.asarray(col.is_valid(), dtype=np.int64), idx)
            partials[p + "n"] = cnt
            if f in ("sum", "avg"):
                integer = pa.types.is_integer(col.type)
                x = col.fill_null(0).to_numpy().astype(np.int64 if integer else np.float64)
                partials[p + "s"] = _reduce(np.add, x, idx)
            elif f in ("min", "max"):  # a null never wins
                if pa.types.is_integer(col.type):
                    info = np.iinfo(col.type.to_pandas_dtype())
                    x = col.fill_null(info.max if f == "min" else info.min).to_numpy()
                    ufunc = np.minimum if f == "min" else np.maximum
                else:  # fmin / fmax skip NaN unless all are NaN, as Arrow's min / max do; a null
                    x = col.to_numpy(zero_copy_only=False).astype(np.float64)  # is NaN here, and
                    # a window of nulls only is masked below (count 0)
                    ufunc = np.fmin if f == "min" else np.fmax
                v = _reduce(ufunc, x, idx)
                partials[p + "v"] = pa.array(v, mask=cnt == 0).cast(col.type)
        return np.arange(len(lo), dtype=np.int64), res, partials

    # ---- snapshots (pickled by spark_windowing.state)
    def snapshot(self) -> dict[str, Any]:
        return {"keys": self.keys, "values": self.values, "ts": self.ts, "arr": self.arr,
                "next_arr": self.next_arr, **self._extra_state()}

    def restore(self, doc: dict[str, Any]) -> None:
        self.keys, self.values = doc["keys"], doc["values"]
        self.ts, self.arr, self.next_arr = doc["ts"], doc["arr"], int(doc["next_arr"])
        self._restore_extra(doc)

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _restore_extra(self, doc: dict[str, Any]) -> None:
        pass


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``ufunc.reduceat`` indices for the ranges ``[lo[w], hi[w])`` (``lo < hi``), interleaved;
    see ``_reduce``."""
    idx = np.empty(2 * len(lo), dtype=np.int64)
    idx[0::2], idx[1::2] = lo, hi
    return idx


def _reduce(ufunc: np.ufunc, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``ufunc`` over each range of ``_ranges``: reduceat of ``idx[2w] < idx[2w+1]`` reduces exactly
    ``x[lo:hi]`` (the odd results, from ``hi`` to the next ``lo``, are dropped); one sentinel element
    makes ``hi == len(x)`` a valid index."""
    if len(idx) == 0:
        return x[:0].copy()
    return ufunc.reduceat(np.append(x, x[-1:]), idx)[0::2]


def _ranks(*arrays: np.ndarray) -> tuple[list[np.ndarray], int]:
    """Dense ranks of int64 values shared across ``arrays`` (so key·R + rank cannot overflow)."""
    values = np.unique(np.concatenate(arrays))
    return [np.searchsorted(values, a) for a in arrays], len(values) + 1


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
            (r_ts, r_b), span = _ranks(ts_o, b)
            hi = np.searchsorted(kid_o * span + r_ts, wk * span + r_b, side="left")
            lo = np.maximum(first[wk], hi - w.size)
            tie = np.lexsort((wk, wc))  # emit in boundary order
            out.closed += self._close_windows(view, order[first[wk]][tie], wc[tie], lo[tie], hi[tie], order)
        # keep per key the last n elements before b_now and everything at or after it
        (r_ts, r_b), span = _ranks(ts_o, np.array([b_now]))
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


class SlidingEveryLogic(MixedLogic):
    """``sliding(d, n elements)``: see the module docstring."""

    window: SlidingEvery

    def __init__(self, window: SlidingEvery) -> None:
        super().__init__(window)
        self.ordinal = np.empty(0, dtype=np.int64)  # per buffered element: place in its key's order, -1 = open
        self.counted_keys: pa.Table | None = None   # per key: elements counted so far
        self.counted = np.empty(0, dtype=np.int64)

    def late(self, view: StepView, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return ts < view.wm, ts, ts + self.window.size

    def _appended(self, m: int) -> None:
        self.ordinal = np.concatenate([self.ordinal, np.full(m, -1, dtype=np.int64)])

    def _kept(self, keep: np.ndarray) -> None:
        self.ordinal = self.ordinal[keep]

    def _key_rows(self, add: bool = True) -> np.ndarray:
        """Row in ``counted_keys`` of every buffered element's key (new keys are added, or -1)."""
        assert self.keys is not None
        if self.counted_keys is None:
            self.counted_keys = self.keys.slice(0, 0)
        kid_state, kid_buf = factorize([self.counted_keys, self.keys])
        n_ids = int(max(kid_state.max(initial=-1), kid_buf.max(initial=-1))) + 1
        row_of = np.full(n_ids, -1, dtype=np.int64)
        row_of[kid_state] = np.arange(len(kid_state))
        missing = np.unique(kid_buf[row_of[kid_buf] < 0])
        if len(missing) and add:
            rep = np.full(n_ids, -1, dtype=np.int64)
            rep[kid_buf[::-1]] = np.arange(len(kid_buf))[::-1]
            new_keys = self.keys.take(pa.array(rep[missing]))
            row_of[missing] = len(self.counted) + np.arange(len(missing))
            self.counted_keys = pa.concat_tables([self.counted_keys, new_keys]).combine_chunks()
            self.counted = np.concatenate([self.counted, np.zeros(len(missing), dtype=np.int64)])
        return row_of[kid_buf]

    def evaluate(self, view: StepView) -> Evaluation:
        w, out = self.window, Evaluation()
        if len(self.ts) == 0:
            return out
        wm = view.wm
        newly = (self.ordinal < 0) & (self.ts < wm)
        if newly.any():
            krow = self._key_rows()
            sel = np.flatnonzero(newly)
            sel = sel[np.lexsort((self.arr[sel], self.ts[sel], krow[sel]))]
            g = krow[sel]
            head = np.ones(len(g), dtype=bool)
            head[1:] = g[1:] != g[:-1]
            starts = np.flatnonzero(head)
            rank = np.arange(len(g)) - np.repeat(starts, np.diff(np.append(starts, len(g))))
            ordn = self.counted[g] + rank
            self.ordinal[sel] = ordn
            np.add.at(self.counted, g, 1)
            trig = (ordn + 1) % w.every == 0
            if trig.any():
                t_el = sel[trig]
                order, kid_o, _ = self._sorted()
                kid = np.empty(len(order), dtype=np.int64)
                kid[order] = kid_o
                t, tk = self.ts[t_el], kid[t_el]
                (r_el, r_t, r_lo), span = _ranks(self.ts[order], t, t - w.size)
                comp = kid_o * span + r_el
                hi = np.searchsorted(comp, tk * span + r_t, side="right")
                lo = np.searchsorted(comp, tk * span + r_lo, side="right")
                seq = (ordn[trig] + 1) // w.every - 1
                em = np.lexsort((seq, tk, t))  # emit in trigger-time order
                out.closed += self._close_windows(view, t_el[em], seq[em], lo[em], hi[em], order)
        # later triggers have t >= wm, so they need only ts > wm - size
        self._keep(self.ts > wm - w.size)
        return out

    def next_timer(self) -> int:
        """Just past the time of the element that would trigger next (if no earlier one arrives)."""
        if len(self.ts) == 0 or not (self.ordinal < 0).any():
            return MAX_TIME
        assert self.keys is not None
        kid = factorize([self.keys])[0]
        krow = self._key_rows(add=False)  # a query: no new keys are recorded
        sel = np.flatnonzero(self.ordinal < 0)
        sel = sel[np.lexsort((self.arr[sel], self.ts[sel], kid[sel]))]
        g = kid[sel]
        head = np.ones(len(g), dtype=bool)
        head[1:] = g[1:] != g[:-1]
        starts = np.flatnonzero(head)
        rank = np.arange(len(g)) - np.repeat(starts, np.diff(np.append(starts, len(g))))
        counted = np.append(self.counted, 0)[np.where(krow[sel] >= 0, krow[sel], len(self.counted))]
        need = self.window.every - 1 - counted % self.window.every
        hit = rank == need
        return int(self.ts[sel[hit]].min()) + 1 if hit.any() else MAX_TIME

    def _extra_state(self):
        return {"ordinal": self.ordinal, "counted_keys": self.counted_keys, "counted": self.counted}

    def _restore_extra(self, doc):
        self.ordinal, self.counted_keys, self.counted = doc["ordinal"], doc["counted_keys"], doc["counted"]


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
        (r_ts, r_s, r_e), span = _ranks(ts_o, cs, cs + self.window.size)
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
        (r_ts,), span = _ranks(ts_o)
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


def grain(schema: pa.Schema | None, column: str | None, unit: str | None) -> int:
    """The timestamps' grain in µs: the unit of integer epoch columns (Kafka's are milliseconds),
    else 1 µs (timestamp, date, string and floating-point columns)."""
    t = field_type(schema, column) if column is not None and schema is not None else None
    if t is not None and pa.types.is_integer(t):
        return UNIT_FACTORS[unit or "ms"]
    return 1
