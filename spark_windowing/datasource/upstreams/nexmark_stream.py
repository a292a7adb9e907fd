"""The ``nexmark`` upstream: NEXMark's auction events (``spark_windowing.datasource.upstreams.nexmark_events``) as a stream.

A position is the number of stream positions generated so far (an int); a batch ``[start, end)``
yields the events of one kind (``nexmarkEvents``: ``bid``, ``person`` or ``auction``) among
them, each a pure function of ``(seed, event id)``, so a replay yields the same rows. A query
over two kinds is a join of two ``nexmark`` streams (NEXMark q8: ``source2=nexmark``,
``nexmarkEvents2=auction``), which see the same event numbers. ``eventsPerBatch`` positions a
batch (or the ``maxEventsPerBatch`` read limit), up to ``totalEvents``; ``Trigger.AvailableNow``
stops there. Event times follow ``eventsPerSecond`` from ``startTime`` (Beam's 2015-07-15).

``rate`` (events per second of wall-clock time) makes it a live source, as Spark's ``rate``
source: a batch holds the positions due since the stream (re)started in this process, at most
``eventsPerBatch`` (or ``maxEventsPerBatch``); none due, no batch. Offsets record what each batch
read, so a replayed batch reads the same positions.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from spark_windowing._time import parse_duration
from spark_windowing.datasource.options.values import fraction_value, instant_value, suffixed
from spark_windowing.datasource.upstreams.generator import CountedUpstream
from spark_windowing.errors import OptionError
from spark_windowing.datasource.upstreams.nexmark_events import BASE_TIME, KINDS, SCHEMAS, NexmarkConfig, generate


class NexmarkUpstream(CountedUpstream):
    """Positions: the count of stream positions generated (int). Settings: ``(kind, NexmarkConfig,
    events per batch)``."""

    OPTIONS = ("nexmarkevents", "eventsperbatch", "totalevents", "eventspersecond", "starttime",
               "outofordergroupsize", "probdelayedevent", "occasionaldelay", "seed", "rate")

    #: (monotonic seconds, position) when this stream first asked for positions, with ``rate``
    _paced_from: tuple[float, int] | None = None

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
        return kind, config, num("eventsPerBatch", minimum=1, default=10_000), num("rate", minimum=1)

    def schema(self) -> pa.Schema:
        return SCHEMAS[self.cfg.settings[0]]

    def batch_and_total(self) -> tuple[int, int | None]:
        _, g, per_batch, _ = self.cfg.settings
        return per_batch, g.total_events

    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> int:
        """A batch more positions, up to the total; with ``rate``, no further than those due by
        the wall clock since the first call (the module docstring)."""
        end = super().latest_position(start, max_files, max_rows)
        rate = self.cfg.settings[3]
        if rate is None:
            return end
        now = time.monotonic()
        if self._paced_from is None:
            self._paced_from = (now, int(start))
        since, first = self._paced_from
        return max(int(start), min(end, first + int((now - since) * rate)))

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        kind, g = self.cfg.settings[:2]
        table = generate(g, planned[0], planned[1], kind)
        return table.select(columns) if columns else table
