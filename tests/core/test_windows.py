"""Window assignment against brute force: every element is in exactly the windows that contain it.

    tumbling(4):        [0,4)[4,8)[8,12)
    sliding(6, 2):    [-4,2)[-2,4)[0,6)[2,8)...      t=3 -> [-2,4) [0,6) [2,8)
    cumulate(6, 2):     [0,2)[0,4)[0,6) | [6,8)[6,10)[6,12)     t=3 -> [0,4) [0,6)
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing.errors import OptionError
from spark_windowing.windows.kinds import Cumulate, Sliding, Tumbling, parse_window

times = st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=30)


def _assigned(w, ts):
    idx, s, e = w.assign(np.array(ts, dtype=np.int64))
    return sorted(zip(idx.tolist(), s.tolist(), e.tolist()))


@given(times, st.integers(1, 50), st.integers(0, 49))
@settings(max_examples=150, deadline=None)
def test_tumbling(ts, size, offset):
    w = Tumbling(size, offset % size)
    expect = sorted((i, s, s + size) for i, t in enumerate(ts)
                    for s in range(t - 2 * size, t + 1) if (s - w.offset) % size == 0 and s <= t < s + size)
    assert _assigned(w, ts) == expect


@given(times, st.integers(1, 12), st.integers(1, 12), st.integers(0, 11))
@settings(max_examples=150, deadline=None)
def test_sliding(ts, slide, k, offset):
    size = slide * k + (offset % slide if k > 1 else 0)
    w = Sliding(size, slide, offset % slide)
    expect = sorted((i, s, s + size) for i, t in enumerate(ts)
                    for s in range(t - size - slide, t + 1) if (s - w.offset) % slide == 0 and s <= t < s + size)
    assert _assigned(w, ts) == expect


@given(times, st.integers(1, 10), st.integers(1, 6), st.integers(0, 50))
@settings(max_examples=150, deadline=None)
def test_cumulate(ts, step, k, offset):
    max_size = step * k
    w = Cumulate(max_size, step, offset % max_size)
    expect = []
    for i, t in enumerate(ts):
        for s in range(t - max_size, t + 1):
            if (s - w.offset) % max_size == 0:
                expect += [(i, s, s + j * step) for j in range(1, k + 1) if t < s + j * step]
    assert _assigned(w, ts) == sorted(expect)


@pytest.mark.parametrize("text,why", [
    ("cumulate(10 seconds, 3 seconds)", "multiple of step"),
    ("sliding(5 minutes, 0 seconds)", "slide .0 seconds. must be greater than zero"),
    ("sliding(1 minute, 5 minutes)", "slide must not exceed size"),
    ("tumbling(10 parsecs)", "not a duration"),
    ("hopping", "takes 2 to 3"),
])
def test_bad_windows(text, why):
    with pytest.raises(OptionError, match=why):
        parse_window(text)


@pytest.mark.parametrize("window,pairs", [("cumulate(20 milliseconds, 5 milliseconds)", 4),
                                          ("sliding(10 milliseconds, 5 milliseconds)", 2),
                                          ("tumbling(10 milliseconds)", 1), ("session(5 milliseconds)", 1)])
def test_batch_whose_every_pair_is_too_late_goes_to_the_late_output(window, pairs):
    """A batch with only too-late (element, window) pairs (found by the state-store property test:
    cumulate crashed on it): every pair reaches the late output, nothing fires."""
    from spark_windowing.testing import TestStream
    s = TestStream(window=window, aggregate="count(*) AS n", key_columns="k")
    s.advance_watermark_to(100)
    s.add_elements([{"k": "a", "ts": 1}])
    s.advance_watermark_to(200)
    assert s.take_panes() == []
    late = s.take_late()
    assert [(r["k"], r["reason"]) for r in late] == [("a", "too_late")] * pairs
