"""``record_sliding(size)``: Kafka Streams' sliding windows (KIP-450), emitted final.

    record_sliding(5 s), key A:    8000      9200         12400
    [3000, 8000]     left of 8000   x                              -> [1]
    [4200, 9200]     left of 9200   x         x                    -> [1, 2]
    [7400, 12400]    left of 12400  x         x            x       -> [1, 2, 3]
    [8001, 13001]    right of 8000            x            x       -> [2, 3]
    [9201, 14201]    right of 9200                         x       -> [3]
    (right of 12400 is empty: no window)

Checked against (1) a per-element reference model straight from KIP-450 (each record's window
ending at it and the one starting just after it; a window takes the records that arrived while it
was open and fires once when the watermark passes end + 1 µs + allowedLateness), (2) a brute-force
model that slides a window over every millisecond and keeps the distinct record sets, (3) the
worked example of Kafka's ``SlidingWindows`` javadoc (above), and (4) KIP-450's rules one by one.
Times are integer milliseconds (the timestamps' grain, as in Kafka); the reference-model property
also runs in integer microseconds and seconds (a window starts one grain after a record).
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from event_streams import check_restore_continues, feed, streams as _streams

from spark_windowing.errors import OptionError
from spark_windowing.testing import TestStream
from spark_windowing.windows.kinds import RecordSliding, parse_window

AGG = "collect_list(i) AS ids, first(i) AS f, last(i) AS l, sum(i) AS s, count(*) AS n, min(ts) AS lo, max(ts) AS hi"
NEG_INF = -(10 ** 12)


# ---------------------------------------------------------------- reference models (per element)

def ref_record_sliding(steps, size, lateness):
    """KIP-450 per element. ``steps`` = [(events [(key, ts, id)], watermark)], ms. Returns the
    panes [(key, start, end, ids)] and the late ids.

    A window [s, e] (both inclusive) is closed at watermark W when e + lateness < W. A record at t
    is too late when the last window that could hold it, [t, t + size], is closed. Otherwise it
    joins every window holding it that is open when it arrives, and brings the candidate windows
    [t − size, t] and [t + 1, t + 1 + size] if they are open when it arrives. A window fires once, at the step that closes it, with
    the records that arrived while it was open, if there are any; a record no fired window held is
    late once [t, t + size] has closed.
    """
    kept = defaultdict(list)  # key -> [(ts, id, watermark at arrival)]
    panes, late, shown = [], [], set()
    wm = prev = NEG_INF
    for events, w in steps:
        wm = max(wm, w)
        for key, ts, i in events:
            if ts + size + lateness < wm:
                late.append(i)
            else:
                kept[key].append((ts, i, wm))
        for key, items in kept.items():
            # a record brings its two windows if they are open when it arrives
            starts = {s for ts, _, arrived in items for s in (ts - size, ts + 1) if s + size + lateness >= arrived}
            for s in sorted(starts):
                e = s + size
                if not (prev <= e + lateness < wm):  # closes at this step
                    continue
                ids = [i for ts, i, arrived in sorted(items) if s <= ts <= e and e + lateness >= arrived]
                if ids:
                    panes.append((key, s, e, ids))
                    shown.update(ids)
        for key, items in kept.items():
            for ts, i, _ in items:
                if prev <= ts + size + lateness < wm and i not in shown:
                    late.append(i)
        prev = wm
    return sorted(panes), sorted(late)


def brute_force_sets(records, size):
    """Every window [s, s + size] for every integer s: the distinct non-empty record sets."""
    times = [ts for ts, _ in records]
    sets = set()
    for s in range(min(times) - size - 1, max(times) + 2):
        ids = tuple(sorted(i for ts, i in records if s <= ts <= s + size))
        if ids:
            sets.add(ids)
    return sets


# ---------------------------------------------------------------- running the operator

UNIT_NAMES = {"ms": "milliseconds", "us": "microseconds", "s": "seconds"}


def run(steps, size, lateness=0, unit="ms", **kw):
    """The operator over ``steps``, all times in ``unit`` (an integer epoch column: the grain)."""
    name = UNIT_NAMES[unit]
    s = TestStream(window=f"record_sliding({size} {name})", aggregate=AGG, key_columns="k",
                   allowed_lateness=f"{lateness} {name}", timestamp_unit=unit, **kw)
    return feed(s, steps)


def panes_of(s, steps, size):
    ts_of = {i: ts for events, _ in steps for _, ts, i in events}
    panes = s.take_panes()
    for p in panes:  # fixed size, inclusive bounds; fired once, final; aggregates over the same records
        times = [ts_of[i] for i in p["ids"]]
        assert p["window_end"] - p["window_start"] == size
        assert all(p["window_start"] <= t <= p["window_end"] for t in times)
        assert (p["pane_timing"], p["is_final"], p["pane_index"], p["kind"]) == ("ON_TIME", True, 0, "TRIGGER")
        assert p["pane_timestamp"] == p["window_end"]
        assert (p["f"], p["l"], p["s"], p["n"]) == (p["ids"][0], p["ids"][-1], sum(p["ids"]), len(p["ids"]))
        assert (p["lo"], p["hi"]) == (min(times), max(times))
    return sorted((p["k"], p["window_start"], p["window_end"], p["ids"]) for p in panes)


# ---------------------------------------------------------------- properties

@given(_streams(spread=12), st.sampled_from([1, 3, 5, 10]), st.sampled_from([0, 4, 12]), st.sampled_from(["ms", "us", "s"]))
@settings(max_examples=200, deadline=None)
def test_matches_the_kip450_reference_model(steps, size, lateness, unit):
    s = run(steps, size, lateness, unit)
    want_panes, want_late = ref_record_sliding(steps, size, lateness)
    assert panes_of(s, steps, size) == want_panes
    late = s.take_late()
    assert sorted(r["i"] for r in late) == want_late
    assert all(r["reason"] == "too_late" for r in late)
    # every record is in a pane or in the late output, never both
    all_ids = {i for events, _ in steps for _, _, i in events}
    shown = {i for _, _, _, ids in want_panes for i in ids}
    assert shown | set(want_late) == all_ids and not shown & set(want_late)


@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), min_size=1, max_size=25),
       st.sampled_from([1, 4, 10]))
@settings(max_examples=150, deadline=None)
def test_one_window_per_distinct_record_set_of_a_window_slid_over_every_millisecond(records, size):
    events = [(k, ts, i) for i, (k, ts) in enumerate(records)]
    steps = [(events, 0), ([], 10_000)]
    panes = panes_of(run(steps, size), steps, size)
    for key in "ab":
        mine = [tuple(sorted(ids)) for k, _, _, ids in panes if k == key]
        assert len(mine) == len(set(mine)), "a record set fired twice"
        by_ts = sorted((ts, i) for k, ts, i in events if k == key)
        assert set(mine) == (brute_force_sets(by_ts, size) if by_ts else set())


@given(st.lists(st.integers(0, 60), min_size=1, max_size=20), st.lists(st.integers(0, 19), max_size=10),
       st.sampled_from([2, 5, 10]))
@settings(max_examples=100, deadline=None)
def test_each_distinct_timestamp_brings_one_window_ending_at_it_and_at_most_one_starting_after_it(
        times, dup_idx, size):
    events = [("a", ts, i) for i, ts in enumerate(times)]
    dups = [("a", times[j % len(times)], len(times) + n) for n, j in enumerate(dup_idx)]
    bounds = []
    for evs in (events, events + dups):
        steps = [(evs, 0), ([], 10_000)]
        bounds.append(sorted((s, e) for _, s, e, _ in panes_of(run(steps, size), steps, size)))
    assert bounds[0] == bounds[1], "records at a timestamp already seen brought new windows"
    distinct = sorted(set(times))
    ends = [e for _, e in bounds[0]]
    assert set(distinct) <= set(ends)  # one window ends at every record
    others = [e for e in ends if e not in distinct]
    assert all(e - size - 1 in distinct for e in others)  # the rest start just after a record
    assert len(bounds[0]) <= 2 * len(distinct) - 1


@given(_streams(max_steps=10, spread=12), st.integers(1, 10), st.sampled_from([0, 6]))
@settings(max_examples=40, deadline=None)
def test_snapshot_restore_continue_gives_the_same_panes(steps, cut, lateness):
    cut = min(cut, len(steps))
    kw = dict(window="record_sliding(7 milliseconds)", aggregate=AGG, key_columns="k",
              allowed_lateness=f"{lateness} milliseconds")
    check_restore_continues(lambda: run([], 7, lateness), lambda blob: TestStream.restore(blob, **kw), steps, cut,
                            lambda s: panes_of(s, steps, 7))


# ---------------------------------------------------------------- KIP-450's rules, one by one

def test_kafka_sliding_windows_javadoc_example():
    """Kafka's ``SlidingWindows`` javadoc: time difference 5000 ms, records A=1 @8000, A=2 @9200,
    A=3 @12400 -> exactly five windows."""
    s = TestStream(window="record_sliding(5 seconds)", aggregate="collect_list(v) AS vs", key_columns="k")
    s.add_elements([{"k": "A", "ts": 8000, "v": 1}, {"k": "A", "ts": 9200, "v": 2},
                    {"k": "A", "ts": 12400, "v": 3}])
    s.advance_watermark_to(20_000)
    assert sorted((p["window_start"], p["window_end"], p["vs"]) for p in s.take_panes()) == [
        (3000, 8000, [1]), (4200, 9200, [1, 2]), (7400, 12400, [1, 2, 3]), (8001, 13001, [2, 3]),
        (9201, 14201, [3])]


def test_both_bounds_are_inclusive():
    #   size 10:  0 ......... 10      -> [0, 10] holds both
    steps = [([("a", 0, 0), ("a", 10, 1)], 0), ([], 100)]
    assert [(st_, en, ids) for _, st_, en, ids in panes_of(run(steps, 10), steps, 10)] == [
        (-10, 0, [0]), (0, 10, [0, 1]), (1, 11, [1])]
    #   0 ........... 11              -> 11 ms apart: no window holds both ([1, 11] is left of 11
    #                                    and right of 0 at once: one window)
    steps = [([("a", 0, 0), ("a", 11, 1)], 0), ([], 100)]
    assert [(st_, en, ids) for _, st_, en, ids in panes_of(run(steps, 10), steps, 10)] == [
        (-10, 0, [0]), (1, 11, [1])]


def test_a_window_fires_once_when_watermark_passes_its_inclusive_end_plus_lateness():
    #   size 10, lateness 5: [-10, 0] closes once watermark > 0 + 5
    s = TestStream(window="record_sliding(10 milliseconds)", aggregate="count(*) AS n",
                   allowed_lateness="5 milliseconds")
    s.add_elements([{"ts": 0}])
    s.advance_watermark_to(5)  # end + lateness == watermark: a record at 0 may still come
    assert s.take_panes() == []
    s.add_elements([{"ts": 0}])
    s.advance_watermark_to(6)
    assert [(p["window_start"], p["window_end"], p["n"]) for p in s.take_panes()] == [(-10, 0, 2)]
    s.advance_watermark_to(1000)
    assert s.take_panes() == [] and s.take_late() == []


def test_an_out_of_order_record_within_lateness_updates_every_window_that_holds_it():
    #   size 10, lateness 15:  0 ..(5 comes last).. 8 ........... 20     watermark 14
    steps = [([("a", 0, 0), ("a", 8, 1), ("a", 20, 2)], 14), ([("a", 5, 3)], 14), ([], 1000)]
    s = run(steps, 10, lateness=15)
    panes = panes_of(s, steps, 10)
    holding = [(st_, en, ids) for _, st_, en, ids in panes if st_ <= 5 <= en]
    assert holding == [(-5, 5, [0, 3]), (-2, 8, [0, 3, 1]), (1, 11, [3, 1])]
    # the same windows as had it come in order
    in_order = [([("a", 0, 0), ("a", 5, 3), ("a", 8, 1), ("a", 20, 2)], 14), ([], 1000)]
    assert panes == panes_of(run(in_order, 10, lateness=15), in_order, 10)
    assert s.take_late() == []


def test_a_late_record_joins_the_windows_still_open_and_no_closed_one():
    #   size 10, lateness 0: 31 at watermark 30, then 25 at watermark 30:
    #   [15, 25] (ends at 25) is closed; [21, 31] is open and takes 25; [26, 36] starts after it
    steps = [([("a", 31, 0)], 30), ([("a", 25, 1)], 30), ([], 1000)]
    s = run(steps, 10)
    assert [(st_, en, ids) for _, st_, en, ids in panes_of(s, steps, 10)] == [
        (21, 31, [1, 0]), (26, 36, [0])]
    assert s.take_late() == []


def test_a_record_no_window_can_still_hold_goes_to_the_late_output():
    #   size 10, lateness 0, watermark 30: 12's last window [12, 22] is closed -> late on arrival;
    #   21 could still be in [21, 31] (if a record at 31 came); none comes -> late once it closes
    s = TestStream(window="record_sliding(10 milliseconds)", aggregate="count(*) AS n", key_columns="k",
                   allowed_lateness="0 milliseconds")
    s.add_elements([{"k": "a", "ts": 40}], watermark=30)
    s.add_elements([{"k": "a", "ts": 12}, {"k": "a", "ts": 21}], watermark=30)
    late = s.take_late()
    assert [(r["ts"], r["reason"], r["window_start"], r["window_end"]) for r in late] == [(12, "too_late", 2, 12)]
    s.advance_watermark_to(1000)
    assert [(p["window_start"], p["window_end"], p["n"]) for p in s.take_panes()] == [(30, 40, 1)]
    assert [(r["ts"], r["reason"], r["window_start"], r["window_end"]) for r in s.take_late()] == [
        (21, "too_late", 11, 21)]


def test_no_window_per_millisecond():
    #   size 1 hour, 300 records a second apart: the 300 windows ending at a record and the 299
    #   starting just after one, not one per millisecond
    size = 3_600_000
    steps = [([("a", t * 1000, t) for t in range(300)], 0), ([], 10 * size)]
    panes = run(steps, size).take_panes()
    assert len(panes) == 2 * 300 - 1
    assert sorted(p["ids"] for p in panes) == sorted([list(range(t + 1)) for t in range(300)]
                                                     + [list(range(t + 1, 300)) for t in range(299)])


@pytest.mark.parametrize("combiner,pick", [("end_of_window", None), ("earliest", min), ("latest", max)])
def test_pane_timestamp_is_the_inclusive_end_or_the_first_or_last_record_time(combiner, pick):
    times = [8000, 9200, 12400]
    s = TestStream(window="record_sliding(5 seconds)", aggregate="collect_list(ts) AS t",
                   timestamp_combiner=combiner)
    s.add_elements([{"ts": t} for t in times])
    s.advance_watermark_to(20_000)
    panes = s.take_panes()
    assert len(panes) == 5
    for p in panes:
        held = [t for t in times if p["window_start"] <= t <= p["window_end"]]
        assert p["t"] == held
        assert p["pane_timestamp"] == (p["window_end"] if pick is None else pick(held))


def test_options_that_do_not_apply_are_rejected():
    with pytest.raises(OptionError, match="trigger"):
        TestStream(window="record_sliding(1 second)", aggregate="count(*) AS n", trigger="AfterCount(2)")
    assert TestStream(window="record_sliding(1 second)", aggregate="count(*) AS n", trigger="Default()")
    assert parse_window("record_sliding(90 seconds)") == RecordSliding(90_000_000)
    assert parse_window(parse_window("record_sliding(90 seconds)").spec()) == RecordSliding(90_000_000)


# ---------------------------------------------------------------- the range path (no pair expansion)

RANGE_AGG = ("sum(v) AS sv, avg(v) AS av, count(v) AS cv, count(*) AS n, min(v) AS lov, max(v) AS hiv, "
             "sum(w) AS sw, avg(w) AS aw, min(w) AS low, max(w) AS hiw, min(i) AS loi, max(i) AS hii")


@given(_streams(max_steps=10, spread=12), st.sampled_from(["record_sliding(6 milliseconds)",
                                                           "count(3, 5 milliseconds)",
                                                           "sliding(10 milliseconds, 2 elements)"]))
@settings(max_examples=120, deadline=None)
def test_range_aggregation_equals_the_pair_expansion(steps, window):
    """With only sum / avg / count / min / max over numbers, buffered windows aggregate straight
    from each window's range of sorted elements (``reduceat``); adding collect_list forces the
    expansion into (element, window) pairs. Both must give the same panes, nulls and NaN included."""
    def rows(events):
        out = []
        for k, ts, i in events:
            v = None if i % 5 == 0 else i % 7 - 3
            w = float("nan") if i % 11 == 3 else (None if v is None else v * 0.25)
            out.append({"k": k, "ts": ts, "i": i, "v": v, "w": w})
        return out

    def panes(aggregate):
        s = TestStream(window=window, aggregate=aggregate, key_columns="k", timestamp_unit="ms")
        for events, wm in steps:
            if events:
                s.add_elements(pa.Table.from_pylist(rows(events), schema=SCHEMA), watermark=wm)
            else:
                s.advance_watermark_to(wm)
        return s.take_panes()

    fast, exact = panes(RANGE_AGG), panes(RANGE_AGG + ", collect_list(i) AS ids")
    assert len(fast) == len(exact)
    key = lambda p: (p["k"], p["window_start"], p["window_end"], p.get("window_seq"))  # noqa: E731
    for f, e in zip(sorted(fast, key=key), sorted(exact, key=key)):
        e = {c: e[c] for c in f}
        for c in ("aw", "sw", "low", "hiw", "av"):  # floats: same values, NaN equal to NaN
            a, b = f.pop(c), e.pop(c)
            assert (a is None and b is None) or a == pytest.approx(b, nan_ok=True), (c, f, e)
        assert f == e


SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("i", pa.int64()), ("v", pa.int32()),
                    ("w", pa.float64())])


def test_record_admitted_late_is_in_the_window_the_javadoc_rule_gives():
    """Where we differ from Kafka Streams 4.1 (docs/semantics.md, "Record-sliding windows"): size
    10 ms, grace 5 ms, arrival b@100, a@94, a@100. a@94 is admitted (its window [94, 104] is open
    at stream time 100) though its left window [84, 94] is already closed; Kafka builds a@100's
    window [90, 100] from earlier windows' aggregates, finds none for a, and so leaves a@94 in no
    window. The javadoc's rule — a window holds every record within it — puts a@94 in [90, 100]."""
    s = TestStream(window="record_sliding(10 milliseconds)", aggregate="collect_list(ts) AS ts_list",
                   key_columns="k", allowed_lateness="5 milliseconds")
    s.add_elements([{"k": "b", "ts": 100}])
    s.add_elements([{"k": "a", "ts": 94}], watermark=100)  # stream time 100, as after b@100
    s.add_elements([{"k": "a", "ts": 100}])
    s.advance_watermark_to(1000)
    a = [(p["window_start"], p["window_end"], p["ts_list"]) for p in s.take_panes() if p["k"] == "a"]
    assert (90, 100, [94, 100]) in a
    assert s.take_late() == []
