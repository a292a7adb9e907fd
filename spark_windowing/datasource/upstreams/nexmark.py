"""The ``nexmark`` upstream: NEXMark's auction events (``spark_windowing.nexmark``) as a stream.

A position is the number of stream positions generated so far (an int); a batch ``[start, end)``
yields the events of one kind (``nexmarkEvents``: ``bid``, ``person`` or ``auction``) among
them, each a pure function of ``(seed, event id)``, so a replay yields the same rows. A query
over two kinds is a join of two ``nexmark`` streams (NEXMark q8: ``source2=nexmark``,
``nexmarkEvents2=auction``), which see the same event numbers. ``eventsPerBatch`` positions a
batch (or the ``maxEventsPerBatch`` read limit), up to ``totalEvents``; ``Trigger.AvailableNow``
stops there. Event times follow ``eventsPerSecond`` from ``startTime`` (Beam's 2015-07-15).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spark_windowing._time import parse_duration
from spark_windowing.datasource.options.values import fraction_value, instant_value, suffixed
from spark_windowing.datasource.upstreams.generator import CountedUpstream
from spark_windowing.errors import OptionError
from spark_windowing.nexmark import BASE_TIME, KINDS, SCHEMAS, NexmarkConfig, generate


class NexmarkUpstream(CountedUpstream):
    """Positions: the count of stream positions generated (int). Settings: ``(kind, NexmarkConfig,
    events per batch)``."""

    OPTIONS = ("nexmarkevents", "eventsperbatch", "totalevents", "eventspersecond", "starttime",
               "outofordergroupsize", "probdelayedevent", "occasionaldelay", "seed")

    @classmethod
    def parse_options(cls, options: dict[str, str], spec, suffix: str = "") -> Any:
        get, num = suffixed(options, suffix)
        kind = (get("nexmarkEvents", "bid") or "").strip().lower()
        if kind not in KINDS:
            raise OptionError("nexmarkEvents" + suffix, get("nexmarkEvents"), ", ".join(KINDS))
        start = get("startTime")
        config = NexmarkConfig(
            events_per_second=num("eventsPerSecond", minimum=1, default=10_000),
            total_events=num("totalEvents", minimum=0),
            start_time=BASE_TIME if start is None else instant_value(start, option="startTime" + suffix),
            out_of_order_group_size=num("outOfOrderGroupSize", minimum=1, default=1),
            prob_delayed_event=fraction_value(get("probDelayedEvent", "0"), option="probDelayedEvent" + suffix),
            occasional_delay=parse_duration(get("occasionalDelay", "3 seconds"), option="occasionalDelay" + suffix),
            seed=num("seed", minimum=0, default=0))
        return kind, config, num("eventsPerBatch", minimum=1, default=10_000)

    def schema(self) -> pa.Schema:
        return SCHEMAS[self.cfg.settings[0]]

    def batch_and_total(self) -> tuple[int, int | None]:
        _, g, per_batch = self.cfg.settings
        return per_batch, g.total_events

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        kind, g, _ = self.cfg.settings
        table = generate(g, planned[0], planned[1], kind)
        return table.select(columns) if columns else table
