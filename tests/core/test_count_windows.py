"""Count windows as Flink's ``countWindow(size, slide)`` and Storm's
``withWindow(Count.of(size), Count.of(slide))`` define them: per key, in arrival order, at every
``slide``-th element a window of the key's last ``size`` elements (fewer at the start).

    count(3):     a1 a2 a3 | a4 a5 a6 | a7 ...           -> windows 0, 1, ...
    count(3, 1):  [a1] [a1 a2] [a1 a2 a3] [a2 a3 a4] ...  -> a window ends at every element
    count(3, 2):  [a1 a2] [a2 a3 a4] [a4 a5 a6] ...       -> a window ends at every 2nd element

Checked against a port of Flink's evictor + trigger (``flink_port.py``), any bundling, several
keys, every accumulation mode, with and without early panes.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from flink_port import flink_count_windows

from spark_windowing.errors import OptionError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.testing import TestStream

MODES = ["discarding", "accumulating", "accumulating_and_retracting"]
events = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 1000)), min_size=0, max_size=40)
sizes = st.integers(1, 5).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n)))
cuts = st.lists(st.integers(1, 10), min_size=1, max_size=6)


def _run(evts, size, slide, bundles, **kw):
    """Our operator over ``evts`` in bundles of the sizes in ``bundles`` (cycled); element ``i``
    carries ``i``. Returns the stream and the live windows after each bundle."""
    s = TestStream(window=f"count({size}, {slide})", aggregate="collect_list(i) AS ids", key_columns="k", **kw)
    pos, c, live = 0, 0, []
    while pos < len(evts):  # the result must not depend on the bundling
        n = bundles[c % len(bundles)]
        s.add_elements([{"k": k, "ts": t, "i": pos + j} for j, (k, t) in enumerate(evts[pos:pos + n])])
        pos, c = pos + n, c + 1
        live.append(s.operator.num_windows)
    return s, live


def _flink(evts, size, slide):
    """Flink's firings as (key, firing number, element ids, earliest ts, latest ts)."""
    fired = flink_count_windows([(k, (i, t)) for i, (k, t) in enumerate(evts)], size, slide)
    return sorted((k, n, [i for i, _ in c], min(t for _, t in c), max(t for _, t in c)) for k, n, c in fired)


def _by_window(panes):
    out = defaultdict(list)
    for p in panes:
        out[(p["k"], p["window_seq"])].append(p)
    return out


@given(events, sizes, cuts, st.sampled_from(MODES))
@settings(max_examples=150, deadline=None)
def test_count_windows_fire_as_flink_count_window(evts, size_slide, bundles, mode):
    """Default trigger: one ON_TIME, final pane per Flink firing, holding what Flink's window
    function gets; nothing else (no retractions, whatever the mode)."""
    size, slide = size_slide
    s, live = _run(evts, size, slide, bundles, accumulation_mode=mode)
    panes = s.take_panes()
    got = sorted((p["k"], p["window_seq"], p["ids"], p["window_start"], p["window_end"]) for p in panes)
    assert got == _flink(evts, size, slide)
    assert all(p["kind"] == "TRIGGER" and p["pane_timing"] == "ON_TIME" and p["is_final"]
               and p["pane_index"] == 0 and p["pane_timestamp"] == p["window_end"] for p in panes)
    # complete windows leave state: at most the open windows of each key remain
    assert all(n <= 3 * -(-size // slide) for n in live)


@given(events, sizes, cuts, st.sampled_from(MODES), st.integers(1, 3))
@settings(max_examples=150, deadline=None)
def test_early_panes_of_count_windows(evts, size_slide, bundles, mode, every):
    """``AfterWatermark(early=AfterCount(n))``: EARLY panes while a window fills, then its ON_TIME,
    final pane when Flink fires it; the contents follow the accumulation mode."""
    size, slide = size_slide
    s, _ = _run(evts, size, slide, bundles, accumulation_mode=mode,
                trigger=f"AfterWatermark(early=AfterCount({every}))")
    want = {(k, n): ids for k, n, ids, _, _ in _flink(evts, size, slide)}
    windows = _by_window(s.take_panes())
    assert {w for w, ps in windows.items() if ps[-1]["pane_timing"] == "ON_TIME"} == set(want)
    for w, ps in windows.items():
        triggers = [p for p in ps if p["kind"] == "TRIGGER"]
        assert [p["pane_index"] for p in triggers] == list(range(len(triggers)))
        complete = w in want  # windows still filling have EARLY panes only
        assert [p["is_final"] for p in triggers] == [False] * (len(triggers) - 1) + [complete]
        assert all(p["pane_timing"] == "EARLY" for p in triggers[:-1])
        if complete and mode == "discarding":
            assert sorted(i for p in triggers for i in p["ids"]) == want[w]
        elif complete:
            assert triggers[-1]["ids"] == want[w]
        retractions = [p for p in ps if p["kind"] == "RETRACTION"]
        if mode == "accumulating_and_retracting":  # each later pane takes back the one before
            assert [p["ids"] for p in retractions] == [p["ids"] for p in triggers[:-1]]
            assert [p["kind"] for p in ps] == ["TRIGGER"] + ["RETRACTION", "TRIGGER"] * (len(triggers) - 1)
        else:
            assert retractions == []


@pytest.mark.parametrize("window,values,flink", [
    # the examples of issue #27 (Flink: countWindow(2, 1) and countWindow(3, 2) over one key)
    ("count(2, 1)", [1, 2, 4], [[1], [1, 2], [2, 4]]),
    ("count(3, 2)", [1, 2, 4, 8, 16], [[1, 2], [2, 4, 8]]),
    ("count(3)", [1, 2, 4, 8, 16, 32, 64], [[1, 2, 4], [8, 16, 32]]),
    ("count(3, 3)", [1, 2, 4, 8, 16, 32, 64], [[1, 2, 4], [8, 16, 32]]),
])
def test_documented_examples(window, values, flink):
    s = TestStream(window=window, aggregate="collect_list(v) AS vs, count(*) AS n", key_columns="k")
    s.add_elements([{"k": "a", "ts": 10 * i, "v": v} for i, v in enumerate(values)])
    panes = s.take_panes()
    assert [p["vs"] for p in panes] == flink
    assert [p["window_seq"] for p in panes] == list(range(len(flink)))
    assert [(p["window_start"], p["window_end"]) for p in panes] == \
        [(10 * values.index(w[0]), 10 * values.index(w[-1])) for w in flink]


@pytest.mark.parametrize("window", ["count(0)", "count(3, 0)", "count(2, 3)", "count(-1, 1)"])
def test_bad_count_windows_are_refused(window):
    with pytest.raises(OptionError) as e:
        OperatorSpec.from_options(window=window, aggregate="count(*) AS n")
    assert e.value.option == "window" and window in str(e.value)
