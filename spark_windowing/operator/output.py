"""What a step returns: ``StepResult`` (panes, late rows, metrics), collected by ``StepOutput``.

Panes are ordered by the row id of their window (creation order), not by where a window happens
to sit in memory, so a step over lazily loaded key buckets (``store.StateStore``) gives the same
order as one in-memory step. Per window: the RETRACTION of its previous pane, then its new
TRIGGER pane; the retractions of sessions merged away in this step come before everything else.
``StepOutput`` is the only place this order is encoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._arrow import empty_table
from spark_windowing._time import GLOBAL_END, MIN_TIME
from spark_windowing.panes import KIND_RETRACTION, KIND_TRIGGER, TIMESTAMP

_MERGED_FIRST = 1 << 62  # sort key offset: retractions of merged-away sessions first


@dataclass
class StepResult:
    """What one step produced: panes (pane schema), late rows, and counters."""

    panes: pa.Table
    late: pa.Table
    metrics: dict[str, int] = field(default_factory=dict)
    order: np.ndarray | None = None  # the panes' sort keys (row id based), to merge partial steps


@dataclass(frozen=True)
class Clock:
    """The step's watermark and processing time (µs) and batch sequence, as pane and late rows
    carry them."""

    wm: int
    proc: int
    seq: int

    def __iter__(self):
        return iter((self.wm, self.proc, self.seq))

    @property
    def watermark(self) -> int | None:
        """The watermark column's value: null before the first watermark."""
        return None if self.wm <= MIN_TIME else min(self.wm, GLOBAL_END)

    @property
    def batch_time(self) -> int:
        return max(self.proc, 0)


def ts_array(values: np.ndarray) -> pa.Array:
    """µs as a timestamp column."""
    return pa.array(values, pa.int64()).cast(TIMESTAMP)


class StepOutput:
    """Collects one step's panes and late rows, and counts them."""

    def __init__(self, events_in: int) -> None:
        self.metrics: dict[str, int] = {"events_in": events_in, "malformed": 0, "too_late": 0, "closed": 0}
        self._panes: list[tuple[np.ndarray, pa.Table]] = []
        self._late: list[pa.Table] = []

    def triggers(self, rids: np.ndarray, table: pa.Table) -> None:
        """TRIGGER panes of the windows with row ids ``rids`` (one row each, in that order)."""
        self._panes.append((rids * 2 + 1, table))

    def retractions(self, rids: np.ndarray, table: pa.Table) -> None:
        """RETRACTION rows of the windows ``rids``: before their new TRIGGER pane."""
        self._panes.append((rids * 2, table))

    def merged_away(self, rids: np.ndarray, table: pa.Table) -> None:
        """RETRACTION rows of sessions merged into others in this step: before every other pane."""
        self._panes.append((rids * 2 - _MERGED_FIRST, table))

    def late(self, rows: pa.Table, reason: str) -> None:
        """Late rows (late schema) sent to the late output for ``reason``, counted under it."""
        self.metrics[reason] = self.metrics.get(reason, 0) + rows.num_rows
        self._late.append(rows)

    def result(self, pane_schema: pa.Schema, late_schema: pa.Schema, **counts: int) -> StepResult:
        """The step's result: panes in order, late rows in arrival order, metrics plus ``counts``."""
        if self._panes:
            order_key = np.concatenate([k for k, _ in self._panes])
            panes = pa.concat_tables([t for _, t in self._panes])
            if len(order_key) > 1 and (order_key[1:] < order_key[:-1]).any():  # else in order already
                order = np.argsort(order_key, kind="stable")
                panes, order_key = panes.take(pa.array(order)), order_key[order]
        else:
            panes, order_key = empty_table(pane_schema), np.zeros(0, dtype=np.int64)
        late = pa.concat_tables(self._late) if self._late else empty_table(late_schema)
        metrics = dict(self.metrics)
        metrics.update({
            "panes_trigger": int(pc.sum(pc.equal(panes.column("kind"), KIND_TRIGGER)).as_py() or 0),
            "panes_retraction": int(pc.sum(pc.equal(panes.column("kind"), KIND_RETRACTION)).as_py() or 0),
            "late_dropped": late.num_rows, **counts,
        })
        return StepResult(panes, late, metrics, order_key)


def late_rows(events: pa.Table, schema: pa.Schema, reason: str, ws: np.ndarray | None,
              we: np.ndarray | None, clock: Clock) -> pa.Table:
    """``events`` as late rows of ``schema`` (the input columns, then ``reason``, the window they
    missed — null for malformed rows — and the step's watermark, batch time and sequence)."""
    n = events.num_rows
    extra = {
        "reason": pa.array([reason] * n, pa.string()),
        "window_start": ts_array(ws) if ws is not None else pa.nulls(n, TIMESTAMP),
        "window_end": ts_array(np.minimum(we, GLOBAL_END)) if we is not None else pa.nulls(n, TIMESTAMP),
        "watermark": pa.array([clock.watermark] * n, pa.int64()).cast(TIMESTAMP),
        "batch_time": pa.array([clock.batch_time] * n, pa.int64()).cast(TIMESTAMP),
        "batch_seq": pa.array([clock.seq] * n, pa.int64()),
    }
    arrays = []
    for f in schema:
        if f.name in extra:
            arrays.append(extra[f.name])
        else:
            col = events.column(f.name) if f.name in events.column_names else pa.nulls(n, f.type)
            arrays.append(col.cast(f.type) if not col.type.equals(f.type) else col)
    return pa.Table.from_arrays(arrays, schema=schema)
