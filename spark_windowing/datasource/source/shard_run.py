"""One shard's micro-batch in the stream reader: what its events say for the next watermark
(``batch_maxima``), the run between its step and its writes (``ShardRun``), and the report it
leaves for the driver's next ``latestOffset`` (``shard_report``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from spark_windowing.operator import join
from spark_windowing._time import MIN_TIME
from spark_windowing.datasource.source.checks import corrupt_sample, malformed_sample
from spark_windowing.operator.elements import corrupt_mask, future_mask


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


@dataclass
class Maxima:
    """What a shard's events say for the next watermark: the parsed event times (handed to the
    step), the max valid event time (of stream 1 for a join) and of stream 2, the max of a
    watermark column."""
    event_times: Any = None
    watermark_times: Any = None     # (times, mask of the events that may move a watermark)
    max_event: int | None = None
    max_col: int | None = None
    max_event2: int | None = None
    time_malformed: int = 0         # events whose event time cannot be read
    time_sample: str | None = None  # one such value, as shown in the malformedEvents error
    corrupt: int = 0                # rows the upstream could not read (``_corrupt_record``)
    corrupt_sample: str | None = None  # where one came from and how it began


@dataclass
class ShardRun:
    """One shard's micro-batch between ``start_shard`` and ``finish_shard``: its state (in memory,
    stepped but not yet written), its events until the step, what the step left for the writes."""
    shard: int
    end: dict
    store: Any
    how: str                        # how its state was had (shard_state: continued, caught up, reopened)
    events: Any                     # the shard's events (None after the step)
    key_hash: Any
    maxima: Maxima
    upstream_report: dict
    t0: float
    t0_wall: float
    t_read: float
    t_step: float = 0.0
    events_in: int = 0
    metrics: dict = field(default_factory=dict)
    late: list = field(default_factory=list)


def batch_maxima(cfg, op, events: pa.Table, batch_time: int) -> Maxima:
    out = Maxima()
    if not events.num_rows:
        return out
    ts, valid = out.event_times = op.event_times(events)  # parsed once: the step reuses them
    # an event too far ahead of the batch time (maxEventTimeAhead) goes to the late output as
    # ``future`` in the step, and moves no watermark: left out of every maximum here
    usable = valid & ~future_mask(cfg.spec, ts, batch_time)
    out.watermark_times = (ts, usable)
    if cfg.stream2 is not None:  # per-stream maxima: each stream has its own watermark
        side1, side2 = join.side_masks(events)
        if (usable & side2).any():
            out.max_event2 = int(ts[usable & side2].max())
        valid, usable = valid & side1, usable & side1
    corrupt = corrupt_mask(events)   # rows the upstream could not read: data, not a wrong column
    if corrupt.any():
        out.corrupt, out.corrupt_sample = corrupt_sample(events, corrupt)
    if not (valid | corrupt).all() and cfg.stream2 is None:  # malformedEvents: counted, one value shown
        out.time_malformed, out.time_sample = malformed_sample(events, cfg.spec.timestamp_column, valid | corrupt)
    if usable.any():
        out.max_event = int(ts[usable].max())
    if cfg.watermark.kind == "column":
        wm_us, wm_ok = op.column_micros(events, cfg.watermark.column)
        wm_ok = wm_ok & ~future_mask(cfg.spec, wm_us, batch_time)
        out.max_col = int(wm_us[wm_ok].max()) if wm_ok.any() else None
    return out


def shard_report(store, events_in: int, m: dict[str, int], written: int, t0: float, maxima: Maxima) -> dict:
    """The shard's report of a micro-batch (``shard_reports``): counts for the
    progress line, and the maxima and next timers the driver's next ``latestOffset`` reads."""
    ev_timer, pt_timer = store.next_timers()
    op = store.op
    report = {
        "events_in": int(events_in), "panes_trigger": m.get("panes_trigger", 0),
        "panes_retraction": m.get("panes_retraction", 0), "late_dropped": m.get("late_dropped", 0),
        "malformed": m.get("malformed", 0), "future": m.get("future", 0),
        "watermark_us": None if op.wm <= MIN_TIME else int(op.wm),
        "state_rows": store.num_windows, "state_bytes": written,
        "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
        "max_event_us": maxima.max_event, "max_col_us": maxima.max_col, "max_event2_us": maxima.max_event2,
        "next_event_timer": int(ev_timer), "next_proc_timer": int(pt_timer),
        "time_malformed": maxima.time_malformed, "time_sample": maxima.time_sample,
        "corrupt": maxima.corrupt, "corrupt_sample": maxima.corrupt_sample,
    }
    return report

