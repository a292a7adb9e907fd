"""Storm's mixed windows: ``count(n, <duration>)`` and ``sliding(<duration>, n elements)``.

    count(3, 10 ms), one key:      2   5   8 | 12        |        | 31
    boundary (watermark >= b)           10 -> [2 5 8]   20 -> [5 8 12]   30 -> -   40 -> [8 12 31]

    sliding(10 ms, 2 elements):    2   5 | 8  12 | 15  30 | 31
    trigger (watermark > t)         5 -> (-5, 5]   12 -> (2, 12]   30 -> (20, 30]

Checked against (1) pure-Python per-element reference models (any arrival order, late elements,
any bundling), (2) a port of Storm's own window manager and watermark policies on in-order input
(``storm_port.py``), and (3) Storm's own worked examples (``WindowManagerTest``, Windowing.md).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from event_streams import check_restore_continues, checked_panes, feed, run_storm, streams

from spark_windowing.errors import OptionError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.testing import TestStream
from spark_windowing.windows.kinds import CountEvery, SlidingEvery, parse_window
from tests.core.storm_port import StormWindow

KW = dict(aggregate="collect_list(i) AS ids, first(i) AS f, last(i) AS l, sum(i) AS s, count(*) AS n",
          key_columns="k")


# ---------------------------------------------------------------- reference models (per element)

def ref_count_every(steps, n, d, off=0):
    """count(n, d, off): windows (key, k, ids) and late ids, straight from the definition."""
    kept, late, panes, done, arrival = defaultdict(list), [], [], None, 0
    for events, w in steps:
        k_now = (w - off) // d
        for key, ts, i in events:
            if (ts - off) // d + 1 <= k_now:   # its first boundary is at or behind the watermark
                late.append(i)
            else:
                kept[key].append((ts, arrival, i))
            arrival += 1
        if done is None or k_now > done:
            for key, items in kept.items():
                for c in sorted({(ts - off) // d + 1 for ts, _, _ in items}):
                    if c <= k_now and (done is None or c > done):
                        window = sorted(e for e in items if e[0] < off + c * d)[-n:]
                        panes.append((key, c, [i for _, _, i in window]))
            done = k_now
    return sorted(panes), sorted(late)


def ref_sliding_every(steps, d, n):
    """sliding(d, n elements): windows (key, j, ids) and late ids."""
    kept, late, panes, fired, arrival = defaultdict(list), [], [], defaultdict(int), 0
    for events, w in steps:
        for key, ts, i in events:
            if ts < w:
                late.append(i)
            else:
                kept[key].append((ts, arrival, i))
            arrival += 1
        for key, items in kept.items():
            triggers = sorted(e for e in items if e[0] < w)[n - 1::n]
            for j in range(fired[key], len(triggers)):
                t = triggers[j][0]
                panes.append((key, j, [i for _, _, i in sorted(e for e in items if t - d < e[0] <= t)]))
            fired[key] = len(triggers)
    return sorted(panes), sorted(late)


def run(window, steps, **kw):
    return feed(TestStream(window=window, **{**KW, **kw}), steps)


def panes_of(s, steps):
    return sorted((p["k"], p["window_seq"], p["ids"]) for p in checked_panes(s, steps))


@given(streams(), st.integers(1, 4), st.sampled_from([5, 7, 10]), st.sampled_from([0, 3]))
@settings(max_examples=120, deadline=None)
def test_count_every_duration_matches_reference_model(steps, n, d, off):
    s = run(f"count({n}, {d} milliseconds, {off} milliseconds)", steps)
    want_panes, want_late = ref_count_every(steps, n, d, off)
    assert panes_of(s, steps) == want_panes
    late = s.take_late()
    assert sorted(r["i"] for r in late) == want_late
    assert all(r["reason"] == "too_late" for r in late)


@given(streams(), st.sampled_from([5, 10, 20]), st.integers(1, 4))
@settings(max_examples=120, deadline=None)
def test_sliding_every_n_elements_matches_reference_model(steps, d, n):
    s = run(f"sliding({d} milliseconds, {n} elements)", steps)
    want_panes, want_late = ref_sliding_every(steps, d, n)
    assert panes_of(s, steps) == want_panes
    assert sorted(r["i"] for r in s.take_late()) == want_late


@given(streams(max_steps=10), st.integers(1, 10), st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_snapshot_restore_continue_gives_the_same_panes(steps, cut, n):
    cut = min(cut, len(steps))
    for window in (f"count({n}, 10 milliseconds)", f"sliding(15 milliseconds, {n} elements)"):
        check_restore_continues(lambda: TestStream(window=window, **KW),
                                lambda blob: TestStream.restore(blob, window=window, **KW), steps, cut,
                                lambda s: panes_of(s, steps))


def test_state_keeps_only_what_later_windows_can_use():
    """count(n, d): the last n before the last boundary + later ones; sliding: ts > watermark - size."""
    steps = [([("a", t, t) for t in range(b, b + 50)], b) for b in range(0, 5000, 50)]
    s = run("count(3, 10 milliseconds)", steps)
    assert sorted(s.operator.mixed.ts // 1000) == list(range(4947, 5000))
    assert s.operator.num_windows == 0  # window rows live only for the step they fire in
    assert len(s.take_panes()) == 495
    s = run("sliding(20 milliseconds, 4 elements)", steps)
    assert sorted(s.operator.mixed.ts // 1000) == list(range(4931, 5000))
    assert len(s.take_panes()) == 4950 // 4


# ---------------------------------------------------------------- Storm itself

@st.composite
def in_order_streams(draw):
    """In-order input with distinct odd timestamps and even watermarks (so the inclusive/exclusive
    boundary and ``ts == watermark`` cases, where we deliberately differ from Storm, never arise)."""
    t, w, i, steps = 1, 0, 0, []
    for _ in range(draw(st.integers(1, 8))):
        events = []
        for _ in range(draw(st.integers(0, 6))):
            t += 2 * draw(st.integers(1, 8))
            events.append((draw(st.sampled_from("ab")), t, i))
            i += 1
        w = draw(st.integers(w // 2, (t + 1) // 2)) * 2
        steps.append((events, w))
    steps.append(([], t + 1001))
    return steps


def run_ours_as_storm(window, steps):
    """Events arrive under the previous watermark; then the watermark moves (Storm's order)."""
    return feed(TestStream(window=window, **KW), steps, storm_order=True)


@given(in_order_streams(), st.integers(1, 4), st.sampled_from([6, 10, 20]))
@settings(max_examples=60, deadline=None)
def test_count_every_duration_is_storms_count_window_with_time_slide(steps, n, d):
    storm, _ = run_storm(("count", n), ("time", d), steps)
    # Storm's one window re-fires unchanged at every boundary; per key we fire only on change
    want = sorted((k, a.reference_time // d, a.events) for k, sw in storm.items()
                  for a in sw.activations if a.new_events)
    assert panes_of(run_ours_as_storm(f"count({n}, {d} milliseconds)", steps), steps) == want


@given(in_order_streams(), st.sampled_from([6, 10, 25]), st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_sliding_every_n_elements_is_storms_time_window_with_count_slide(steps, d, n):
    storm, _ = run_storm(("time", d), ("count", n), steps)
    want = sorted((k, j, a.events) for k, sw in storm.items() for j, a in enumerate(sw.activations))
    assert panes_of(run_ours_as_storm(f"sliding({d} milliseconds, {n} elements)", steps), steps) == want


# Storm's WindowManagerTest.testCountBasedWindowWithEventTs: Count(3) sliding every 10 (ms), event
# time; its assertions are quoted as (watermark, [windows Storm asserts]).
STORM_COUNT_TIME = [
    ([603, 605, 607, 618, 626, 636], 631, [[603, 605, 607], [605, 607, 618], [607, 618, 626]]),
    ([665, 666, 667, 679], 674, [[618, 626, 636], [618, 626, 636], [618, 626, 636], [665, 666, 667]]),
]
# testCountBasedTriggerWithEventTs: Duration 20 sliding every Count(3)
STORM_TIME_COUNT = [
    ([603, 605, 607, 618, 625, 626, 629, 636], 631, [[603, 605, 607], [607, 618, 625, 626]]),
    ([665, 666, 667, 669, 679], 674, [[665], [665, 666, 667, 669]]),
]


@pytest.mark.parametrize("length,sliding,script", [(("count", 3), ("time", 10), STORM_COUNT_TIME),
                                                   (("time", 20), ("count", 3), STORM_TIME_COUNT)])
def test_the_port_reproduces_storms_own_assertions(length, sliding, script):
    sw = StormWindow(length, sliding)
    for events, w, windows in script:
        sw.activations.clear()
        for ts in events:
            sw.add(ts, ts)
        sw.watermark(w)
        assert [a.events for a in sw.activations] == windows


def test_storms_worked_examples_through_the_operator():
    steps = [([("a", ts, ts) for ts in events], w) for events, w, _ in STORM_COUNT_TIME]
    got = panes_of(run_ours_as_storm("count(3, 10 milliseconds)", steps), steps)
    storm = [w for _, _, ws in STORM_COUNT_TIME for w in ws]
    changed = [w for j, w in enumerate(storm) if j == 0 or w != storm[j - 1]]  # Storm's unchanged re-fires dropped
    assert [ids for _, _, ids in got] == changed
    assert [seq for _, seq, _ in got] == [61, 62, 63, 64, 67]  # boundaries 610, 620, 630, 640, 670
    steps = [([("a", ts, ts) for ts in events], w) for events, w, _ in STORM_TIME_COUNT]
    got = panes_of(run_ours_as_storm("sliding(20 milliseconds, 3 elements)", steps), steps)
    assert [ids for _, _, ids in got] == [w for _, _, ws in STORM_TIME_COUNT for w in ws]
    assert [seq for _, seq, _ in got] == [0, 1, 2, 3]


def test_windowing_md_worked_example_time_windows():
    """Windowing.md: length 20 s, slide 10 s, lag 5 s — the windows Storm documents (the Duration/
    Duration case the mixed windows sit next to)."""
    hms = lambda h, m, s: ((h * 60 + m) * 60 + s) * 1000  # noqa: E731
    e = {1: hms(6, 0, 3), 2: hms(6, 0, 5), 3: hms(6, 0, 7), 4: hms(6, 0, 18), 5: hms(6, 0, 26), 6: hms(6, 0, 36),
         7: hms(8, 0, 25), 8: hms(8, 0, 26), 9: hms(8, 0, 27), 10: hms(8, 0, 39)}
    s = TestStream(window="sliding(20 seconds, 10 seconds)", aggregate="collect_list(i) AS ids")
    s.add_elements([{"ts": e[i], "i": i} for i in range(1, 7)])
    s.advance_watermark_to(hms(6, 0, 31))
    first = sorted((p["window_start"], p["ids"]) for p in s.take_panes())
    assert first == [(hms(5, 59, 50), [1, 2, 3]), (hms(6, 0, 0), [1, 2, 3, 4]), (hms(6, 0, 10), [4, 5])]
    s.add_elements([{"ts": e[i], "i": i} for i in range(7, 11)])
    s.advance_watermark_to(hms(8, 0, 34))
    second = sorted((p["window_start"], p["ids"]) for p in s.take_panes())
    assert second == [(hms(6, 0, 20), [5, 6]), (hms(6, 0, 30), [6]), (hms(8, 0, 10), [7, 8, 9])]


# ---------------------------------------------------------------- options

@pytest.mark.parametrize("text,kind,args", [
    ("count(100, 5 minutes)", CountEvery, (100, 300_000_000, 0)),
    ("count(100 elements, 1 second, 500 milliseconds)", CountEvery, (100, 1_000_000, 500_000)),
    ("sliding(10 minutes, 100 elements)", SlidingEvery, (600_000_000, 100)),
    ("SLIDING(10 seconds, 3 tuples)", SlidingEvery, (10_000_000, 3)),
    ("sliding(1 hour, 1 event)", SlidingEvery, (3_600_000_000, 1)),
])
def test_mixed_window_forms(text, kind, args):
    w = parse_window(text)
    assert isinstance(w, kind) and tuple(vars(w).values()) == args


def test_existing_forms_keep_their_meaning():
    assert type(parse_window("count(100, 10)")).__name__ == "CountWindow"
    assert type(parse_window("sliding(10 minutes, 1 minute)")).__name__ == "Sliding"


@pytest.mark.parametrize("opts,option", [
    (dict(window="count(0, 5 minutes)"), "window"),
    (dict(window="count(3, 0 seconds)"), "window"),
    (dict(window="count(3, 5 furlongs)"), "window"),
    (dict(window="count(3, 2, 1 second)"), "window"),
    (dict(window="count(2.5, 1 minute)"), "window"),
    (dict(window="sliding(10 minutes, 0 elements)"), "window"),
    (dict(window="sliding(0 minutes, 3 elements)"), "window"),
    (dict(window="sliding(10 minutes, 3 elements, 1 minute)"), "window"),
    (dict(window="sliding(10 minutes, x elements)"), "window"),
    (dict(window="count(3, 1 minute)", trigger="AfterCount(2)"), "trigger"),
    (dict(window="sliding(1 minute, 3 elements)", allowed_lateness="1 minute"), "allowedLateness"),
])
def test_bad_mixed_specs_fail_naming_the_option(opts, option):
    with pytest.raises(OptionError) as e:
        OperatorSpec.from_options(aggregate="count(*) AS n", **opts)
    assert e.value.option == option
    value = opts.get({"allowedLateness": "allowed_lateness"}.get(option, option))
    assert value in str(e.value) and "Accepted" in str(e.value)


def test_next_timer_is_the_next_evaluation():
    s = TestStream(window="count(2, 10 milliseconds)", **KW)
    s.add_elements([{"k": "a", "ts": 13, "i": 0}, {"k": "b", "ts": 27, "i": 1}], watermark=5)
    assert s.operator.next_timers()[0] == 20_000
    s = TestStream(window="sliding(10 milliseconds, 2 elements)", **KW)
    s.add_elements([{"k": "a", "ts": t, "i": t} for t in (40, 13, 30, 17)], watermark=5)
    assert s.operator.next_timers()[0] == 17_001
    s.advance_watermark_to(20)  # 13, 17 counted (17 triggers); 30 and 40 are open
    assert [p["ids"] for p in s.take_panes()] == [[13, 17]]
    assert s.operator.next_timers()[0] == 40_001
