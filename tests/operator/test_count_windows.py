"""Count windows (Storm/Flink): per key, in arrival order, a window fires when it is full.

    count(3):     a1 a2 a3 | a4 a5 a6 | a7 ...        -> windows 0, 1, ...
    count(3, 1):  [a1 a2 a3] [a2 a3 a4] [a3 a4 a5]    -> a window starts at every element
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing.testing import TestStream

events = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 1000)), min_size=0, max_size=40)


def _reference(evts, size, slide):
    """Full windows per key: (key, seq, first ts, last ts, values) from a plain per-key list."""
    per_key: dict[str, list[tuple[int, int]]] = {}
    for i, (k, t) in enumerate(evts):
        per_key.setdefault(k, []).append((t, i))
    out = []
    for k, items in per_key.items():
        j = 0
        while j * slide + size <= len(items):
            chunk = items[j * slide:j * slide + size]
            out.append((k, j, min(t for t, _ in chunk), max(t for t, _ in chunk), sorted(i for _, i in chunk)))
            j += 1
    return sorted(out)


@given(events, st.integers(1, 5), st.integers(1, 5), st.lists(st.integers(1, 10), min_size=1, max_size=6))
@settings(max_examples=150, deadline=None)
def test_count_windows_match_a_per_key_list(evts, size, slide, cuts):
    slide = min(slide, size)
    s = TestStream(window=f"count({size}, {slide})", aggregate="collect_list(i) AS ids", key_columns="k")
    pos, c = 0, 0
    while pos < len(evts):  # random bundle sizes: the result must not depend on them
        n = cuts[c % len(cuts)]
        s.add_elements([{"k": k, "ts": t, "i": pos + j} for j, (k, t) in enumerate(evts[pos:pos + n])])
        pos, c = pos + n, c + 1
    panes = s.take_panes()
    got = sorted((p["k"], p["window_seq"], p["window_start"], p["window_end"], sorted(p["ids"])) for p in panes)
    assert got == _reference(evts, size, slide)
    assert all(p["pane_timing"] == "ON_TIME" and p["is_final"] and p["pane_index"] == 0 for p in panes)
    assert s.operator.num_windows <= 3 * len(set(k for k, _ in evts)) * (-(-size // slide))
