"""A line-by-line Python port of Apache Storm's event-time windowing (``storm-client``,
``org.apache.storm.windowing``): ``WindowManager`` with ``WatermarkTimeTriggerPolicy``,
``WatermarkCountTriggerPolicy``, ``WatermarkCountEvictionPolicy`` and
``WatermarkTimeEvictionPolicy``, plus the late check of ``WaterMarkEventGenerator.track``
(``ts >= lastWaterMarkTs``). One ``StormWindow`` is one Storm window manager (Storm has no per-key
windows: a test runs one per key). Used as an oracle for ``count(n, <duration>)`` and
``sliding(<duration>, n elements)``; see ``spark_windowing/windows/mixed.py`` for where we deviate.

Not ported: ``compactWindow`` (a partial scan every 100 events — keep streams shorter than that per
manager), processing-time policies, persistence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXPIRE, PROCESS, KEEP, STOP = "EXPIRE", "PROCESS", "KEEP", "STOP"
_LONG_MIN, _LONG_MAX, _INT_MAX = -(2 ** 63), 2 ** 63 - 1, 2 ** 31 - 1


@dataclass
class Activation:
    reference_time: int
    events: list          # payloads in the window, queue (arrival) order
    new_events: list      # those not in the previous activation


class WatermarkCountEviction:
    """WatermarkCountEvictionPolicy(threshold) on top of CountEvictionPolicy."""

    def __init__(self, threshold: int) -> None:
        self.threshold, self.current_count, self.processed, self.reference = threshold, 0, 0, None

    def evict(self, ts: int) -> str:
        if ts <= self.reference and self.processed < self.current_count:
            if self.current_count > self.threshold:   # CountEvictionPolicy.evict
                self.current_count -= 1
                return EXPIRE
            self.processed += 1
            return PROCESS
        return KEEP

    def set_context(self, reference: int, current_count: int | None, sliding_count: int | None) -> None:
        self.reference = reference
        self.current_count = current_count if current_count is not None else self.processed + sliding_count
        self.processed = 0


class WatermarkTimeEviction:
    """WatermarkTimeEvictionPolicy(windowLength, lag) on top of TimeEvictionPolicy (the contexts the
    watermark triggers set carry no sliding interval, so TimeEvictionPolicy's ``delta`` stays 0)."""

    def __init__(self, length: int, lag: int = _INT_MAX) -> None:
        self.length, self.lag, self.reference = length, lag, None

    def evict(self, ts: int) -> str:
        ref = self.reference if self.reference is not None else 0
        diff = ref - ts
        if diff < -self.lag:
            return STOP
        if diff < 0:
            return KEEP
        return EXPIRE if diff >= self.length else PROCESS

    def set_context(self, reference: int, current_count: int | None, sliding_count: int | None) -> None:
        self.reference = reference


@dataclass
class StormWindow:
    """``withWindow(length, sliding)`` with a timestamp field: ``length``/``sliding`` are
    ``("count", n)`` or ``("time", ms)``."""

    length: tuple[str, int]
    sliding: tuple[str, int]
    queue: list = field(default_factory=list)          # [ts, payload, arrival number] in arrival order
    activations: list = field(default_factory=list)
    late: list = field(default_factory=list)
    last_watermark: int = 0
    _prev: set = field(default_factory=set)
    _next_window_end: int = 0                          # WatermarkTimeTriggerPolicy state
    _last_processed: int = 0                           # WatermarkCountTriggerPolicy state
    _arrivals: int = 0

    def __post_init__(self) -> None:
        kind, v = self.length
        self.eviction = WatermarkCountEviction(v) if kind == "count" else WatermarkTimeEviction(v)

    # WindowedBoltExecutor.execute + WaterMarkEventGenerator
    def add(self, ts: int, payload) -> None:
        if ts >= self.last_watermark:
            self.queue.append([ts, payload, self._arrivals])
            self._arrivals += 1
        else:
            self.late.append(payload)

    def watermark(self, w: int) -> None:
        if w <= self.last_watermark:
            return
        self.last_watermark = w
        if self.sliding[0] == "time":
            self._time_trigger(w)
        else:
            self._count_trigger(w)

    # WatermarkTimeTriggerPolicy.handleWaterMarkEvent
    def _time_trigger(self, w: int) -> None:
        d = self.sliding[1]
        end = self._next_window_end
        while end <= w:
            count = sum(1 for ts, *_ in self.queue if ts <= end)
            self.eviction.set_context(end, count, None)
            if self._on_trigger():
                end += d
            else:
                nxt = min((ts for ts, *_ in self.queue if end < ts <= w), default=_LONG_MAX)
                if nxt == _LONG_MAX:
                    break
                end = nxt if nxt % d == 0 else nxt + (d - nxt % d)
        self._next_window_end = end

    # WatermarkCountTriggerPolicy.handleWaterMarkEvent + WindowManager.getSlidingCountTimestamps
    def _count_trigger(self, w: int) -> None:
        n = self.sliding[1]
        stamps, count, run = [], 0, _LONG_MIN
        if w > self._last_processed:
            for ts, *_ in self.queue:
                if self._last_processed < ts <= w:
                    run = max(run, ts)
                    count += 1
                    if count % n == 0:
                        stamps.append(run)
        for ts in stamps:
            self.eviction.set_context(ts, None, n)
            self._on_trigger()
            self._last_processed = ts

    # WindowManager.onTrigger + scanEvents(fullScan=true)
    def _on_trigger(self) -> bool:
        window, kept = [], []
        stopped = False
        for item in self.queue:
            if stopped:
                kept.append(item)
                continue
            action = self.eviction.evict(item[0])
            if action == EXPIRE:
                continue
            kept.append(item)
            if action == STOP:
                stopped = True
            elif action == PROCESS:
                window.append(item)
        self.queue = kept
        new = [item[1] for item in window if item[2] not in self._prev]
        self._prev = {item[2] for item in window}
        if window:
            self.activations.append(Activation(self.eviction.reference, [item[1] for item in window], new))
        return bool(window)
