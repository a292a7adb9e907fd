"""The windowed operator: one ``step`` per micro-batch (Beam bundle), on whole Arrow batches.

A step takes the batch's events, the input watermark ``W`` and the processing time ``P``:

1. timestamps are read (malformed rows -> late output), windows assigned (vectorized);
2. (element, window) pairs with ``end + allowedLateness <= W`` go to the late output
   (``too_late``), pairs of windows whose trigger finished go there too (``closed``);
3. session windows merge per key (overlapping or touching);
4. the pairs are pre-aggregated per (key, window) with one Arrow ``group_by`` and folded into
   the window table (row-aligned NumPy columns);
5. triggers are evaluated once per (key, window) that got elements or has a due timer — at most
   one firing per window and step, after all elements are added (Beam's per-bundle rule);
6. panes are emitted (with RETRACTION rows under ``accumulating_and_retracting``), and windows
   with ``W >= end + allowedLateness`` are removed.

Per-element Python work is limited to what the semantics need (collect_list values, custom
accumulations); trigger evaluation is one NumPy operation per trigger node per step. A process
function (``spark_windowing.aggregates.process``) is a bound aggregate whose state is each window's buffered
elements; it is called once per fired pane.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import field_type
from spark_windowing._time import GLOBAL_END, MAX_TIME, MIN_TIME
from spark_windowing.aggregates import ranked
from spark_windowing.aggregates.binding import BoundAggregate, bind_aggregates
from spark_windowing.aggregates.partials import check_no_retractions
from spark_windowing.aggregates.preaggregate import input_columns
from spark_windowing.operator import join
from spark_windowing.operator.assign import WindowAssigner
from spark_windowing.operator.elements import NOKEY, Elements, check_input, column_micros, future_mask, read_elements
from spark_windowing.operator.firing import TriggerDriver
from spark_windowing.operator.output import Clock, StepOutput, StepResult, late_rows
from spark_windowing.windows import buffered, mixed
from spark_windowing.panes import (LATE_FIELDS, LATE_REASON_CLOSED, LATE_REASON_FUTURE, LATE_REASON_MALFORMED,
                                   LATE_REASON_TOO_LATE, pane_schema)
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.window_table import WindowTable, window_layout
from spark_windowing.triggers.tree import NONE

__all__ = ["WindowedOperator", "StepResult", "EventTimes"]

#: A batch's event times in µs and their validity mask, as ``WindowedOperator.event_times`` gives them.
EventTimes = tuple[np.ndarray, np.ndarray]

class WindowedOperator:
    """Event-time windowing with triggers, accumulation modes and retractions.

    >>> import pyarrow as pa
    >>> spec = OperatorSpec.from_options(window="tumbling(10 milliseconds)", aggregate="sum(v) AS s",
    ...                                  key_columns="k", timestamp_unit="ms")
    >>> op = WindowedOperator(spec)
    >>> _ = op.step(pa.table({"k": ["a", "a"], "ts": [1, 5], "v": [1, 2]}), watermark=None)
    >>> r = op.step(None, watermark=10_000)
    >>> r.panes.select(["k", "s", "pane_timing"]).to_pylist()
    [{'k': 'a', 's': 3, 'pane_timing': 'ON_TIME'}]

    Long class: the step's phases share the window table, the trigger driver and the assigner it
    binds; what reads the input (``elements``), assigns (``assign``), fires (``firing``) and buffers
    (``mixed``) lives in modules of its own, and what is left is the step's order of phases.
    """

    def __init__(self, spec: OperatorSpec, input_schema: pa.Schema | None = None) -> None:
        self.spec = spec
        self.wm = MIN_TIME
        self.proc = MIN_TIME
        self.seq = -1
        self.before = Clock(MIN_TIME, MIN_TIME, -1)  # the clock before this batch: timers up to it fired
        self.input_schema: pa.Schema | None = None
        self.key_counts: dict[tuple, int] = {}  # count windows: elements seen per key
        self._next_rid = 0  # the row id the window table starts from once bound (a restored snapshot's)
        self.aggs: list[BoundAggregate] = []
        self.table: WindowTable | None = None  # the windows, once bound
        self.firing: TriggerDriver | None = None  # fires them, once bound
        self.assigner: WindowAssigner | None = None  # puts elements into them, once bound
        self._track_last = spec.retracting or spec.fire_only_updated_panes
        # count(n, <duration>) / sliding(<duration>, n elements) / record_sliding(<size>):
        # buffered, evaluated in mixed.py
        self.mixed = mixed.build_logic(spec.window, spec.allowed_lateness) if spec.window.mixed else None
        if input_schema is not None:
            self.bind(input_schema)

    # ------------------------------------------------------------------ binding and layout
    @property
    def bound(self) -> bool:
        return self.input_schema is not None

    def bind(self, schema: pa.Schema) -> None:
        """Resolve columns and types against the upstream schema; raise OptionError."""
        spec = self.spec
        check_input(spec, schema)
        self.aggs = bind_aggregates(spec.aggregates, schema, spec.aggregate_text, spec.evictor,
                                        retracting_input=spec.window.inherit)
        self.input_schema = schema
        key_fields = self.key_fields()
        key_schema = pa.schema(key_fields) if key_fields else pa.schema([pa.field(NOKEY, pa.int8())])
        self.table = WindowTable(window_layout(spec, self.aggs, len(self.aggregate_fields())), key_schema,
                                 self._fresh_objects)
        self.table.next_rid = self._next_rid
        self.firing = TriggerDriver(spec, self.table, self.aggs, self.pane_schema, self.aggregate_fields)
        self.assigner = WindowAssigner(spec, self.table, self.aggs, self.firing)

    def _fresh_objects(self, column: str, m: int) -> np.ndarray:
        """``m`` new cells of the Python-object state column ``column`` (its aggregate's)."""
        return next(a for a in self.aggs if column.startswith(a.prefix)).fresh_objects(m)

    # ---- the window table's parts, as the state codec, the store and tests read them
    @property
    def cols(self) -> dict[str, np.ndarray]:
        return self.table.cols if self.table is not None else {}

    @property
    def keys(self) -> pa.Table | None:
        return self.table.keys if self.table is not None else None

    @property
    def next_rid(self) -> int:
        return self.table.next_rid if self.table is not None else self._next_rid

    @next_rid.setter
    def next_rid(self, value: int) -> None:
        self._next_rid = int(value)
        if self.table is not None:
            self.table.next_rid = int(value)

    def retype_null_columns(self, schema: pa.Schema) -> None:
        """Give input columns bound as type null (an all-null first batch) the type ``schema``
        now has. Safe because no non-null value of them has been aggregated yet."""
        assert self.input_schema is not None
        changed = {f.name: schema.field(f.name).type for f in self.input_schema
                   if pa.types.is_null(f.type) and f.name in schema.names
                   and not pa.types.is_null(schema.field(f.name).type)}
        if not changed:
            return
        self.input_schema = pa.schema([pa.field(f.name, changed.get(f.name, f.type)) for f in self.input_schema])
        assert self.table is not None
        if self.spec.key_columns:
            self.table.retype_keys(pa.schema(self.key_fields()))
        for i, a in enumerate(self.aggs):
            if a.spec.column in changed or changed.keys() & set(a.spec.carry):
                new = bind_aggregates((a.spec,), self.input_schema, self.spec.aggregate_text,
                                          retracting_input=a.keep_all)[0]
                new.index = a.index
                self.aggs[i] = new
                if a.spec.func in ranked.PYTHON_STATE:
                    continue  # its rows hold Python values, the nulls so far still right
                for name, (dt, default) in new.state_columns().items():
                    self.table.reset_column(name, dt, default)

    def key_fields(self) -> list[pa.Field]:
        assert self.input_schema is not None
        return [pa.field(k, field_type(self.input_schema, k)) for k in self.spec.key_columns]

    def aggregate_fields(self) -> list[pa.Field]:
        return [f for a in self.aggs for f in a.output_fields()]

    def pane_schema(self) -> pa.Schema:
        extra = [pa.field("window_seq", pa.int64(), nullable=False)] if self.spec.window.count_based else []
        return pane_schema(self.key_fields(), extra + self.aggregate_fields())

    def late_schema(self) -> pa.Schema:
        assert self.input_schema is not None
        hidden = {lf.name for lf in LATE_FIELDS} | {join.ON1, join.ON2}  # join's side markers: join_side says it
        own = [f for f in self.input_schema if f.name not in hidden]
        return pa.schema([*own, *LATE_FIELDS])

    def next_clock(self, watermark: int | None, processing_time: int | None, batch_seq: int | None) -> Clock:
        """The clock a step with these inputs runs under: the watermark and processing time
        never move back (None: unchanged); the sequence is ``batch_seq`` or the next one."""
        return Clock(self.wm if watermark is None else max(self.wm, int(watermark)),
                     self.proc if processing_time is None else max(self.proc, int(processing_time)),
                     self.seq + 1 if batch_seq is None else int(batch_seq))

    @property
    def clock(self) -> Clock:
        """The current watermark, processing time and batch sequence."""
        return Clock(self.wm, self.proc, self.seq)

    @property
    def num_windows(self) -> int:
        return len(self.table) if self.table is not None else 0

    # ------------------------------------------------------------------ the step
    def step(self, events: pa.Table | None, *, watermark: int | None = None,
             processing_time: int | None = None, batch_seq: int | None = None,
             event_times: EventTimes | None = None) -> StepResult:
        """Process one micro-batch. ``watermark``/``processing_time`` in µs never move back.
        ``event_times``: the events' times as ``event_times(events)`` gives them, when the caller
        has parsed them already (the Spark reader does, for the watermark); not modified."""
        clock = self.next_clock(watermark, processing_time, batch_seq)
        if clock.seq != self.seq:  # a new batch (a state store steps one batch in parts, one seq)
            self.before = self.clock
        self.wm, self.proc, self.seq = clock
        if events is not None and events.num_rows and not self.bound:
            self.bind(events.schema)
        if not self.bound:
            return StepResult(pa.table({}), pa.table({}), {"events_in": 0})
        assert self.firing is not None and self.assigner is not None
        out = StepOutput(0 if events is None else events.num_rows)
        touched, n_new, min_ts_new = _Touched(self.num_windows).arrays()
        if events is not None and events.num_rows:
            touched, n_new, min_ts_new = self._add(events, out, event_times)
        self.firing.fire(touched, n_new, min_ts_new, self.before, self.clock, out)
        if self.mixed is not None:
            self._close_buffered(self.mixed.evaluate(self._step_view()), out)
        expired = self._expire()
        return out.result(self.pane_schema(), self.late_schema(), expired_windows=expired,
                          state_rows=self.num_windows)

    # ------------------------------------------------------------------ adding elements
    def _add(self, events: pa.Table, out: StepOutput, event_times: EventTimes | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Add the batch's elements: malformed ones to the late output, the rest buffered
        (buffered kinds) or assigned to windows and folded in. Returns, per window row, whether
        it got elements, how many, and the earliest one's time (the trigger's inputs)."""
        el = self._valid_elements(events, out, event_times)
        if self.mixed is not None:
            late = self.mixed.add(self._step_view(), el.events, el.key_table, el.ts)
            if late is not None:
                self._buffered_late(late, out)
            return _Touched(self.num_windows).arrays()
        return self._assign_and_fold(el, out)

    def _valid_elements(self, events: pa.Table, out: StepOutput, event_times: EventTimes | None = None
                        ) -> Elements:
        """The batch's elements that parse (``elements.read_elements``) and are not too far ahead
        of the processing time; the others go to the late output as ``malformed`` / ``future``."""
        el, valid = read_elements(self.spec, self.key_fields(), events, event_times)
        if el.retract is not None:
            check_no_retractions(self.aggs, el.retract & valid, self.spec.aggregate_text)
        if not valid.all():
            out.late(self._late_rows(events.filter(pa.array(~valid)), LATE_REASON_MALFORMED, None, None),
                     LATE_REASON_MALFORMED)
            el = el.select(valid)
        future = future_mask(self.spec, el.ts, self.proc)
        if future.any():
            out.late(self._late_rows(el.events.filter(pa.array(future)), LATE_REASON_FUTURE, None, None),
                     LATE_REASON_FUTURE)
            el = el.select(~future)
        return el

    def _assign_and_fold(self, el: Elements, out: StepOutput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Assign windows (too-late and closed pairs to the late output) and fold the pairs in."""
        spec, assigner = self.spec, self.assigner
        assert assigner is not None
        bucketed = []
        fast = None if spec.window.count_based or spec.window.merging else self._bucketable(el.ts)
        if fast is not None and fast.any():
            part = el.select(fast)
            bucketed.append(self._add_buckets(part.events, part.key_table, part.ts))
            el = el.select(~fast)
        if spec.window.count_based:
            idx, ws = spec.window.assign_ordinals(assigner.ordinals(el.key_table, self.key_counts))
            we = np.full(len(ws), GLOBAL_END, dtype=np.int64)
        elif spec.window.inherit:
            idx, ws, we = np.arange(len(el.ts), dtype=np.int64), el.iws, el.iwe
        else:
            idx, ws, we = spec.window.assign(el.ts, el.gap)
        too_late = we + spec.allowed_lateness <= self.wm
        if too_late.any():
            self._drop_pairs(too_late, LATE_REASON_TOO_LATE, el.events, idx, ws, we, out)
            idx, ws, we = idx[~too_late], ws[~too_late], we[~too_late]
        groups = None  # g's grouping, while it holds every pair
        if spec.window.merging:
            g, closed = assigner.assign_sessions(el.key_table.take(pa.array(idx)), ws, we, self.clock, out)
        else:
            g, closed, groups = assigner.assign_fixed(el.key_table, idx, ws, we)
        if closed.any():
            self._drop_pairs(closed, LATE_REASON_CLOSED, el.events, idx, ws, we, out)
            idx, g, groups = idx[~closed], g[~closed], None
        touched = _Touched(self.num_windows)
        for rows, res in bucketed:
            touched.add(rows, res)
        if len(idx):
            pairs = input_columns(self.aggs, el.events)
            neg = el.retract[idx] if el.retract is not None else np.zeros(len(idx), dtype=bool)
            arrival = (self.seq << 32) + idx  # arrival numbers: per key, the upstream order (process buffers)
            for sign, sel in ((1, ~neg), (-1, neg)):
                if sel.any():
                    touched.add(*assigner.fold(g[sel], _rows(pairs, idx[sel]), el.ts[idx[sel]], self.clock,
                                               sign=sign, arrival=arrival[sel], groups=groups if sel.all() else None))
        return touched.arrays()

    # ------------------------------------------------------------------ buffered kinds (mixed.py)
    def _step_view(self) -> buffered.StepView:
        spec = self.spec
        return buffered.StepView(self.wm, self.seq, self.aggs, buffered.grain(
            self.input_schema, spec.timestamp_column, spec.timestamp_unit))

    def _close_buffered(self, ev: buffered.Evaluation, out: StepOutput) -> None:
        """Fire the windows a buffered kind closed (each once: ON_TIME, final), in its order, then
        send the elements it gave up to the late output."""
        assert self.table is not None and self.firing is not None
        for c in ev.closed:
            m = len(c.ws)
            rows = self.table.append(c.keys, c.ws, c.we)
            self.assigner.merge_into(rows[c.windows], c.res, c.partials)
            # first / last element time: pane_timestamp under the earliest / latest combiners
            self.cols["hold_min"][rows] = c.first_ts
            self.cols["hold_max"][rows] = c.last_ts
            self.firing.emit(rows, np.zeros(m, dtype=bool), np.ones(m, dtype=bool), self.clock, out)
            self.table.closed[rows] = True
        for late in ev.late:
            self._buffered_late(late, out)

    def _buffered_late(self, late: buffered.Late, out: StepOutput) -> None:
        out.late(self._late_rows(late.rows, LATE_REASON_TOO_LATE, late.ws, late.we), LATE_REASON_TOO_LATE)

    def _late_rows(self, events: pa.Table, reason: str, ws: np.ndarray | None, we: np.ndarray | None) -> pa.Table:
        return late_rows(events, self.late_schema(), reason, ws, we, self.clock)

    # The sliding-window bucket path, behind two seams the test of its equivalence with the
    # per-pair path replaces (tests/core/test_sliding_buckets.py).
    def _bucketable(self, ts: np.ndarray) -> np.ndarray | None:
        return self.assigner.bucketable(ts, self.clock)

    def _add_buckets(self, events: pa.Table, key_table: pa.Table, ts: np.ndarray) -> tuple[np.ndarray, dict]:
        return self.assigner.add_buckets(events, key_table, ts, self.clock)

    def _drop_pairs(self, mask, reason, events, idx, ws, we, out: StepOutput) -> None:
        """Send the (element, window) pairs in ``mask`` to the late output with ``reason``."""
        sel = np.flatnonzero(mask)
        out.late(self._late_rows(events.take(pa.array(idx[sel])), reason, ws[sel], we[sel]), reason)

    def event_times(self, events: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Event times in µs and a validity mask (null / unparseable -> invalid)."""
        return self.column_micros(events, self.spec.timestamp_column)

    def column_micros(self, events: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A time column (timestamp, date, ISO string, or numeric epoch in ``timestampUnit``,
        default ms) as µs, with a validity mask."""
        return column_micros(self.spec, events, name)

    # ------------------------------------------------------------------ row management
    def _expire(self) -> int:
        if self.num_windows == 0:
            return 0
        if self.spec.window.count_based:  # a finished or complete count window can get no more elements
            assert self.firing is not None
            expired = self.table.closed | self.firing.complete()
        else:
            expired = self.table.we + self.spec.allowed_lateness <= self.wm
        count = int(expired.sum())
        if count:
            self.table.keep(~expired)
        return count

    # ------------------------------------------------------------------ timers (for the source)
    def next_timers(self) -> tuple[int, int]:
        """(earliest pending event-time timer, earliest processing-time timer); MAX_TIME if none.

        The Spark source schedules a micro-batch without new input once the watermark or the
        clock reaches these.
        """
        if self.mixed is not None:
            return self.mixed.next_timer(), MAX_TIME
        if self.num_windows == 0:
            return MAX_TIME, MAX_TIME
        ev, pt = self.row_timers(expiry=False)
        return int(ev.min(initial=MAX_TIME)), int(pt.min(initial=MAX_TIME))

    def row_timers(self, expiry: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Per window: the earliest watermark and processing time at which a step would change it
        without new elements (a pending end-of-window or trigger timer; with ``expiry``, also its
        removal at end + allowedLateness). MAX_TIME where none. The state store keeps these per
        key bucket, so a bucket out of memory is loaded exactly when a step could change it."""
        assert self.firing is not None
        return self.firing.row_timers(self.clock, expiry)

    # ------------------------------------------------------------------ rows in and out (state store)
    def import_rows(self, keys: pa.Table, cols: dict[str, np.ndarray]) -> None:
        """Append windows (key rows and every state column, as ``state_codec.table_to_cols``
        decodes them), in any order: panes are ordered by row id."""
        assert self.table is not None
        self.table.import_rows(keys, cols)

    def drop_rows(self, drop: np.ndarray) -> None:
        """Remove the windows where ``drop`` is true from memory (they live on in the store)."""
        self.table.keep(~drop)


def _rows(table: pa.Table, idx: np.ndarray) -> pa.Table:
    """``table.take(idx)``, without the copy when ``idx`` is every row in order (one window per
    element, none dropped)."""
    n = table.num_rows
    if len(idx) == n and (n == 0 or (idx[0] == 0 and idx[-1] == n - 1 and (n < 2 or (np.diff(idx) == 1).all()))):
        return table
    return table.take(pa.array(idx))


class _Touched:
    """Per window row: got elements this step, how many, the earliest one's time."""

    def __init__(self, n: int) -> None:
        self.touched = np.zeros(n, dtype=bool)
        self.n_new = np.zeros(n, dtype=np.int64)
        self.min_ts = np.full(n, NONE, dtype=np.int64)

    def add(self, rows: np.ndarray, res: dict) -> None:
        self.touched[rows] = True
        self.n_new[rows] += res["n"]
        self.min_ts[rows] = np.minimum(self.min_ts[rows], res["min_ts"])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.touched, self.n_new, self.min_ts
