"""Plain-Python ports of the Apache Flink rules our count windows and window offsets follow; test
oracles, one element at a time, no NumPy.

* ``FlinkCountWindow``: ``KeyedStream.countWindow(size, slide)`` for one key —
  ``window(GlobalWindows.create()).evictor(CountEvictor.of(size)).trigger(CountTrigger.of(slide))``
  (``flink-streaming-java/src/main/java/org/apache/flink/streaming/api/datastream/KeyedStream.java``),
  run the way ``EvictingWindowOperator`` runs it
  (``flink-streaming-java/src/main/java/org/apache/flink/streaming/runtime/operators/windowing/EvictingWindowOperator.java``):
  every element is appended to the (single, global) window's list state, then the trigger sees it;
  on ``FIRE`` the evictor's ``evictBefore`` removes elements from the front of the list, the window
  function sees what is left, and the list state keeps exactly that (evicted elements are gone for
  good). ``CountTrigger.onElement``
  (``flink-streaming-java/src/main/java/org/apache/flink/streaming/api/windowing/triggers/CountTrigger.java``)
  increments a per-window count and, once it reaches ``maxCount``, resets it to 0 and returns
  ``FIRE`` (not ``FIRE_AND_PURGE``: the list stays). ``CountEvictor.evict``
  (``flink-streaming-java/src/main/java/org/apache/flink/streaming/api/windowing/evictors/CountEvictor.java``)
  does nothing while ``size <= maxCount``, else removes the first ``size - maxCount`` elements
  (``of(maxCount)`` evicts before the function: ``doEvictAfter = false``).
* ``window_start_with_offset``: ``TimeWindow.getWindowStartWithOffset``
  (``flink-streaming-java/src/main/java/org/apache/flink/streaming/api/windowing/windows/TimeWindow.java``),
  with Java's ``%`` (the remainder takes the dividend's sign).
* ``tumbling_offset_ok`` / ``sliding_offset_ok``: the constructor checks of
  ``TumblingEventTimeWindows`` (``Math.abs(offset) >= size`` is refused) and
  ``SlidingEventTimeWindows`` (``Math.abs(offset) >= slide || size <= 0`` is refused), same
  directory as ``assigners/``.
"""

from __future__ import annotations


class FlinkCountWindow:
    """One key's ``countWindow(size, slide)``: ``add`` returns the window function's input when the
    element makes the trigger fire, else None."""

    def __init__(self, size: int, slide: int) -> None:
        self.max_count_evictor, self.max_count_trigger = size, slide
        self.state: list = []   # the global window's ListState
        self.count = 0          # CountTrigger's "count" state

    def add(self, element) -> list | None:
        self.state.append(element)                 # windowState.add(element)
        if self._on_element():                     # trigger.onElement -> FIRE
            self._evict_before()
            return list(self.state)                # emitWindowContents: the function's input
        return None

    def _on_element(self) -> bool:
        current = self.count + 1
        self.count = current
        if current >= self.max_count_trigger:
            self.count = 0
            return True
        return False

    def _evict_before(self) -> None:
        size = len(self.state)
        if size <= self.max_count_evictor:
            return
        del self.state[:size - self.max_count_evictor]


def flink_count_windows(events, size: int, slide: int) -> list[tuple]:
    """``countWindow(size, slide)`` over ``events`` = [(key, element), ...] in arrival order:
    (key, firing number per key from 0, window function input) for every firing."""
    ops: dict = {}
    fired: dict = {}
    out = []
    for key, element in events:
        op = ops.setdefault(key, FlinkCountWindow(size, slide))
        contents = op.add(element)
        if contents is not None:
            n = fired.get(key, 0)
            fired[key] = n + 1
            out.append((key, n, contents))
    return out


def _java_rem(a: int, b: int) -> int:
    """Java's ``a % b`` for longs: truncated division, the remainder has ``a``'s sign."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
    remainder = _java_rem(timestamp - offset, window_size)
    if remainder < 0:  # "handle both positive and negative cases"
        return timestamp - (remainder + window_size)
    return timestamp - remainder


def tumbling_offset_ok(size: int, offset: int) -> bool:
    return not abs(offset) >= size


def sliding_offset_ok(size: int, slide: int, offset: int) -> bool:
    return not (abs(offset) >= slide or size <= 0)


def sliding_starts(timestamp: int, size: int, slide: int, offset: int) -> list[int]:
    """``SlidingEventTimeWindows.assignWindows``: the starts of the windows holding ``timestamp``."""
    last_start = window_start_with_offset(timestamp, offset, slide)
    starts = []
    start = last_start
    while start > timestamp - size:
        starts.append(start)
        start -= slide
    return starts
