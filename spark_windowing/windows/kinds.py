"""Window functions: which windows an element belongs to, vectorized over a whole batch.

All windows are half-open ``[start, end)`` in int64 microseconds, aligned to the epoch plus
``offset``. ``assign(ts)`` returns ``(element_index, start, end)`` arrays: one row per
(element, window) pair, so sliding windows give ``size/slide`` rows per element.

>>> import numpy as np
>>> w = parse_window("sliding(10 seconds, 5 seconds)")
>>> idx, s, e = w.assign(np.array([7_000_000]))
>>> sorted(zip(s.tolist(), e.tolist()))
[(0, 10000000), (5000000, 15000000)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from spark_windowing._parse import Call, parse_call
from spark_windowing._time import GLOBAL_END, GLOBAL_START, format_duration, parse_duration
from spark_windowing.errors import OptionError

WINDOW_FORMS = ("tumbling(<size>[, <offset>]), sliding(<size>, <slide>[, <offset>]), "
                "sliding(<size>, <n> elements), cumulate(<maxSize>, <step>[, <offset>]), count(<size>[, <slide>]), "
                "count(<size>, <every duration>[, <offset>]), record_sliding(<size>), session(<gap>), session(gapColumn=<column>), "
                "global, inherit "
                "— sizes are durations such as '10 minutes', counts are integers ('100' or '100 elements'); "
                "an offset may be negative and must satisfy |offset| < size (tumbling), slide (sliding), "
                "maxSize (cumulate) or every (count)")


def _check_offset(fn: "WindowFn", offset: int, period: int, what: str, engine: str) -> None:
    """Flink's rule for window offsets: ``|offset| < period`` (negative offsets shift the grid
    back); anything larger names the same grid as ``offset mod period`` and is refused."""
    if not abs(offset) < period:
        raise OptionError("window", fn.spec(), WINDOW_FORMS,
                          why=f"the offset must satisfy |offset| < {what} (as {engine}); "
                              f"got offset {format_duration(offset)} with {what} {format_duration(period)}")


@dataclass(frozen=True)
class WindowFn:
    """Base of window specs. ``merging`` window functions (sessions) merge per key."""

    merging: ClassVar[bool] = False
    same_start: ClassVar[bool] = False  # several windows of a key may share a start
    count_based: ClassVar[bool] = False  # windows by element count, not time
    mixed: ClassVar[bool] = False  # Storm's count/time mixes: evaluated by spark_windowing.windows.mixed
    inherit: ClassVar[bool] = False  # windows read from the input's window_start/window_end
    inclusive_end: ClassVar[bool] = False  # pane rows report the last instant in the window as window_end

    def assign(self, ts: np.ndarray, gap: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def spec(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Tumbling(WindowFn):
    """Fixed windows ``[offset + k·size, offset + (k+1)·size)``, ``|offset| < size`` (negative
    allowed: ``tumbling(1 day, -8 hours)`` starts days at 16:00 UTC), as Flink's
    ``TumblingEventTimeWindows.of(size, offset)``."""

    size: int
    offset: int = 0

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="size must be > 0")
        _check_offset(self, self.offset, self.size, "size", "Flink's TumblingEventTimeWindows")

    def assign(self, ts, gap=None):
        start = (ts - self.offset) // self.size * self.size + self.offset
        return np.arange(len(ts), dtype=np.int64), start, start + self.size

    def spec(self) -> str:
        return f"tumbling({format_duration(self.size)}, {format_duration(self.offset)})"


@dataclass(frozen=True)
class Sliding(WindowFn):
    """Hopping windows of ``size`` starting every ``slide`` at ``offset + k·slide`` (as Spark's
    ``window(ts, size, slide)``), ``|offset| < slide`` as Flink's ``SlidingEventTimeWindows``."""

    size: int
    slide: int
    offset: int = 0

    def __post_init__(self) -> None:
        if self.size <= 0 or self.slide <= 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="size and slide must be > 0")
        if self.slide > self.size:
            raise OptionError("window", self.spec(), WINDOW_FORMS,
                              why="slide must not exceed size (elements would fall between windows)")
        _check_offset(self, self.offset, self.slide, "slide", "Flink's SlidingEventTimeWindows")

    def assign(self, ts, gap=None):
        k = -(-self.size // self.slide)
        last = (ts - self.offset) // self.slide * self.slide + self.offset
        starts = last[:, None] - np.arange(k, dtype=np.int64)[None, :] * self.slide
        keep = starts + self.size > ts[:, None]
        idx = np.broadcast_to(np.arange(len(ts), dtype=np.int64)[:, None], starts.shape)[keep]
        s = starts[keep]
        return idx, s, s + self.size

    def spec(self) -> str:
        return (f"sliding({format_duration(self.size)}, {format_duration(self.slide)}, "
                f"{format_duration(self.offset)})")


@dataclass(frozen=True)
class Cumulate(WindowFn):
    """Flink's CUMULATE: within each period ``[s, s + max_size)`` (aligned to the epoch plus
    ``offset``, ``|offset| < maxSize``) the windows ``[s, s + step)``, ``[s, s + 2·step)`` … ``[s, s + max_size)``; an
    element belongs to every one of them that ends after it. Windows share their start, so they are
    told apart by (start, end)."""

    max_size: int
    step: int
    offset: int = 0
    same_start: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.max_size <= 0 or self.step <= 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="maxSize and step must be > 0")
        if self.max_size % self.step:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="maxSize must be a multiple of step")
        _check_offset(self, self.offset, self.max_size, "maxSize",
                      "Flink's TumblingEventTimeWindows for the periods")

    def assign(self, ts, gap=None):
        k = self.max_size // self.step
        start = (ts - self.offset) // self.max_size * self.max_size + self.offset
        ends = start[:, None] + np.arange(1, k + 1, dtype=np.int64)[None, :] * self.step
        keep = ends > ts[:, None]
        idx = np.broadcast_to(np.arange(len(ts), dtype=np.int64)[:, None], ends.shape)[keep]
        return idx, np.broadcast_to(start[:, None], ends.shape)[keep], ends[keep]

    def spec(self) -> str:
        return (f"cumulate({format_duration(self.max_size)}, {format_duration(self.step)}, "
                f"{format_duration(self.offset)})")


@dataclass(frozen=True)
class Session(WindowFn):
    """Session windows: each element opens ``[t, t + gap)``; windows of a key that overlap or
    touch merge (as Spark's ``session_window`` and Flink do). ``gap_column`` gives a per-element gap."""

    merging: ClassVar[bool] = True
    gap: int = 0
    gap_column: str | None = None

    def __post_init__(self) -> None:
        if self.gap_column is None and self.gap <= 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="gap must be > 0")

    def assign(self, ts, gap=None):
        g = gap if gap is not None else np.full(len(ts), self.gap, dtype=np.int64)
        return np.arange(len(ts), dtype=np.int64), ts, ts + g

    def spec(self) -> str:
        return f"session(gapColumn={self.gap_column})" if self.gap_column else \
            f"session({format_duration(self.gap)})"


@dataclass(frozen=True)
class CountWindow(WindowFn):
    """Count windows as Flink's ``KeyedStream.countWindow(size, slide)`` (``GlobalWindows`` +
    ``CountEvictor.of(size)`` + ``CountTrigger.of(slide)``) and Storm's
    ``withWindow(Count.of(size), Count.of(slide))`` define them, per key in arrival order
    (upstream order within a micro-batch): at every ``slide``-th element of a key, a window holding
    that key's last ``size`` elements — fewer at the start of the key's stream.

    Window ``j`` (0-based, ``window_seq``) holds the key's elements number
    ``max(0, (j+1)·slide − size) … (j+1)·slide − 1`` (0-based): it is *complete* at the key's
    ``(j+1)·slide``-th element, holding ``min(size, (j+1)·slide)`` elements. ``count(2, 1)`` over
    1, 2, 4 gives {1}, {1, 2}, {2, 4}; ``count(3, 2)`` over 1, 2, 4, 8, 16 gives {1, 2},
    {2, 4, 8} (and {8, 16, …} at the 6th element). ``slide`` defaults to ``size`` (tumbling:
    every window holds ``size`` elements). A complete window can get no more elements: the default
    trigger (``Default()``) fires it then, once, ON_TIME and final; earlier panes are EARLY; it is
    removed after the batch that completed it. Time plays no part in which window an element is
    in. Panes report ``window_start``/``window_end`` = the earliest/latest timestamp among its
    elements and ``window_seq`` = ``j``."""

    size: int
    slide: int = 0
    count_based: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.size < 1 or self.slide < 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="count windows need size >= 1 and slide >= 1")
        if self.slide > self.size:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="slide must not exceed size")

    @property
    def step(self) -> int:
        return self.slide or self.size

    def assign_ordinals(self, ordinal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(element index, window number) for elements with these per-key ordinals: element ``o``
        is in windows ``o // step … (o + size) // step − 1``."""
        k = -(-self.size // self.step)  # at most this many windows per element
        j = (ordinal // self.step)[:, None] + np.arange(k, dtype=np.int64)[None, :]
        keep = (j + 1) * self.step - self.size <= ordinal[:, None]
        idx = np.broadcast_to(np.arange(len(ordinal), dtype=np.int64)[:, None], j.shape)[keep]
        return idx, j[keep]

    def needed(self, window: np.ndarray) -> np.ndarray:
        """The number of elements windows number ``window`` hold once complete."""
        return np.minimum(self.size, (window + 1) * self.step)

    def spec(self) -> str:
        return f"count({self.size}, {self.step})"


@dataclass(frozen=True)
class TimestampCount(WindowFn):
    """``count(size[, slide])`` with ``countOrder=timestamp``: Storm's event-time count windows
    (``withWindow(Count.of(size), Count.of(slide))`` with ``withTimestampField`` and ``withLag``,
    its ``WatermarkCountTriggerPolicy`` + ``WatermarkCountEvictionPolicy``). Per key, the elements
    the watermark has passed (``ts < watermark``) are counted in timestamp order (ties: arrival
    order); window ``j`` holds the key's elements number ``max(0, (j+1)·slide − size) …
    (j+1)·slide − 1`` in that order and fires once the watermark passes its last element — once,
    ON_TIME and final. An element behind the watermark on arrival (``ts < watermark``) is late
    (``too_late``). ``spec()`` is the ``window`` option's text, as ``CountWindow``'s; the order is
    the ``countOrder`` option. See ``spark_windowing.windows.timestamp_count``."""

    size: int
    slide: int = 0
    count_based: ClassVar[bool] = True
    mixed: ClassVar[bool] = True

    @property
    def step(self) -> int:
        return self.slide or self.size

    @classmethod
    def of(cls, window: CountWindow) -> "TimestampCount":
        return cls(window.size, window.slide)

    def spec(self) -> str:
        return f"count({self.size}, {self.step})"


@dataclass(frozen=True)
class CountEvery(WindowFn):
    """Storm's ``withWindow(Count n, Duration d)``: the last ``size`` elements of a key, evaluated
    every ``every`` (event time, boundaries ``b = offset + k·every`` aligned to the epoch,
    ``|offset| < every``).

    Once the watermark reaches a boundary ``b``, a key that has elements with ``b − every <= ts < b``
    (its window changed since the previous boundary) gets one window: its last ``size`` elements
    with ``ts < b`` in timestamp order (ties: arrival order), fired once, ON_TIME and final, with
    ``window_seq = k``. An element whose first boundary (the first ``b > ts``) is at or behind the
    watermark is late. See ``spark_windowing.windows.mixed`` for the exact rules and how they relate to Storm.
    """

    size: int
    every: int
    offset: int = 0
    count_based: ClassVar[bool] = True
    mixed: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.size < 1 or self.every <= 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS,
                              why="count(<size>, <every>) needs size >= 1 and a positive duration")
        _check_offset(self, self.offset, self.every, "every", "Flink's TumblingEventTimeWindows for the boundaries")

    def spec(self) -> str:
        return f"count({self.size}, {format_duration(self.every)}, {format_duration(self.offset)})"


@dataclass(frozen=True)
class SlidingEvery(WindowFn):
    """Storm's ``withWindow(Duration d, Count n)``: every ``every``-th element of a key (in timestamp
    order, ties by arrival) triggers a window holding the key's elements with
    ``t − size < ts <= t`` (``t`` = the triggering element's time), fired once the watermark passes
    ``t`` — ON_TIME and final, ``window_seq`` = the trigger's number (0-based). Elements behind the
    watermark are late. See ``spark_windowing.windows.mixed``."""

    size: int
    every: int
    count_based: ClassVar[bool] = True
    mixed: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.size <= 0 or self.every < 1:
            raise OptionError("window", self.spec(), WINDOW_FORMS,
                              why="sliding(<size>, <n> elements) needs a positive size and n >= 1")

    def spec(self) -> str:
        return f"sliding({format_duration(self.size)}, {self.every} elements)"


@dataclass(frozen=True)
class RecordSliding(WindowFn):
    """Kafka Streams' sliding windows (KIP-450, ``SlidingWindows.ofTimeDifferenceAndGrace``):
    per key, one window ``[s, s + size]`` — both bounds inclusive — per distinct set of records
    within ``size`` of each other. A record at ``t`` brings the window ``[t − size, t]`` ending at
    it and, if later records fall in it, ``[t + g, t + g + size]`` starting just after it (``g`` =
    the timestamps' grain: 1 ms for millisecond epochs as in Kafka, 1 µs for timestamp columns).
    Each window fires once, ON_TIME and final, when the watermark passes its end plus
    ``allowedLateness`` (Kafka's ``suppress(untilWindowCloses)``). Pane rows report the inclusive
    end as ``window_end``. See ``spark_windowing.windows.mixed`` for the exact rules."""

    size: int
    mixed: ClassVar[bool] = True
    inclusive_end: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise OptionError("window", self.spec(), WINDOW_FORMS, why="record_sliding(<size>) needs a positive size")

    def spec(self) -> str:
        return f"record_sliding({format_duration(self.size)})"


@dataclass(frozen=True)
class GlobalWindow(WindowFn):
    """One window for all time: ``[0001-01-01, 9999-12-31T23:59:59.999999]``; never expires."""

    def assign(self, ts, gap=None):
        n = len(ts)
        return (np.arange(n, dtype=np.int64), np.full(n, GLOBAL_START, dtype=np.int64),
                np.full(n, GLOBAL_END, dtype=np.int64))

    def spec(self) -> str:
        return "global"


@dataclass(frozen=True)
class Inherit(WindowFn):
    """Window propagation (Apex): every input row already names its window in the columns
    ``window_start`` / ``window_end`` (timestamps; e.g. the pane rows of another windowed query)
    and is aggregated into exactly that window of its key. A row whose ``kind`` column is
    ``RETRACTION`` is subtracted (see ``spark_windowing.operator.windowed``), so windowed queries chain:
    per-key sums upstream, then e.g. the top keys per window downstream. Rows with a null or
    inverted window are malformed."""

    inherit: ClassVar[bool] = True
    same_start: ClassVar[bool] = True  # inherited windows may share a start (cumulate upstream)
    start_column: ClassVar[str] = "window_start"
    end_column: ClassVar[str] = "window_end"

    def spec(self) -> str:
        return "inherit"


def _dur(arg, what: str, text: str, *, allow_zero=False) -> int:
    """A duration argument; an offset may be negative, other durations not."""
    if not isinstance(arg, str):
        raise OptionError("window", text, WINDOW_FORMS, why=f"{what} must be a duration")
    try:
        return parse_duration(arg, option="window", allow_zero=allow_zero, allow_negative=what == "offset")
    except OptionError as e:
        why = f"{what} {arg!r} {e.why}" if e.why else f"{what} {arg!r} is not a duration"
        raise OptionError("window", text, WINDOW_FORMS, why=why) from None


_ELEMENT_UNITS = ("elements", "element", "events", "event", "tuples", "tuple")


def _elements(arg) -> str | None:
    """The number in ``'<n> elements'`` (also events/tuples), else None."""
    if not isinstance(arg, str):
        return None
    parts = arg.split()
    if len(parts) == 2 and parts[1].lower() in _ELEMENT_UNITS:
        return parts[0]
    return None


def _count(arg, what: str, text: str, alt: str = "") -> int:
    if isinstance(arg, str) and arg.strip().lstrip("+-").isdigit():
        return int(arg)
    raise OptionError("window", text, WINDOW_FORMS, why=f"{what} {arg!r} must be an element count{alt}")


def _is_duration(arg) -> bool:
    if not isinstance(arg, str) or arg.strip().lstrip("+-").isdigit():
        return False
    try:
        parse_duration(arg, option="window")
    except OptionError:
        return False
    return True


def parse_window(text: str) -> WindowFn:
    """Parse the ``window`` option (see ``WINDOW_FORMS``); raise OptionError on anything else."""
    call = parse_call(text, option="window", accepted=WINDOW_FORMS)
    try:
        return _build(call, str(text))
    except OptionError as e:  # checks in __post_init__ name the normalized spec; report the user's text
        if e.option != "window" or e.value == text:
            raise
        raise OptionError("window", text, WINDOW_FORMS, why=e.why) from None


def _nargs(call: Call, text: str, lo: int, hi: int) -> None:
    if not lo <= len(call.args) <= hi:
        raise OptionError("window", text, WINDOW_FORMS,
                          why=f"{call.name}() takes {lo}{'' if lo == hi else f' to {hi}'} argument(s)")


def _build(call: Call, text: str) -> WindowFn:
    """The window function ``call`` spells. (Long: one short branch per window spelling.)"""
    name = call.name.lower()
    if name in ("tumbling", "fixed"):
        _nargs(call, text, 1, 2)
        return Tumbling(_dur(call.args[0], "size", text),
                        _dur(call.args[1], "offset", text, allow_zero=True) if len(call.args) > 1 else 0)
    if name in ("sliding", "hopping"):
        _nargs(call, text, 2, 3)
        every = _elements(call.args[1])
        if every is not None:  # sliding(<size>, <n> elements): Storm's withWindow(Duration, Count)
            if len(call.args) > 2:
                raise OptionError("window", text, WINDOW_FORMS,
                                  why="sliding(<size>, <n> elements) takes no offset (it is not aligned to the epoch)")
            return SlidingEvery(_dur(call.args[0], "size", text), _count(every, "slide", text))
        return Sliding(_dur(call.args[0], "size", text), _dur(call.args[1], "slide", text),
                       _dur(call.args[2], "offset", text, allow_zero=True) if len(call.args) > 2 else 0)
    if name == "count":
        _nargs(call, text, 1, 3)
        size = _count(_elements(call.args[0]) if _elements(call.args[0]) is not None else call.args[0], "size", text)
        if len(call.args) > 1 and _elements(call.args[1]) is None and _is_duration(call.args[1]):
            # count(<size>, <duration>[, <offset>]): Storm's withWindow(Count, Duration)
            return CountEvery(size, _dur(call.args[1], "every", text),
                              _dur(call.args[2], "offset", text, allow_zero=True) if len(call.args) > 2 else 0)
        if len(call.args) > 2:
            raise OptionError("window", text, WINDOW_FORMS,
                              why="an offset is only accepted with a duration slide: count(<size>, <every>, <offset>)")
        slide = 0
        if len(call.args) > 1:
            arg = call.args[1]
            slide = _count(_elements(arg) if _elements(arg) is not None else arg,
                           "slide", text, alt=" or a duration (count(<size>, <every>))")
            if slide < 1:  # 0 would read as "no slide given" (tumbling)
                raise OptionError("window", text, WINDOW_FORMS, why="count windows need size >= 1 and slide >= 1")
        return CountWindow(size, slide)
    if name == "cumulate":
        _nargs(call, text, 2, 3)
        return Cumulate(_dur(call.args[0], "maxSize", text), _dur(call.args[1], "step", text),
                        _dur(call.args[2], "offset", text, allow_zero=True) if len(call.args) > 2 else 0)
    if name == "session":
        kw = {k.lower(): v for k, v in call.kwargs}
        if "gapcolumn" in kw and not call.args:
            col = kw["gapcolumn"]
            if not isinstance(col, str) or not col.strip():
                raise OptionError("window", text, WINDOW_FORMS, why="gapColumn must name a column")
            return Session(gap_column=col.strip().strip("`"))
        _nargs(call, text, 1, 1)
        return Session(gap=_dur(call.args[0], "gap", text))
    if name in ("record_sliding", "recordsliding"):
        _nargs(call, text, 1, 1)
        return RecordSliding(_dur(call.args[0], "size", text))
    if name in ("global", "globalwindows") and not call.args:
        return GlobalWindow()
    if name == "inherit" and not call.args:
        return Inherit()
    raise OptionError("window", text, WINDOW_FORMS, why=f"unknown window kind {call.name!r}")
