"""A hypothesis strategy shared by the buffered-window tests (mixed and record_sliding windows)."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def streams(draw, max_steps=8, keys="abc", spread=8):
    """Bundles of (key, ts, id) with out-of-order timestamps (up to the watermark delay + ``spread``
    behind the newest, so some are behind the watermark), watermark moves, and a final flush:
    a list of (events, watermark)."""
    delay = draw(st.integers(0, 15))
    now, w, max_ts, i, steps = 100, 0, 0, 0, []
    for _ in range(draw(st.integers(1, max_steps))):
        now += draw(st.integers(0, 25))
        events = []
        for _ in range(draw(st.integers(0, 6))):
            events.append((draw(st.sampled_from(keys)), now - draw(st.integers(0, delay + spread)), i))
            i += 1
        max_ts = max([max_ts] + [t for _, t, _ in events])
        if draw(st.booleans()):
            w = max(w, max_ts - delay)
        steps.append((events, w))
    steps.append(([], max_ts + 1000))
    return steps
