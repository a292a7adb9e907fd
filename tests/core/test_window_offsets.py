"""Window offsets as Flink accepts them: ``|offset| < size`` for tumbling windows
(``TumblingEventTimeWindows.of(size, offset)``), ``|offset| < slide`` for sliding ones
(``SlidingEventTimeWindows.of(size, slide, offset)``), negative offsets included; window starts
as ``TimeWindow.getWindowStartWithOffset`` computes them (ported in ``flink_port.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from flink_port import sliding_offset_ok, sliding_starts, tumbling_offset_ok, window_start_with_offset

from spark_windowing.errors import OptionError
from spark_windowing.testing import TestStream
from spark_windowing.windows.kinds import parse_window

MS = 1000
times = st.lists(st.integers(-500, 500), min_size=1, max_size=20)


@given(st.integers(1, 40), st.integers(-60, 60), times)
@settings(max_examples=300, deadline=None)
def test_tumbling_offsets_as_flink(size, offset, ts):
    text = f"tumbling({size} milliseconds, {offset} milliseconds)"
    if not tumbling_offset_ok(size, offset):
        with pytest.raises(OptionError) as e:
            parse_window(text)
        assert e.value.option == "window" and e.value.value == text and "|offset| < size" in str(e.value)
        return
    w = parse_window(text)
    idx, start, end = w.assign(np.array(ts, dtype=np.int64) * MS)
    want = [window_start_with_offset(t, offset, size) * MS for t in ts]
    assert idx.tolist() == list(range(len(ts))) and start.tolist() == want
    assert (end - start).tolist() == [size * MS] * len(ts)


@given(st.integers(1, 40), st.integers(1, 40), st.integers(-60, 60), times)
@settings(max_examples=300, deadline=None)
def test_sliding_offsets_as_flink(size, slide, offset, ts):
    slide = min(slide, size)  # ours refuses slide > size (elements would fall between windows)
    text = f"sliding({size} milliseconds, {slide} milliseconds, {offset} milliseconds)"
    if not sliding_offset_ok(size, slide, offset):
        with pytest.raises(OptionError) as e:
            parse_window(text)
        assert e.value.option == "window" and e.value.value == text and "|offset| < slide" in str(e.value)
        return
    idx, start, _ = parse_window(text).assign(np.array(ts, dtype=np.int64) * MS)
    got = sorted(zip(idx.tolist(), start.tolist()))
    want = sorted((i, s * MS) for i, t in enumerate(ts) for s in sliding_starts(t, size, slide, offset))
    assert got == want


@pytest.mark.parametrize("text,why", [
    ("cumulate(10 milliseconds, 5 milliseconds, -10 milliseconds)", "|offset| < maxSize"),
    ("cumulate(10 milliseconds, 5 milliseconds, 12 milliseconds)", "|offset| < maxSize"),
    ("count(3, 10 milliseconds, 10 milliseconds)", "|offset| < every"),
    ("count(3, 10 milliseconds, -11 milliseconds)", "|offset| < every"),
])
def test_other_offsets_follow_the_same_rule(text, why):
    with pytest.raises(OptionError) as e:
        parse_window(text)
    assert e.value.value == text and why in str(e.value)


def test_negative_offset_through_the_operator():
    """Flink's javadoc example, scaled down: days starting at 16:00 UTC are ``of(1 day, -8 hours)``."""
    s = TestStream(window="tumbling(1 day, -8 hours)", aggregate="count(*) AS n")
    hour = 3_600_000
    s.add_elements([{"ts": 15 * hour}, {"ts": 16 * hour}, {"ts": 39 * hour}])
    s.advance_watermark_to(100 * hour)
    panes = s.take_panes()
    assert [(p["window_start"], p["window_end"], p["n"]) for p in panes] == \
        [(-8 * hour, 16 * hour, 1), (16 * hour, 40 * hour, 2)]
