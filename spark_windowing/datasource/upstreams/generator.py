"""The ``generator`` upstream: deterministic synthetic click events, for examples, tests and
benchmarks.

A position is the number of events generated so far (an int); event ``i`` is a pure function of
``(seed, i)``, so a replayed batch ``[start, end)`` generates exactly the same events. Each batch
takes ``eventsPerBatch`` events (or the ``maxEventsPerBatch`` read limit), up to ``totalEvents``
if given; ``Trigger.AvailableNow`` stops there (the generator bounds itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._hash import mix as _mix
from spark_windowing._time import parse_duration
from spark_windowing.datasource.options.values import fraction_value, instant_value, suffixed
from spark_windowing.datasource.upstreams.base import Upstream

GENERATOR_SCHEMA = pa.schema([
    ("user_id", pa.string()), ("page", pa.string()),
    ("event_time", pa.timestamp("us", tz="UTC")), ("amount", pa.float64()), ("event_id", pa.int64()),
])
_PAGES = np.array(["home", "search", "product", "cart", "checkout"], dtype=object)


@dataclass(frozen=True)
class GeneratorConfig:
    """Deterministic synthetic events (see ``generate``)."""

    events_per_batch: int = 1000
    total_events: int | None = None
    keys: int = 100
    event_interval: int = 10_000          # µs of event time between consecutive events
    disorder: int = 0                     # max µs an event is shifted back (out-of-orderness)
    late_fraction: float = 0.0            # fraction of events shifted back far (late data)
    seed: int = 42
    start_time: int = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


class CountedUpstream(Upstream):
    """An upstream whose position is the count of events generated so far (an int): a batch
    ``[start, end)`` is ``batch_and_total()[0]`` more events (or the ``max_rows`` read limit), up
    to the total; ``Trigger.AvailableNow`` stops there. Reads nothing from storage."""

    needs_path = False
    limits_files = False

    def batch_and_total(self) -> tuple[int, int | None]:
        """(events per batch, total events or None: unbounded)."""
        raise NotImplementedError

    def initial_position(self) -> int:
        return 0

    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> int:
        """A batch more events (or ``max_rows``), up to the total; files do not count."""
        per_batch, total = self.batch_and_total()
        end = start + (max_rows or per_batch)
        if total is not None:
            end = min(end, total)
        return max(start, end)

    def available_now_target(self) -> None:
        return None

    def planned_events(self, start: Any, end: Any) -> int:
        """The positions between (NEXMark's: stream positions, of which one kind is a share)."""
        return int(end) - int(start)

    def plan(self, start: Any, end: Any) -> list[int]:
        return [int(start), int(end)]


class GeneratorUpstream(CountedUpstream):
    """Positions: the count of events generated (int). Settings: a ``GeneratorConfig``."""

    OPTIONS = ("eventsperbatch", "totalevents", "keys", "eventinterval", "disorder", "latefraction", "seed",
               "starttime")

    @classmethod
    def parse_options(cls, options: dict[str, str], spec, suffix: str = "") -> GeneratorConfig:
        return parse_generator_options(options, suffix)

    @property
    def settings(self) -> GeneratorConfig:
        return self.cfg.settings

    def schema(self) -> pa.Schema:
        declared = self.declared_schema()
        return GENERATOR_SCHEMA if declared is None else declared

    def batch_and_total(self) -> tuple[int, int | None]:
        return self.settings.events_per_batch, self.settings.total_events

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        """Every column (the events are generated whole)."""
        return generate(self.settings, planned[0], planned[1])


def generate(g: GeneratorConfig, start: int, end: int) -> pa.Table:
    """Events ``start..end-1``; deterministic in ``(seed, index)``."""
    i = np.arange(start, end, dtype=np.int64)
    h = _mix(i, g.seed)
    key = (h % g.keys).astype(np.int64)
    base = g.start_time + i * g.event_interval
    jitter = (_mix(i, g.seed + 1) % (g.disorder + 1)).astype(np.int64) if g.disorder else 0
    t = base - jitter
    if g.late_fraction > 0:
        late = (_mix(i, g.seed + 2) % 1_000_000) < int(g.late_fraction * 1_000_000)
        t = np.where(late, t - 100 * max(g.disorder, g.event_interval) - 3_600_000_000, t)
    amount = ((_mix(i, g.seed + 3) % 10_000) / 100.0).astype(np.float64)
    page = _PAGES[(_mix(i, g.seed + 4) % len(_PAGES)).astype(np.int64)]
    users = pc.binary_join_element_wise(pa.array(["user"] * len(i), pa.string()), pc.cast(pa.array(key), pa.string()), "-")
    return pa.table({
        "user_id": users, "page": pa.array(page.tolist(), pa.string()),
        "event_time": pa.array(t, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "amount": pa.array(amount), "event_id": pa.array(i),
    }, schema=GENERATOR_SCHEMA)


# ---------------------------------------------------------------------- options
def parse_generator_options(options: dict[str, str], suffix: str = "") -> GeneratorConfig:
    """The generator's options; a join's generated stream 2 reads ``<option>2``, defaulting to the
    unsuffixed option, and ``seed2`` defaults to ``seed + 1`` (a different stream, not a copy)."""
    get, num = suffixed(options, suffix)
    seed = num("seed", default=42)
    if suffix and options.get("seed" + suffix) is None:
        seed = (seed or 0) + 1
    return GeneratorConfig(
        events_per_batch=num("eventsPerBatch", minimum=1, default=1000),
        total_events=num("totalEvents", minimum=0),
        keys=num("keys", minimum=1, default=100),
        event_interval=parse_duration(get("eventInterval", "10 milliseconds"), option="eventInterval" + suffix,
                                      allow_zero=False),
        disorder=parse_duration(get("disorder", "0 seconds"), option="disorder" + suffix),
        late_fraction=fraction_value(get("lateFraction", "0"), option="lateFraction" + suffix),
        seed=seed,
        start_time=GeneratorConfig.start_time if get("startTime") is None else
        instant_value(get("startTime"), option="startTime" + suffix),
    )
