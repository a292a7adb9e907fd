"""``countOrder=timestamp``: count windows as Storm's event-time count windows
(``withWindow(Count.of(size), Count.of(slide))`` + ``withTimestampField`` + ``withLag``) count.

    count(1), countOrder=timestamp:  112:283  102:604  122:792 | watermark 107 | watermark 127
    watermark 107 counts 102       -> window 0 [604]
    watermark 127 counts 112, 122  -> window 1 [283], window 2 [792]
    (countOrder=arrival, Flink's countWindow: [283] [604] [792] as the elements arrive)

Checked against (1) a per-element reference model of the rule (any disorder within the delay,
elements behind the watermark, equal timestamps, any bundling), (2) the port of Storm's own window
manager (``storm_port.py``) on input that arrives in timestamp order, with late tuples and equal
timestamps, avoiding Storm's defects, and (3) the issue's two examples. Flink's count windows
(``countOrder=arrival``, the default) are tested, unchanged, in ``test_count_windows.py``.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from event_streams import check_restore_continues, checked_panes, feed, run_storm, streams

from spark_windowing.errors import OptionError, SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.testing import TestStream
from spark_windowing.windows.kinds import CountWindow, TimestampCount
from tests.core.storm_port import StormWindow

KW = dict(aggregate="collect_list(i) AS ids, first(i) AS f, last(i) AS l, sum(i) AS s, count(*) AS n",
          key_columns="k", count_order="timestamp")
sizes = st.integers(1, 4).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n)))


# ---------------------------------------------------------------- the rule, per element

def ref_timestamp_count(steps, size, slide):
    """Windows (key, j, ids, watermark of the step that fires it) and late ids: per step, the
    elements the watermark passed are counted in (ts, arrival) order after the key's earlier
    ones; window j is elements max(0, (j+1)·slide − size) … (j+1)·slide − 1 of that sequence,
    fired in the step that completes it. (Ids are numbered in arrival order.)"""
    waiting, counted, late, panes = defaultdict(list), defaultdict(list), [], []
    for events, w in steps:
        late += [i for _, ts, i in events if ts < w]
        for key, ts, i in events:
            waiting[key] += [(ts, i)] if ts >= w else []
        for key in list(waiting):
            passed = sorted(e for e in waiting[key] if e[0] < w)
            waiting[key] = [e for e in waiting[key] if e[0] >= w]
            seq = counted[key]
            assert not seq or not passed or seq[-1] < passed[0]  # counting order is timestamp order
            done = len(seq) // slide
            seq += passed
            for j in range(done, len(seq) // slide):
                panes.append((key, j, [i for _, i in seq[max(0, (j + 1) * slide - size):(j + 1) * slide]], w))
    return sorted(panes), sorted(late)


def run(window, steps, **kw):
    return feed(TestStream(window=window, **{**KW, **kw}), steps)


def windows_of(s, steps):
    """(key, window_seq, ids, watermark) of the panes taken from ``s``, after checking each
    pane's shape (the watermark names the step that fired it: a window fires in the first step
    whose watermark passes its last element, so steps that fire have distinct watermarks)."""
    panes = checked_panes(s, steps)
    seqs = defaultdict(list)
    for p in panes:
        seqs[p["k"]].append(p["window_seq"])
    assert all(v == sorted(v) for v in seqs.values())  # a key's windows in order
    return sorted((p["k"], p["window_seq"], p["ids"], p["watermark"]) for p in panes)


@given(streams(), sizes)
@settings(max_examples=150, deadline=None)
def test_count_windows_in_timestamp_order_match_the_reference_model(steps, size_slide):
    size, slide = size_slide
    for window in ([f"count({size})"] if size == slide else []) + [f"count({size}, {slide})"]:
        s = run(window, steps)
        want_panes, want_late = ref_timestamp_count(steps, size, slide)
        assert windows_of(s, steps) == want_panes
        late = s.take_late()
        assert sorted(r["i"] for r in late) == want_late
        assert all(r["reason"] == "too_late" for r in late)


@given(streams(), sizes, st.lists(st.integers(1, 5), min_size=1, max_size=4))
@settings(max_examples=60, deadline=None)
def test_bundling_does_not_matter(steps, size_slide, cuts):
    """Each step's elements split into several bundles under the same watermark: same windows."""
    size, slide = size_slide
    split, c = [], 0
    for events, w in steps:
        while len(events) > cuts[c % len(cuts)]:
            split.append((events[:cuts[c % len(cuts)]], w))
            events, c = events[cuts[c % len(cuts)]:], c + 1
        split.append((events, w))
    assert windows_of(run(f"count({size}, {slide})", split), split) == \
        windows_of(run(f"count({size}, {slide})", steps), steps)


@given(streams(max_steps=10), st.integers(1, 10), sizes)
@settings(max_examples=40, deadline=None)
def test_snapshot_restore_continue_gives_the_same_panes(steps, cut, size_slide):
    size, slide = size_slide
    window = f"count({size}, {slide})"
    check_restore_continues(lambda: TestStream(window=window, **KW),
                            lambda blob: TestStream.restore(blob, window=window, **KW), steps, min(cut, len(steps)),
                            lambda s: windows_of(s, steps))


def test_state_keeps_only_what_later_windows_can_use():
    """Per key: the elements from the next incomplete window's first on, and those not counted.
    Keys a (even times) and b (odd), 100 steps of 25 each; the last step's watermark is 4950."""
    steps = [([("ab"[t % 2], t, t) for t in range(b, b + 50)], b) for b in range(0, 5000, 50)]
    s = run("count(7, 3)", steps)
    kept = {k: sorted(t // 1000 for k2, t in zip(s.operator.mixed.keys["k"].to_pylist(), s.operator.mixed.ts)
                      if k2 == k) for k in "ab"}
    # per key 2475 counted: 825 windows; the next (825) holds numbers 826·3 − 7 = 2471 … 2477
    assert kept == {"a": list(range(2 * 2471, 5000, 2)), "b": list(range(2 * 2471 + 1, 5000, 2))}
    assert (s.operator.num_windows, len(s.take_panes())) == (0, 2 * 825)  # window rows live for their step only


def test_next_timer_is_the_element_that_completes_the_next_window():
    s = TestStream(window="count(2)", **KW)
    s.add_elements([{"k": "a", "ts": t, "i": t} for t in (40, 13, 30, 17)], watermark=5)
    assert s.operator.next_timers()[0] == 17_001  # 13 and 17 complete window 0
    s.advance_watermark_to(20)
    assert [p["ids"] for p in s.take_panes()] == [[13, 17]]
    assert s.operator.next_timers()[0] == 40_001


# ---------------------------------------------------------------- the issue's examples

def _issue_example_1(count_order):
    """count(1, 1), lag 15 ms: 96:10, watermark 81, 74:34, watermark 119."""
    s = TestStream(window="count(1, 1)", aggregate="collect_list(v) AS vs", count_order=count_order)
    s.add_elements([{"ts": 96, "v": 10}])
    s.advance_watermark_to(81)
    s.add_elements([{"ts": 74, "v": 34}])
    s.advance_watermark_to(119)
    return [p["vs"] for p in s.take_panes()], [(r["v"], r["reason"]) for r in s.take_late()]


def _issue_example_2(count_order):
    """count(1): 112:283, 102:604, 122:792, watermark 107, watermark 127 — panes after each step."""
    s = TestStream(window="count(1)", aggregate="collect_list(v) AS vs", count_order=count_order)
    s.add_elements([{"ts": 112, "v": 283}, {"ts": 102, "v": 604}, {"ts": 122, "v": 792}])
    out = [[p["vs"] for p in s.take_panes()]]
    for w in (107, 127):
        s.advance_watermark_to(w)
        out.append([p["vs"] for p in s.take_panes()])
    return out


def test_issue_example_tuples_behind_the_watermark():
    assert _issue_example_1("timestamp") == ([[10]], [(34, "too_late")])  # Storm: [10], 34 to the late stream
    assert _issue_example_1(None) == ([[10], [34]], [])                   # Flink's countWindow: no late data
    sw = _storm(("count", 1), ("count", 1), [(96, 10), 81, (74, 34), 119])
    assert ([a.events for a in sw.activations], sw.late) == ([[10]], [34])


def test_issue_example_what_is_counted_and_in_what_order():
    # added / watermark 107 / watermark 127
    assert _issue_example_2("timestamp") == [[], [[604]], [[283], [792]]]
    assert _issue_example_2("arrival") == [[[283], [604], [792]], [], []]
    assert _issue_example_2("ARRIVAL ") == _issue_example_2(None)


# ---------------------------------------------------------------- Storm itself

def _storm(length, sliding, script):
    """One Storm window manager driven by ``script``: (ts, payload) tuples and watermarks."""
    sw = StormWindow(length, sliding)
    for item in script:
        if isinstance(item, tuple):
            sw.add(*item)
        else:
            sw.watermark(item)
    return sw


@st.composite
def storm_scenarios(draw):
    """Tuples arriving in timestamp order (odd, equal ones allowed), tuples behind the watermark
    (any time), even watermarks (so no tuple is exactly at one, where Storm counts at once), two
    keys (one Storm window manager each), and a final flush."""
    t, w, i, steps = 1, 0, 0, []
    for _ in range(draw(st.integers(1, 8))):
        events = []
        for _ in range(draw(st.integers(0, 6))):
            if w > 1 and draw(st.integers(0, 4)) == 0:
                events.append((draw(st.sampled_from("ab")), draw(st.integers(1, w - 1)), i))
            else:
                t += 2 * draw(st.integers(0, 3))
                events.append((draw(st.sampled_from("ab")), t, i))
            i += 1
        w = max(w, draw(st.integers(w // 2, (t + 1) // 2)) * 2)
        steps.append((events, w))
    steps.append(([], t + 1001))
    return steps


def storm_skips_a_tie(steps, slide):
    """Storm's defect with equal timestamps: the last trigger point of a watermark step has the
    timestamp of the next tuple counted in that step, which its count (resuming after the trigger
    point's time) then skips. True when a key of ``steps`` meets it."""
    marks, seq, prev = [w for _, w in steps], defaultdict(list), 0
    for step, (events, w) in enumerate(steps):
        for k, ts, _ in events:
            if ts >= prev:  # not late: counted at the first watermark past it
                seq[k].append((ts, next(s for s in range(step, len(marks)) if marks[s] > ts)))
        prev = w
    for k, items in seq.items():
        last = {}
        for p, (ts, step) in enumerate(items):
            if (p + 1) % slide == 0:
                last[step] = p
        if any(p + 1 < len(items) and items[p + 1][0] == items[p][0] for p in last.values()):
            return True
    return False


@given(storm_scenarios(), sizes)
@settings(max_examples=150, deadline=None)
def test_count_windows_in_timestamp_order_are_storms_event_time_count_windows(steps, size_slide):
    size, slide = size_slide
    assume(not storm_skips_a_tie(steps, slide))
    storm, fired_at = run_storm(("count", size), ("count", slide), steps)
    want = sorted((k, j, a.events, fired_at[k, j]) for k, sw in storm.items() for j, a in enumerate(sw.activations))
    s = feed(TestStream(window=f"count({size}, {slide})", **KW), steps, storm_order=True)
    assert windows_of(s, steps) == want
    assert sorted(r["i"] for r in s.take_late()) == sorted(i for sw in storm.values() for i in sw.late)


def test_storm_counts_a_watermark_step_in_arrival_order_and_expires_the_wrong_tuple():
    """Out of timestamp order within one watermark step, Storm's windows follow the queue: its
    second trigger (reference 112) expires 283 — queued first — and processes 604 again."""
    sw = _storm(("count", 1), ("count", 1), [(112, 283), (102, 604), (122, 792), 107, 127])
    assert ([a.events for a in sw.activations], sw.late) == ([[604], [604], [792]], [])  # 283: nowhere
    sw = _storm(("count", 2), ("count", 1), [(112, 283), (102, 604), (122, 792), 107, 127])
    assert [a.events for a in sw.activations] == [[604], [283, 604], [604, 792]]
    s = TestStream(window="count(2, 1)", aggregate="collect_list(v) AS vs", count_order="timestamp")
    s.add_elements([{"ts": 112, "v": 283}, {"ts": 102, "v": 604}, {"ts": 122, "v": 792}])
    s.advance_watermark_to(107)
    s.advance_watermark_to(127)
    assert [p["vs"] for p in s.take_panes()] == [[604], [604, 283], [283, 792]]


def test_storm_loses_count_of_a_tuple_behind_its_trigger_point():
    """count(2): 8, 5, 6 in one step. Storm triggers at the 2nd (reference 8) and resumes counting
    after 8, so 6 is never counted: its next window [6, 12] fires a step late, and 24, 34 never."""
    script = [(8, 8), (5, 5), (6, 6), 10, (12, 12), 20, (24, 24), 30, (34, 34), 40]
    sw = _storm(("count", 2), ("count", 2), script)
    assert [(a.reference_time, a.events) for a in sw.activations] == [(8, [8, 5]), (24, [6, 12])]
    s = TestStream(window="count(2)", aggregate="collect_list(v) AS vs", count_order="timestamp")
    for item in script:
        if isinstance(item, tuple):
            s.add_elements([{"ts": item[0], "v": item[1]}])
        else:
            s.advance_watermark_to(item)
    assert [(p["watermark"], p["vs"]) for p in s.take_panes()] == [(10, [5, 6]), (20, [8, 12]), (40, [24, 34])]


def test_storm_skips_equal_timestamps_at_a_trigger_point():
    """count(2): 3, 5, 5 then watermark 10: Storm triggers at the second tuple (5) and skips the
    third (also 5) when it resumes counting after 5, so its next window fires a step late."""
    script = [(3, "3"), (5, "5a"), (5, "5b"), 10, (17, "17"), 20, (29, "29"), 30]
    sw = _storm(("count", 2), ("count", 2), script)
    assert [(a.reference_time, a.events) for a in sw.activations] == [(5, ["3", "5a"]), (29, ["5b", "17"])]
    assert storm_skips_a_tie([([("a", 3, 0), ("a", 5, 1), ("a", 5, 2)], 10), ([("a", 17, 3)], 20)], 2)
    # a tuple exactly at the watermark: Storm counts 5a at watermark 5, then skips 5b (ts 5 >= 5: not late)
    sw = _storm(("count", 1), ("count", 1), [(5, "5a"), 5, (5, "5b"), 10, (17, "17"), 20])
    assert [a.events for a in sw.activations] == [["5a"], ["5b"]]  # 17 waits for another tuple
    s = TestStream(window="count(1)", aggregate="collect_list(v) AS vs", count_order="timestamp")
    s.add_elements([{"ts": 5, "v": "5a"}])
    s.advance_watermark_to(5)
    s.add_elements([{"ts": 5, "v": "5b"}])
    s.advance_watermark_to(10)
    s.add_elements([{"ts": 17, "v": "17"}])
    s.advance_watermark_to(20)
    assert [(p["watermark"], p["vs"]) for p in s.take_panes()] == [(10, ["5a"]), (10, ["5b"]), (20, ["17"])]


def test_storm_time_windows_lose_a_tuple_behind_one_more_than_the_lag_ahead():
    """Storm's other defect (time-length windows: WatermarkTimeEvictionPolicy with a lag): a
    queued tuple more than the lag past the window end stops the scan, so a later-queued tuple of
    a slower stream lands in no window and not in the late stream. Here tumbling(20 ms) with a
    lag of 15 ms: 200 (a fast stream) is queued before 40 (a slow one)."""
    sw = StormWindow(("time", 20), ("time", 20))
    sw.eviction.lag = 15
    sw.add(200, "a200")
    sw.add(40, "b40")
    for w in (25, 185):
        sw.watermark(w)
    sw.add(290, "b290")
    sw.watermark(275)
    assert ([(a.reference_time, a.events) for a in sw.activations], sw.late) == ([(200, ["a200"])], [])
    s = TestStream(window="tumbling(20 milliseconds)", aggregate="collect_list(v) AS vs")
    s.add_elements([{"ts": 200, "v": "a200"}, {"ts": 40, "v": "b40"}])
    s.advance_watermark_to(275)
    assert [p["vs"] for p in s.take_panes()] == [["b40"], ["a200"]]


# ---------------------------------------------------------------- the option

def test_the_option_picks_the_window_kind_and_is_part_of_the_fingerprint():
    spec = lambda **kw: OperatorSpec.from_options(window="count(3, 1)", aggregate="count(*) AS n", **kw)  # noqa: E731
    assert type(spec().window) is CountWindow and type(spec(count_order="arrival").window) is CountWindow
    assert spec(count_order=" Timestamp ").window == TimestampCount(3, 1)
    assert spec().fingerprint() == spec(count_order="arrival").fingerprint()  # existing queries: unchanged
    assert spec().fingerprint() != spec(count_order="timestamp").fingerprint()
    # the same window text and trigger (Never(): timestamp order fires each window once itself)
    tumbling = lambda **kw: OperatorSpec.from_options(window="count(3)", aggregate="count(*) AS n", **kw)  # noqa: E731
    assert tumbling(trigger="Never()").fingerprint() != tumbling(count_order="timestamp").fingerprint()
    assert tumbling(count_order="timestamp").describe()["count_order"] == "timestamp"
    assert spec(count_order="timestamp").window.spec() == spec().window.spec() == "count(3, 1)"


def test_a_restore_under_the_other_order_is_refused():
    s = TestStream(window="count(2)", **KW)
    s.add_elements([{"k": "a", "ts": 5, "i": 0}])
    with pytest.raises(SnapshotError, match="different windowing spec"):
        TestStream.restore(s.snapshot(), window="count(2)", **{**KW, "count_order": "arrival"})


@pytest.mark.parametrize("opts,why", [
    (dict(window="count(3)", count_order="storm"), None),
    (dict(window="count(3)", count_order="event_time"), None),
    (dict(window="tumbling(1 minute)", count_order="timestamp"), "only count(<size>[, <slide>]) windows"),
    (dict(window="session(1 minute)", count_order="arrival"), "only count(<size>[, <slide>]) windows"),
    (dict(window="count(3, 1 minute)", count_order="timestamp"), "always count in timestamp order"),
    (dict(window="sliding(1 minute, 3 elements)", count_order="arrival"), "always count in timestamp order"),
    (dict(window="count(3)", count_order="timestamp", timestamp_column=None), "event-time column"),
])
def test_bad_count_orders_fail_naming_the_option(opts, why):
    with pytest.raises(OptionError) as e:
        OperatorSpec.from_options(aggregate="count(*) AS n", **opts)
    assert e.value.option == "countOrder" and opts["count_order"] in str(e.value)
    assert "arrival" in str(e.value) and "timestamp" in str(e.value) and "Accepted" in str(e.value)
    if why:
        assert why in str(e.value)


@pytest.mark.parametrize("opts,option", [
    (dict(trigger="AfterWatermark(early=AfterCount(1))"), "trigger"),
    (dict(allowed_lateness="1 minute"), "allowedLateness"),
])
def test_timestamp_order_fires_each_window_once(opts, option):
    with pytest.raises(OptionError) as e:
        OperatorSpec.from_options(window="count(3)", aggregate="count(*) AS n", count_order="timestamp", **opts)
    assert e.value.option == option and "countOrder=timestamp" in str(e.value)
