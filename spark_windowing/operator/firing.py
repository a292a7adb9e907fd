"""``TriggerDriver``: when windows fire and what their panes say (Beam's trigger driver role).

Apart from window assignment and storage: it reads and writes the window table's trigger,
timer and pane-bookkeeping columns, and turns firings into pane rows.

* ``fire``: after a step's elements are in, every window that got elements or has a due timer
  (end of window, or a trigger's event-time / processing-time timer) is evaluated once; the
  trigger decides which fire and which finish (``closed``: a tombstone until expiry). Timers are
  one-shot (Beam's): a trigger timer is due in the batch whose watermark / processing time
  reaches it, not in later ones, even where the trigger keeps it (``AfterAll`` keeps a fired
  ``AfterProcessingTime`` deadline beside a ``ContinuousEventTime``, which never finishes).
* ``emit``: a firing's pane — timing (EARLY before the end, ON_TIME for the first pane at the end
  of window, LATE after; count windows are ON_TIME once complete; buffered kinds always ON_TIME),
  ``is_final``, ``pane_timestamp`` by the timestamp combiner, the RETRACTION of the previous pane
  under ``accumulating_and_retracting``, and the bookkeeping the next firing needs.
* ``row_timers``: per window, when a step without input could change it (the state store loads
  spilled key buckets by these).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa

from spark_windowing._time import GLOBAL_END, GLOBAL_START, MAX_TIME
from spark_windowing.aggregates.binding import BoundAggregate
from spark_windowing.aggregates.outputs import outputs
from spark_windowing.aggregates.partials import reset_rows
from spark_windowing.operator import join
from spark_windowing.operator.output import Clock, StepOutput, ts_array
from spark_windowing.panes import (KIND_RETRACTION, KIND_TRIGGER, TIMESTAMP, TIMING_EARLY, TIMING_LATE,
                                   TIMING_ON_TIME)
from spark_windowing.aggregates.process import PaneInfo
from spark_windowing.operator.window_table import I64_MAX, I64_MIN, WindowTable
from spark_windowing.triggers.tree import NONE, Ctx
from spark_windowing.windows.kinds import CountWindow

if TYPE_CHECKING:
    from spark_windowing.operator.spec import OperatorSpec

TIMINGS = np.array([TIMING_EARLY, TIMING_ON_TIME, TIMING_LATE], dtype=object)
EARLY, ON_TIME, LATE = 0, 1, 2
_TIMING_ARRAY: pa.Array | None = None  # the pane_timing strings by timing code (built on first use)


def _timing_array() -> pa.Array:
    global _TIMING_ARRAY
    if _TIMING_ARRAY is None:
        _TIMING_ARRAY = pa.array(TIMINGS.tolist(), pa.string())
    return _TIMING_ARRAY


class TriggerDriver:
    """Fires the windows of ``table`` under ``spec``'s trigger, accumulation mode and timestamp
    combiner. ``aggs`` is the operator's list of bound aggregates (read at each firing: it may be
    rebound); ``pane_schema`` and ``output_fields`` give the current pane schema and the
    aggregates' output fields."""

    def __init__(self, spec: "OperatorSpec", table: WindowTable, aggs: list[BoundAggregate],
                 pane_schema: Callable[[], pa.Schema], output_fields: Callable[[], list[pa.Field]]) -> None:
        self.spec, self.table, self.aggs = spec, table, aggs
        self.pane_schema, self.output_fields = pane_schema, output_fields
        self.track_last = spec.retracting or spec.fire_only_updated_panes

    # ------------------------------------------------------------------ evaluation
    def fire(self, touched: np.ndarray, n_new: np.ndarray, min_ts_new: np.ndarray, before: Clock, clock: Clock,
             out: StepOutput) -> None:
        """Evaluate the trigger once per window that got elements (``touched``, ``n_new`` of
        them, the earliest at ``min_ts_new``) or has a trigger timer reached in this batch (after
        the batch's previous clock ``before``, at most ``clock``) or a pending end-of-window
        timer; emit and close what it says."""
        spec, cols, n = self.spec, self.table.cols, len(self.table)
        if n == 0:
            return
        wm, proc = clock.wm, clock.proc
        we = cols["we"]
        c = Ctx(cols, we, wm, proc, n_new, min_ts_new, self.past_end(wm))
        spec.trigger.on_element(c, "", touched)
        cols["eow"] |= touched & (wm < we)  # any element before the end sets the end-of-window timer
        eow_due = cols["eow"] & (we <= wm)
        ev_timers, pt_timers = spec.trigger.timers(c, "")
        due = eow_due.copy()
        for t in ev_timers:
            due |= (t != NONE) & (before.wm < t) & (t <= wm)
        for t in pt_timers:
            due |= (t != NONE) & (before.proc < t) & (t <= proc)
        candidates = (touched | due) & ~cols["closed"]
        fire = candidates & spec.trigger.should_fire(c, "")
        finished = spec.trigger.on_fire(c, "", fire) & fire
        cols["eow"][we <= wm] = False
        rows = np.flatnonzero(fire)
        if len(rows):
            self.emit(rows, eow_due[rows], finished[rows], clock, out)
        if finished.any():
            self.close(np.flatnonzero(finished))

    def complete(self) -> np.ndarray:
        """Per window: a count window that holds its last element (it can get no more); False
        for every other kind."""
        w = self.spec.window
        if not isinstance(w, CountWindow):
            return np.zeros(len(self.table), dtype=bool)
        return self.table.cols["cnt"] >= w.needed(self.table.cols["ws"])

    def past_end(self, wm: int) -> np.ndarray:
        """Per window: past its end — the watermark reached it, or the count window is complete."""
        if isinstance(self.spec.window, CountWindow):
            return self.complete()
        return self.table.cols["we"] <= wm

    def close(self, rows: np.ndarray) -> None:
        """Mark ``rows`` finished: tombstones without contents until they expire."""
        if len(rows):
            self.table.closed[rows] = True
            reset_rows(self.aggs, self.table.cols, rows, finished=True)

    # ------------------------------------------------------------------ panes
    def emit(self, rows: np.ndarray, eow_due: np.ndarray, finished: np.ndarray, clock: Clock,
             out: StepOutput) -> None:
        """Fire ``rows`` (``eow_due``: their end-of-window timer is due; ``finished``: the trigger
        finished them): panes to ``out``, then the bookkeeping of the next firing."""
        spec, cols = self.spec, self.table.cols
        we = cols["we"][rows]
        timing = self._timing(rows, eow_due, clock)
        if isinstance(spec.window, CountWindow):  # complete: no more elements can come
            final = finished | self.complete()[rows]
        else:
            final = finished | (we + spec.allowed_lateness <= clock.wm)
        values = outputs(self.aggs, cols, rows, lambda: self._pane_info(rows, timing, final, clock))
        emit = self._worth_emitting(rows, values)
        gone = cols["net"][rows] <= 0 if spec.window.inherit else np.zeros(len(rows), dtype=bool)
        pts = self._pane_timestamps(rows)
        e_rows = rows[emit]
        if spec.retracting:
            prior = cols["lp_idx"][e_rows] >= 0
            if prior.any():
                out.retractions(cols["rid"][e_rows[prior]], self.retractions(e_rows[prior], clock))
        if gone.any():  # every input row of the window was retracted (inherit): only retract its pane
            cols["lp_idx"][rows[gone & emit]] = -1  # retracted above; nothing left to retract later
            emit &= ~gone
            e_rows = rows[emit]
        if emit.any():
            sel = pa.array(np.flatnonzero(emit))
            table = self._pane_table(e_rows, cols["ws"][e_rows], we[emit], [v.take(sel) for v in values],
                                     KIND_TRIGGER, timing[emit], cols["pidx"][e_rows], final[emit], pts[emit],
                                     clock)
            out.triggers(cols["rid"][e_rows], table)
        self._after_firing(rows, e_rows, emit, timing, pts, values, clock)

    def _timing(self, rows: np.ndarray, eow_due: np.ndarray, clock: Clock) -> np.ndarray:
        spec, cols = self.spec, self.table.cols
        if spec.window.mixed:  # evaluated once, when complete
            return np.full(len(rows), ON_TIME)
        if spec.window.count_based:  # a complete window is on time; before that, early
            return np.where(self.complete()[rows], ON_TIME, EARLY)
        early = clock.wm < cols["we"][rows]
        return np.where(early, EARLY, np.where(eow_due & (cols["nonspec"][rows] == 0), ON_TIME, LATE))

    def _worth_emitting(self, rows: np.ndarray, values: list[pa.Array]) -> np.ndarray:
        """Which firings make a pane: not an unchanged one under fireOnlyUpdatedPanes, and under a
        join (inner / left / outer) only panes with elements of the side(s) it needs."""
        spec = self.spec
        emit = np.ones(len(rows), dtype=bool)
        if spec.fire_only_updated_panes:
            emit = ~self._same_as_last(rows, values)
        if spec.join is not None:
            n1, n2 = join.side_counts(self.aggs, self.table.cols, rows)
            emit &= join.gate(spec.join.how, n1, n2)
        return emit

    def _pane_timestamps(self, rows: np.ndarray) -> np.ndarray:
        """``pane_timestamp`` per row: the timestamp combiner's (a count window "ends" at its last
        element; earliest / latest fall back to the end of window when no element holds)."""
        spec, cols = self.spec, self.table.cols
        we = cols["we"][rows]
        if spec.window.count_based:
            return cols["tmax"][rows]
        if spec.timestamp_combiner == "end_of_window":
            return we - 1
        if spec.timestamp_combiner == "earliest":
            h = cols["hold_min"][rows]
            return np.where(h == I64_MAX, we - 1, h)
        h = cols["hold_max"][rows]
        return np.where(h == I64_MIN, we - 1, h)

    def _after_firing(self, rows, e_rows, emit, timing, pts, values, clock: Clock) -> None:
        """Record the emitted panes (``e_rows``) for the next firing; release holds; discard the
        contents of every fired row under ``discarding``."""
        spec, cols = self.spec, self.table.cols
        cols["lp_idx"][e_rows] = cols["pidx"][e_rows]
        cols["lp_timing"][e_rows] = timing[emit]
        cols["lp_ts"][e_rows] = pts[emit]
        cols["pidx"][e_rows] += 1
        cols["nonspec"][e_rows[timing[emit] != EARLY]] += 1
        if self.track_last:
            for j, v in enumerate(values):
                py = np.empty(len(v), dtype=object)
                py[:] = v.to_pylist()
                cols[f"lo:{j}"][e_rows] = py[emit]
        keep_hold = (clock.wm < cols["we"][rows]) & spec.trigger.has_ontime_pane()
        clear = rows[~keep_hold]
        cols["hold_min"][clear] = I64_MAX
        cols["hold_max"][clear] = I64_MIN
        if spec.discarding:
            reset_rows(self.aggs, cols, rows)

    def _pane_info(self, rows: np.ndarray, timing: np.ndarray, final: np.ndarray, clock: Clock) -> PaneInfo:
        """The firing of ``rows`` as a process function sees it (the pane rows' values)."""
        cols = self.table.cols
        ws, we, seq = cols["ws"][rows], cols["we"][rows], None
        if self.spec.window.count_based:
            seq, ws, we = ws, cols["tmin"][rows], cols["tmax"][rows]
        elif self.spec.window.inclusive_end:  # record_sliding: the inclusive end, as the pane row
            we = we - 1
        keys = self.table.key_rows(rows) if self.spec.key_columns else None
        return PaneInfo(keys=keys, window_start=np.clip(ws, GLOBAL_START, GLOBAL_END),
                        window_end=np.minimum(we, GLOBAL_END), window_seq=seq, pane_timing=TIMINGS[timing].tolist(),
                        pane_index=cols["pidx"][rows].copy(), is_final=np.asarray(final, dtype=bool),
                        watermark=clock.watermark, batch_time=clock.batch_time, batch_seq=clock.seq)

    def _same_as_last(self, rows: np.ndarray, values: list[pa.Array]) -> np.ndarray:
        cols = self.table.cols
        same = cols["lp_idx"][rows] >= 0
        for j, v in enumerate(values):
            cur = v.to_pylist()
            last = cols[f"lo:{j}"][rows]
            same &= np.array([a == b for a, b in zip(cur, last)], dtype=bool)
        return same

    def retractions(self, rows: np.ndarray, clock: Clock) -> pa.Table:
        """RETRACTION rows of the last TRIGGER pane of ``rows``."""
        cols = self.table.cols
        values = [pa.array(cols[f"lo:{j}"][rows].tolist(), f.type) for j, f in enumerate(self.output_fields())]
        return self._pane_table(rows, cols["ws"][rows], cols["we"][rows], values, KIND_RETRACTION,
                                cols["lp_timing"][rows], cols["lp_idx"][rows],
                                np.zeros(len(rows), dtype=bool), cols["lp_ts"][rows], clock)

    def _pane_table(self, rows, ws, we, values, kind, timing, index, final, pts, clock: Clock) -> pa.Table:
        n = len(rows)
        arrays: list[pa.Array] = []
        if self.spec.key_columns:
            keys = self.table.key_rows(rows)
            arrays += [keys.column(i).combine_chunks() for i in range(keys.num_columns)]
        if self.spec.window.count_based:
            values = [pa.array(ws, pa.int64()), *values]
            ws, we = self.table.cols["tmin"][rows], self.table.cols["tmax"][rows]
        elif self.spec.window.inclusive_end:  # record_sliding: [start, end] both inclusive
            we = we - 1
        arrays += [ts_array(ws), ts_array(np.minimum(we, GLOBAL_END)), *values,
                   pa.repeat(pa.scalar(kind, pa.string()), n), _timing_array().take(pa.array(timing, pa.int8())),
                   pa.array(index, pa.int64()), pa.array(final, pa.bool_()),
                   ts_array(np.clip(pts, GLOBAL_START, GLOBAL_END)),
                   pa.repeat(pa.scalar(clock.watermark, TIMESTAMP), n),
                   pa.repeat(pa.scalar(clock.batch_time, TIMESTAMP), n),
                   pa.repeat(pa.scalar(clock.seq, pa.int64()), n)]
        return pa.Table.from_arrays(arrays, schema=self.pane_schema())

    # ------------------------------------------------------------------ timers
    def row_timers(self, clock: Clock, expiry: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Per window: the earliest watermark and processing time at which a step would change it
        without new elements (a pending end-of-window or trigger timer; with ``expiry``, also its
        removal at end + allowedLateness). MAX_TIME where none. A trigger timer at or before
        ``clock`` is not pending: it fired in the batch that reached it."""
        n = len(self.table)
        cols = self.table.cols
        live = ~cols["closed"]
        c = Ctx(cols, cols["we"], clock.wm, clock.proc, np.zeros(n, np.int64), np.zeros(n, np.int64),
                self.past_end(clock.wm))
        ev_t, pt_t = self.spec.trigger.timers(c, "")
        ev = np.where(live & cols["eow"], cols["we"], MAX_TIME)
        for t in ev_t:
            ev = np.minimum(ev, np.where(live & (t > clock.wm), t, MAX_TIME))
        pt = np.full(n, MAX_TIME, dtype=np.int64)
        for t in pt_t:
            pt = np.minimum(pt, np.where(live & (t > clock.proc), t, MAX_TIME))
        if expiry and not self.spec.window.count_based:
            lateness = self.spec.allowed_lateness
            ev = np.minimum(ev, np.minimum(cols["we"], MAX_TIME - lateness) + lateness)
        return ev.astype(np.int64), pt
