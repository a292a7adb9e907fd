"""What a shard's upstream events say for the next watermark (``batch_maxima``): the parsed event
times (handed to the step, parsed once), the largest valid event time per stream and of a
watermark column, and the counts and samples of unreadable rows the driver's ``malformedEvents``
check reads. They go into the shard's report (``report_fields``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from spark_windowing.operator import join
from spark_windowing.datasource.source.checks import corrupt_sample, malformed_sample
from spark_windowing.operator.elements import corrupt_mask, future_mask


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

    def report_fields(self) -> dict:
        """The shard report's fields from these maxima (``shard_reports``)."""
        return {"max_event_us": self.max_event, "max_col_us": self.max_col, "max_event2_us": self.max_event2,
                "time_malformed": self.time_malformed, "time_sample": self.time_sample,
                "corrupt": self.corrupt, "corrupt_sample": self.corrupt_sample}


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
