"""The common part of buffered window kinds (``spark_windowing.windows.mixed`` describes them): a
per-operator buffer of elements, and what its evaluation hands back to the operator.

The operator calls only ``add`` (buffer a batch's valid elements; get back those already late),
``evaluate`` (the windows the watermark closes, already aggregated, and elements given up) and
``next_timer``; it then creates, fires and closes the windows itself. Nothing here calls back into
the operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import factorize, field_type
from spark_windowing._groups import Ranges
from spark_windowing._time import GLOBAL_END, MAX_TIME, UNIT_FACTORS
from spark_windowing.aggregates.binding import BoundAggregate
from spark_windowing.aggregates.partials import COMBINABLE, numpy_partials
from spark_windowing.aggregates.preaggregate import input_columns, preaggregate
from spark_windowing.windows.kinds import WindowFn


@dataclass(frozen=True)
class StepView:
    """What buffered logic sees of the operator's step: the watermark ``wm``, the batch ``seq``
    (arrival numbers of folded elements), the bound aggregates and the timestamps' grain."""

    wm: int
    seq: int
    aggs: list[BoundAggregate]
    grain: int = 1


@dataclass(frozen=True)
class Closed:
    """Windows one evaluation closes, each to fire once (ON_TIME, final), in the order given.

    Window ``w`` has key row ``keys[w]`` and bounds ``ws[w]``/``we[w]`` (count-based kinds:
    ``ws`` = window_seq, ``we`` = GLOBAL_END). Its contents are aggregated already:
    ``partials``/``res`` (``aggregates.preaggregate.preaggregate``'s form) hold the rows for windows
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
        return input_columns(view.aggs, events)

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
        folded = self._foldranges(view, lo, hi, order)
        if folded is None:
            lengths = hi - lo
            win = np.repeat(np.arange(m), lengths)
            pos = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + lo[win]
            src = order[pos]
            values = input_columns(view.aggs, self.values)
            arrival = (view.seq << 32) + np.arange(len(win), dtype=np.int64)
            folded = preaggregate(view.aggs, values.take(pa.array(src)), win, self.ts[src], None, arrival)
        windows, res, partials = folded
        return [Closed(self.keys.take(pa.array(rep)), seq.astype(np.int64),
                       np.full(m, GLOBAL_END, dtype=np.int64) if we is None else we.astype(np.int64),
                       windows, res, partials, self.ts[order[lo]], self.ts[order[hi - 1]])]

    def _foldranges(self, view: StepView, lo: np.ndarray, hi: np.ndarray, order: np.ndarray
                     ) -> tuple[np.ndarray, dict, dict] | None:
        """Aggregate each window's elements ``order[lo[w]:hi[w]]`` straight from the ranges
        (``_groups.Ranges``, the aggregates' one partial algebra ``aggregates.partials.numpy_partials``),
        without expanding (element, window) pairs: memory follows the windows, not windows x
        elements per window (record_sliding windows overlap heavily). Only for sum / avg / count /
        min / max over integer or float columns; returns None otherwise, and the caller folds the
        expanded pairs. Returns (windows, res, partials), windows ``0..m-1``."""
        aggs = view.aggs
        if not aggs or any(a.spec.func not in COMBINABLE for a in aggs):
            return None
        assert self.values is not None
        columns = list(dict.fromkeys(a.spec.column for a in aggs if a.spec.column is not None))
        for name in columns:
            t = self.values.column(name).type
            if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
                return None
        return numpy_partials(aggs, self.values.select(columns).take(pa.array(order)), Ranges(lo, hi),
                              self.ts[order], None)

    # ---- snapshots (pickled by spark_windowing.state.snapshot)
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


class TimestampOrdinals(MixedLogic):
    """Buffered kinds that number each key's elements in timestamp order (ties: arrival order)
    once the watermark has passed them (``ts < watermark``), continuing the key's count, and
    close a window at every ``every``-th: ``sliding(d, n elements)`` and count windows with
    ``countOrder=timestamp``. An element with ``ts < watermark`` on arrival is late (its place in
    the key's order may have been counted already). Later elements are never numbered before
    earlier-numbered ones: an element is numbered under a watermark it was not behind when it
    arrived, so every element numbered before it had a smaller timestamp.

    ``every``: every ``every``-th element of a key closes a window; a late element's row names the
    window ``[ts, ts + late_span)``.

    State: per buffered element its number (``ordinal``, -1 until numbered); per key the elements
    numbered so far (``counted``, keyed by ``counted_keys``), kept forever like count windows'
    per-key counts."""

    def __init__(self, window: WindowFn, every: int, late_span: int) -> None:
        super().__init__(window)
        self.every, self.late_span = every, late_span
        self.ordinal = np.empty(0, dtype=np.int64)
        self.counted_keys: pa.Table | None = None
        self.counted = np.empty(0, dtype=np.int64)

    def late(self, view: StepView, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return ts < view.wm, ts, ts + self.late_span

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

    def _open_by_key(self, kid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The elements not numbered yet sorted by (key id ``kid``, ts, arrival), and each one's
        rank within its key."""
        sel = np.flatnonzero(self.ordinal < 0)
        sel = sel[np.lexsort((self.arr[sel], self.ts[sel], kid[sel]))]
        g = kid[sel]
        head = np.ones(len(g), dtype=bool)
        head[1:] = g[1:] != g[:-1]
        starts = np.flatnonzero(head)
        return sel, np.arange(len(g)) - np.repeat(starts, np.diff(np.append(starts, len(g))))

    def _count(self, wm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Number the elements the watermark ``wm`` passed since the last evaluation. Returns
        (buffer positions of those that close a window, their numbers, every buffered element's
        key row), or None when the watermark passed no new element."""
        if not ((self.ordinal < 0) & (self.ts < wm)).any():
            return None
        krow = self._key_rows()
        sel, rank = self._open_by_key(krow)
        passed = self.ts[sel] < wm  # sorted by ts per key: a prefix of each key's run
        sel, g = sel[passed], krow[sel[passed]]
        ordn = self.counted[g] + rank[passed]
        self.ordinal[sel] = ordn
        np.add.at(self.counted, g, 1)
        trig = (ordn + 1) % self.every == 0
        return sel[trig], ordn[trig], krow

    def next_timer(self) -> int:
        """Just past the time of the element that would close a window next (if no earlier one arrives)."""
        if len(self.ts) == 0 or not (self.ordinal < 0).any():
            return MAX_TIME
        assert self.keys is not None
        krow = self._key_rows(add=False)  # a query: no new keys are recorded
        sel, rank = self._open_by_key(factorize([self.keys])[0])
        counted = np.append(self.counted, 0)[np.where(krow[sel] >= 0, krow[sel], len(self.counted))]
        hit = rank == self.every - 1 - counted % self.every
        return int(self.ts[sel[hit]].min()) + 1 if hit.any() else MAX_TIME

    def _extra_state(self):
        return {"ordinal": self.ordinal, "counted_keys": self.counted_keys, "counted": self.counted}

    def _restore_extra(self, doc):
        self.ordinal, self.counted_keys, self.counted = doc["ordinal"], doc["counted_keys"], doc["counted"]


def ranks(*arrays: np.ndarray) -> tuple[list[np.ndarray], int]:
    """Dense ranks of int64 values shared across ``arrays`` (so key·R + rank cannot overflow)."""
    values = np.unique(np.concatenate(arrays))
    return [np.searchsorted(values, a) for a in arrays], len(values) + 1


def grain(schema: pa.Schema | None, column: str | None, unit: str | None) -> int:
    """The timestamps' grain in µs: the unit of integer epoch columns (Kafka's are milliseconds),
    else 1 µs (timestamp, date, string and floating-point columns)."""
    t = field_type(schema, column) if column is not None and schema is not None else None
    if t is not None and pa.types.is_integer(t):
        return UNIT_FACTORS[unit or "ms"]
    return 1
