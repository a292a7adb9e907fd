"""Two streams merged per key and window: join=inner|left|outer|cogroup (spark_windowing.operator.join).

    stream 1:   a@1  a@4 |        b@12          tumbling(10 ms), watermark -> 20
    stream 2:        a@7 |  a@13
    windows:    [0,10): a1 a4 | a7     -> inner, left, outer, cogroup
                [10,20): b12 (side 1 only)   -> left, outer, cogroup
                [10,20): a13 (side 2 only)   -> outer, cogroup

Checked against a per-element pure-Python reference model (any bundling, watermark moves, late
elements of either side, early firings under discarding/accumulating, session merges across the
streams), the min-watermark rule, and snapshot/restore in the middle of a stream.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing._time import MIN_TIME
from spark_windowing.errors import OptionError
from spark_windowing.operator import join as J
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.watermark import parse_watermark
from spark_windowing.testing import TestStream

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
KW = dict(key_columns="k", schema=SCHEMA, schema2=SCHEMA,
          aggregate="collect_list(v) AS l1, sum(v) AS s1, count(*) AS c1",
          aggregate2="collect_list(v) AS l2, count(*) AS c2")
WINDOWS = {
    "tumbling(10 milliseconds)": lambda t: [(t // 10 * 10, t // 10 * 10 + 10)],
    "sliding(10 milliseconds, 5 milliseconds)": lambda t: [(s, s + 10) for s in (t // 5 * 5 - 5, t // 5 * 5)],
    "cumulate(10 milliseconds, 5 milliseconds)":
        lambda t: [(t // 10 * 10, e) for e in (t // 10 * 10 + 5, t // 10 * 10 + 10) if e > t],
    "session(4 milliseconds)": lambda t: [(t, t + 4)],
}


# ---------------------------------------------------------------- reference model (per element)

def reference(steps, window, how, mode, early, lateness=0):
    """Panes and late (side, id, window_start) of ``steps`` = [(watermark, events1, events2)],
    events (key, ts, id). Trigger: ``Default()`` (ON_TIME when the watermark passes the end, then
    a LATE pane per bundle within ``lateness``), or with ``early``
    ``AfterWatermark(early=AfterCount(early))`` (EARLY every ``early`` elements since the last
    firing; finished, hence closed, after ON_TIME)."""
    assign, merging = WINDOWS[window], window.startswith("session")
    assert not (merging and lateness)  # the model merges sessions only without lateness
    open_: dict[tuple, dict] = {}   # (key, ws, we) -> {"all": [(side, id)], "new": [...], "idx": n, ...}
    panes, late = [], []
    for wm, ev1, ev2 in steps:
        touched = set()
        for side, events in ((1, ev1), (2, ev2)):
            for key, ts, i in events:
                for ws, we in assign(ts):
                    if we + lateness <= wm or open_.get((key, ws, we), {}).get("closed"):
                        late.append((side, i, ws))
                        continue
                    if merging:
                        ws, we = _merge_session(open_, key, ws, we)
                    w = open_.setdefault((key, ws, we), {"all": [], "new": [], "idx": 0})
                    w["all"].append((side, i))
                    w["new"].append((side, i))
                    w["eow"] = w.get("eow") or wm < we  # an element before the end: ON_TIME pane due
                    touched.add((key, ws, we))
        for wkey in sorted(open_):
            w = open_[wkey]
            if w.get("closed"):
                continue
            if not w.get("on_time") and wkey[2] <= wm:  # a window whose elements all came late: LATE
                timing, w["on_time"], w["closed"] = "ON_TIME" if w.get("eow") else "LATE", True, bool(early)
            elif w.get("on_time") and wkey in touched:
                timing = "LATE"
            elif early and wkey in touched and len(w["new"]) >= early and wkey[2] > wm:
                timing = "EARLY"
            else:
                continue
            content = w["all"] if mode == "accumulating" else w["new"]
            w["new"] = []
            s1 = [i for s, i in content if s == 1]
            s2 = [i for s, i in content if s == 2]
            emit = {"inner": bool(s1 and s2), "left": bool(s1), "outer": bool(s1 or s2), "cogroup": True}[how]
            if emit:
                panes.append((*wkey, timing, w["idx"], sorted(s1),
                              sum(s1) if s1 else None, len(s1), sorted(s2), len(s2)))
                w["idx"] += 1
        for wkey in [k for k in open_ if k[2] + lateness <= wm]:
            del open_[wkey]
    return sorted(panes, key=repr), sorted(late)


def _merge_session(open_, key, ws, we):
    """Merge proto-window [ws, we) with the key's open sessions it overlaps or touches; a merge
    that changes a session's bounds makes a new window (pane index from 0)."""
    absorbed, grew = [], True
    while grew:
        grew = False
        for k in list(open_):
            if k[0] == key and k not in absorbed and k[1] <= we and ws <= k[2]:
                absorbed.append(k)
                ws, we, grew = min(ws, k[1]), max(we, k[2]), True
    if absorbed != [(key, ws, we)]:
        merged = {"all": [], "new": [], "idx": 0}
        for k in absorbed:
            old = open_.pop(k)
            merged["all"] += old["all"]
            merged["new"] += old["new"]
        open_[(key, ws, we)] = merged
    return ws, we


def run(steps, window, how, mode, early, snapshot_at=None, lateness=0, **over):
    kw = dict(KW, **over, window=window, join=how, accumulation_mode=mode,
              allowed_lateness=f"{lateness} milliseconds",
              trigger=f"AfterWatermark(early=AfterCount({early}))" if early else None)
    s = TestStream(**kw)
    panes, late = [], []
    for n, (wm, ev1, ev2) in enumerate(steps):
        if snapshot_at == n:
            s = TestStream.restore(s.snapshot(), **kw)
        s.add_elements(_rows(ev1), stream2=_rows(ev2), watermark=wm)
        panes += s.take_panes()
        late += s.take_late()
    got = sorted(((p["k"], p["window_start"], p["window_end"], p["pane_timing"], p["pane_index"],
                   sorted(p.get("l1", [])), p["s1"], p["c1"], sorted(p.get("l2", [])), p["c2"]) for p in panes), key=repr)
    late_got = sorted((r[J.SIDE_COLUMN], r["v"] if r[J.SIDE_COLUMN] == 1 else r["__s2_v"],
                       r["window_start"]) for r in late)
    return got, late_got, panes


def _rows(events):
    return pa.Table.from_pylist([{"k": k, "ts": t, "v": i} for k, t, i in events], schema=SCHEMA)


@st.composite
def two_streams(draw, max_steps=6):
    """Bundles of both streams with unique ids, and a non-decreasing watermark per step."""
    n = draw(st.integers(1, max_steps))
    wm, ids, steps = -100, iter(range(1, 10_000)), []
    for _ in range(n):
        wm = draw(st.integers(wm, wm + 15)) if wm > -100 else draw(st.sampled_from([-100, 0, 5]))
        evs = []
        for _side in (1, 2):
            evs.append([(draw(st.sampled_from("ab")), draw(st.integers(max(wm - 6, 0), wm + 25 if wm > 0 else 25)),
                         next(ids)) for _ in range(draw(st.integers(0, 4)))])
        steps.append((wm, evs[0], evs[1]))
    steps.append((1_000, [], []))  # close everything
    return steps


@given(two_streams(), st.sampled_from(sorted(WINDOWS)), st.sampled_from(J.JOIN_KINDS),
       st.sampled_from(["discarding", "accumulating"]), st.sampled_from([None, 2]), st.sampled_from([0, 10]))
@settings(max_examples=300, deadline=None)
def test_matches_reference_model(steps, window, how, mode, early, lateness):
    lateness = 0 if window.startswith("session") else lateness
    got, late, _ = run(steps, window, how, mode, early, lateness=lateness)
    want, want_late = reference(steps, window, how, mode, early, lateness)
    assert got == want
    assert late == want_late


@given(two_streams(), st.sampled_from(sorted(WINDOWS)), st.sampled_from(J.JOIN_KINDS),
       st.sampled_from(["discarding", "accumulating"]), st.data())
@settings(max_examples=80, deadline=None)
def test_snapshot_restore_mid_stream(steps, window, how, mode, data):
    at = data.draw(st.integers(0, len(steps) - 1))
    whole = run(steps, window, how, mode, 2)
    restored = run(steps, window, how, mode, 2, snapshot_at=at)
    assert restored[:2] == whole[:2]


@given(two_streams(), st.sampled_from(J.JOIN_KINDS), st.sampled_from(["discarding", "accumulating"]))
@settings(max_examples=120, deadline=None)
def test_combinable_aggregates_on_the_per_slide_path(steps, how, mode):
    """sum/count only: sliding windows pre-aggregate per slide (operator._add_buckets)."""
    window = "sliding(10 milliseconds, 5 milliseconds)"
    got = run(steps, window, how, mode, None, aggregate="sum(v) AS s1, count(*) AS c1", aggregate2="count(*) AS c2")[2]
    got = sorted(((p["k"], p["window_start"], p["window_end"], p["pane_timing"], p["pane_index"], p["s1"], p["c1"],
                   p["c2"]) for p in got), key=repr)
    want = sorted((p[:5] + (p[6], p[7], p[9]) for p in reference(steps, window, how, mode, None)[0]), key=repr)
    assert got == want


def test_worked_example_of_the_module_docstring():
    steps = [(0, [("a", 1, 1), ("a", 4, 4)], [("a", 7, 7)]), (5, [("b", 12, 12)], [("a", 13, 13)]),
             (20, [], [])]
    out = {how: {(p[0], p[1], tuple(p[5]), tuple(p[8])) for p in run(steps, "tumbling(10 milliseconds)",
                                                                     how, "discarding", None)[0]}
           for how in J.JOIN_KINDS}
    both, left_only, right_only = ("a", 0, (1, 4), (7,)), ("b", 10, (12,), ()), ("a", 10, (), (13,))
    assert out["inner"] == {both}
    assert out["left"] == {both, left_only}
    assert out["outer"] == out["cogroup"] == {both, left_only, right_only}


def test_cogroup_emits_empty_on_time_panes_outer_does_not():
    """Discarding with early panes: the ON_TIME pane after an early one holds nothing new."""
    steps = [(0, [("a", 1, 1)], [("a", 2, 2)]), (10, [], [])]
    panes = {how: [(p[3], p[5], p[8]) for p in run(steps, "tumbling(10 milliseconds)", how, "discarding", 2)[0]]
             for how in J.JOIN_KINDS}
    assert panes["cogroup"] == [("EARLY", [1], [2]), ("ON_TIME", [], [])]
    assert panes["outer"] == panes["inner"] == panes["left"] == [("EARLY", [1], [2])]


# ---------------------------------------------------------------- sessions across both streams

def test_session_merges_elements_of_both_streams():
    """    stream 1: a@1 ........ a@9          session(5 ms)
           stream 2:      a@5
           one session [1, 14) holding all three: stream 2's element bridges the gap."""
    s = TestStream(window="session(5 milliseconds)", join="inner", **KW)
    s.add_elements([{"k": "a", "ts": 1, "v": 1}, {"k": "a", "ts": 9, "v": 9}], stream2=[{"k": "a", "ts": 5, "v": 5}])
    s.advance_watermark_to(100)
    assert [(p["window_start"], p["window_end"], p["l1"], p["l2"]) for p in s.take_panes()] == [(1, 14, [1, 9], [5])]


def test_sessions_apart_give_no_inner_pane():
    s = TestStream(window="session(5 milliseconds)", join="inner", **KW)
    s.add_elements([{"k": "a", "ts": 1, "v": 1}], stream2=[{"k": "a", "ts": 20, "v": 20}])
    s.advance_watermark_to(100)
    assert s.take_panes() == []


def test_global_window_with_count_trigger():
    s = TestStream(window="global", join="left", trigger="Repeatedly(AfterCount(2))", **KW)
    s.add_elements([], stream2=[{"k": "a", "ts": 1, "v": 1}, {"k": "a", "ts": 2, "v": 2}])
    s.add_elements([{"k": "a", "ts": 3, "v": 3}], stream2=[{"k": "a", "ts": 4, "v": 4}])
    assert [(p["l1"], p["l2"]) for p in s.take_panes()] == [([3], [4])]


def test_retractions_follow_the_emitted_panes():
    """accumulating_and_retracting: the inner pane is emitted once both sides arrived; its
    replacement retracts it."""
    s = TestStream(window="tumbling(10 milliseconds)", join="inner", accumulation_mode="accumulating_and_retracting",
                   trigger="AfterWatermark(early=AfterCount(1))", **KW)
    s.add_elements([{"k": "a", "ts": 1, "v": 1}], stream2=[])
    s.add_elements([], stream2=[{"k": "a", "ts": 2, "v": 2}])
    s.add_elements([{"k": "a", "ts": 3, "v": 3}], stream2=[])
    rows = [(p["kind"], p["pane_index"], p["l1"], p["l2"]) for p in s.take_panes()]
    assert rows == [("TRIGGER", 0, [1], [2]), ("RETRACTION", 0, [1], [2]), ("TRIGGER", 1, [1, 3], [2])]


# ---------------------------------------------------------------- late data per side

def test_late_rows_of_each_side_are_marked():
    s = TestStream(window="tumbling(10 milliseconds)", join="outer", **KW)
    s.add_elements([{"k": "a", "ts": 12, "v": 1}], stream2=[{"k": "a", "ts": 13, "v": 2}], watermark=10)
    s.add_elements([{"k": "a", "ts": 3, "v": 3}, {"k": "b", "ts": None, "v": 5}],
                   stream2=[{"k": "a", "ts": 4, "v": 4}, {"k": None, "ts": 15, "v": 6}])
    rows = s.take_late()
    assert not {J.ON1, J.ON2} & set(rows[0])  # internal markers stay out of the late table
    late = sorted((r[J.SIDE_COLUMN], r["reason"], r["v"], r["__s2_v"]) for r in rows)
    assert late == [(1, "malformed", 5, None), (1, "too_late", 3, None),
                    (2, "malformed", None, 6), (2, "too_late", None, 4)]


# ---------------------------------------------------------------- the merged watermark

@given(st.lists(st.tuples(st.lists(st.integers(0, 100), max_size=3), st.lists(st.integers(0, 100), max_size=3)),
                min_size=1, max_size=8), st.sampled_from([0, 5]))
@settings(max_examples=200, deadline=None)
def test_merged_watermark_is_the_earlier_streams_never_decreasing(batches, delay):
    """Per stream bounded(delay) from its own events; merged = min of the two, never back."""
    strategy = parse_watermark(f"bounded({delay} milliseconds)")
    state = J.JoinWatermark()
    seen1, seen2, prev = [], [], MIN_TIME
    for ev1, ev2 in batches:
        seen1 += ev1
        seen2 += ev2
        state = state.advance(strategy, max_event1=max(seen1) * 1000 if seen1 else None,
                              max_event2=max(seen2) * 1000 if seen2 else None, batch_time=0,
                              last_input1=None, last_input2=None)
        want = MIN_TIME if not (seen1 and seen2) else (min(max(seen1), max(seen2)) - delay) * 1000
        assert state.wm == max(prev, want)
        assert state.wm1 == (max(seen1) - delay) * 1000 if seen1 else state.wm1 == MIN_TIME
        prev = state.wm


def test_a_stream_without_events_stops_holding_back_after_the_idle_timeout():
    """watermarkIdleTimeout 10 ms: stream 2 never had an event; from 10 ms after the first
    batch on, stream 1's watermark alone moves the merged one."""
    strategy = parse_watermark("bounded(0 milliseconds)", "10 milliseconds")
    state = J.JoinWatermark()
    kw = dict(max_event1=50_000, max_event2=None, last_input1=10_000, last_input2=None, started=0)
    assert state.advance(strategy, batch_time=10_000, **kw).wm == MIN_TIME        # not idle yet
    state = state.advance(strategy, batch_time=10_001, **kw)
    assert state.wm == 50_000 and state.wm2 == MIN_TIME
    no_idle = parse_watermark("bounded(0 milliseconds)")
    assert J.JoinWatermark().advance(no_idle, batch_time=10**9, **kw).wm == MIN_TIME


def test_merge_watermarks_never_goes_back():
    assert J.merge_watermarks(50, 100, 40) == 50
    assert J.merge_watermarks(50, 100, 70) == 70


# ---------------------------------------------------------------- options

@pytest.mark.parametrize("kwargs, option", [
    (dict(join="full"), "join"),
    (dict(join="inner", key_columns2="k,j"), "keyColumns2"),
    (dict(join="inner", aggregate2="count(*) AS c1"), "aggregate2"),
    (dict(join="inner", aggregate2="sum(v)", aggregate="sum(v)"), "aggregate2"),
    (dict(join="inner", aggregate2="nope(v)"), "aggregate2"),
    (dict(join="inner", window="count(3)"), "window"),
    (dict(join="inner", window="record_sliding(1 second)"), "window"),
    (dict(join="inner", aggregate=None, process="tests.core.fixtures.process_functions:ids"), "process"),
    (dict(join="inner", aggregate2="spark_windowing.aggregates.accumulations:TopN(3, v, v)"), "aggregate2"),
])
def test_bad_join_options(kwargs, option):
    base = dict(window="tumbling(1 second)", aggregate="count(*) AS c1", key_columns="k")
    with pytest.raises(OptionError) as e:
        OperatorSpec.from_options(**{k: v for k, v in {**base, **kwargs}.items() if v is not None})
    assert e.value.option == option
    assert "Accepted:" in str(e.value)


def test_missing_stream2_column_is_an_option_error():
    spec = OperatorSpec.from_options(window="tumbling(1 second)", join="inner", key_columns="k",
                                     aggregate="count(*) AS n", aggregate2="sum(w) AS w")
    with pytest.raises(OptionError) as e:
        J.union_schema(SCHEMA, SCHEMA, spec)
    assert e.value.option == "aggregate2" and "'w'" in str(e.value)


def test_join_is_part_of_the_fingerprint_only_with_join():
    """A join's state is not restorable as a single stream's (and vice versa)."""
    a = OperatorSpec.from_options(window="tumbling(1 second)", aggregate="count(*) AS n")
    b = OperatorSpec.from_options(window="tumbling(1 second)", aggregate="count(*) AS n", join="inner")
    assert [x.alias for x in b.aggregates if not x.hidden] == ["n", "n_2"]  # aggregate2 defaults to aggregate
    assert a.join is None and a.fingerprint() != b.fingerprint()
    assert "join" not in a.describe()
