"""Process functions (``process=module:function``) and evictors, without Spark.

The property tests run TestStream with ``process_functions:ids`` (a pane described by the ids of
its elements, its new, evicted and expired elements, in order) against the reference model's
process hook (``reference.ReferenceStream(process=describe, evictor=...)``, per element), over
random windows, triggers, accumulation modes, lateness and evictors. Fixed cases pin each
evictor to Flink's ``evictBefore`` semantics with a timeline.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import SETTINGS, apply, operations, triggers, typeable, windows

from reference import ReferenceStream
from spark_windowing.errors import OptionError, ProcessError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.testing import TestStream
from tests.core.fixtures.process_functions import describe

FN = "tests.core.fixtures.process_functions:"
MS = "milliseconds"
EVICTORS = [None, "count(1)", "count(2)", "count(3)", f"time(5 {MS})", f"time(20 {MS})", "delta(3, v)",
            "delta(0.5, v)"]


@st.composite
def process_specs(draw, mode=None):
    return dict(
        window=draw(windows()), trigger=draw(triggers()),
        accumulation_mode=mode or draw(st.sampled_from(["discarding", "accumulating",
                                                        "accumulating_and_retracting"])),
        allowed_lateness=f"{draw(st.sampled_from([0, 0, 5, 20, 1000]))} {MS}",
        timestamp_combiner=draw(st.sampled_from(["end_of_window", "earliest", "latest"])),
        key_columns=draw(st.sampled_from([None, "k", ["k", "k2"]])),
        timestamp_column="ts", timestamp_unit="ms", fire_only_updated_panes=draw(st.booleans()),
        evictor=draw(st.sampled_from(EVICTORS)))


def run(stream, ops) -> list[list[dict]]:
    out = []
    for op in ops:
        apply(stream, op)
        out.append(stream.take_panes())
        stream.take_late()
    return out


def counted(panes: list[dict], infinite: bool) -> Counter:
    """Panes as a multiset; lists keep their order (it is part of what a process function sees)."""
    out = Counter()
    for p in panes:
        p = {**p, "watermark": "+inf" if infinite else p["watermark"]}
        out[tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in p.items()))] += 1
    return out


def assert_matches_reference(spec: dict, ops, fn: str = "ids") -> None:
    got = run(TestStream(process=FN + fn, **spec), ops)
    want = run(ReferenceStream(process=describe, **spec), ops)
    infinite = False
    for i, (op, g, w) in enumerate(zip(ops, got, want)):
        infinite = infinite or op[0] == "inf"
        assert counted(g, infinite) == counted(w, infinite), \
            f"step {i} ({op}) of {spec}:\n TestStream {g}\n reference  {w}\n ops {ops[:i + 1]}"


# ------------------------------------------------------------------ against the reference model

@settings(max_examples=150, **SETTINGS)
@given(spec=process_specs(), ops=operations().map(typeable))
def test_process_panes_match_reference_model(spec, ops):
    assert_matches_reference(spec, ops)


@settings(max_examples=40, **SETTINGS)
@given(spec=process_specs(), ops=operations(max_ops=10).map(typeable))
def test_pandas_input_gives_the_same_panes(spec, ops):
    assert_matches_reference(spec, ops, fn="ids_pandas")


@settings(max_examples=60, **SETTINGS)
@given(spec=process_specs(), ops=operations().map(typeable), cut=st.integers(0, 16))
def test_snapshot_and_restore_mid_stream_gives_the_same_panes(spec, ops, cut):
    spec = {**spec, "process": FN + "ids"}
    whole = run(TestStream(**spec), ops)
    first = TestStream(**spec)
    before = run(first, ops[:cut])
    restored = TestStream.restore(first.snapshot(), **spec)
    assert before + run(restored, ops[cut:]) == whole


@settings(max_examples=40, **SETTINGS)
@given(spec=process_specs().filter(lambda s: not s["window"].startswith("session")),
       ops=operations().map(typeable))
def test_pane_is_previous_pane_minus_expired_and_evicted_plus_new(spec, ops):
    """Storm's TupleWindow bookkeeping: what changed since the last firing explains the pane
    (every firing is emitted here; merged sessions start from their parts' panes)."""
    spec = {**spec, "fire_only_updated_panes": False}
    last: dict[tuple, list[int]] = {}
    for panes in run(TestStream(process=FN + "ids", **spec), ops):
        for p in panes:
            if p["kind"] != "TRIGGER":
                continue
            w = (p.get("k"), p.get("k2"), p["window_start"], p["window_end"])
            prev = last.get(w, []) if p["pane_index"] > 0 else []
            gone = set(p["expired_ids"]) | set(p["evicted_ids"])
            assert sorted(p["ids"]) == sorted([i for i in prev if i not in gone] + p["new_ids"])
            last[w] = p["ids"]


# ------------------------------------------------------------------ evictors: Flink's evictBefore

def stream(evictor, mode="accumulating", trigger="Repeatedly(AfterCount(1))", **kw):
    return TestStream(window="global", trigger=trigger, process=FN + "ids", evictor=evictor,
                      accumulation_mode=mode, **kw)


def test_count_evictor_keeps_the_last_n_in_arrival_order():
    #  arrival  id0@t9  id1@t1  id2@t5 | id3@t0
    #  count(2) -> [1, 2] (id0 evicted: first in the buffer, not the oldest timestamp) | [2, 3]
    s = stream("count(2)")
    s.add_elements([{"id": 0, "ts": 9}, {"id": 1, "ts": 1}, {"id": 2, "ts": 5}])
    s.add_elements([{"id": 3, "ts": 0}])
    a, b = s.take_panes()
    assert (a["ids"], a["evicted_ids"]) == ([1, 2], [0])
    assert (b["ids"], b["new_ids"], b["evicted_ids"]) == ([2, 3], [3], [1])


def test_time_evictor_keeps_elements_after_max_timestamp_minus_d():
    #  ts  2   5   7   | 12          time(5 ms): cutoff = max - 5, keep ts > cutoff
    #  pane 1: max 7 -> cutoff 2 -> [5, 7] (2 evicted: ts == cutoff is evicted, as Flink's <=)
    #  pane 2: max 12 -> cutoff 7 -> [12]  (5 and 7 evicted)
    s = stream(f"time(5 {MS})")
    s.add_elements([{"id": t, "ts": t} for t in (2, 5, 7)])
    s.add_elements([{"id": 12, "ts": 12}])
    a, b = s.take_panes()
    assert (a["ids"], a["evicted_ids"]) == ([5, 7], [2])
    assert (b["ids"], b["evicted_ids"]) == ([12], [5, 7])


def test_time_evictor_uses_the_newest_timestamp_not_the_last_arrival():
    s = stream(f"time(5 {MS})")
    s.add_elements([{"id": 0, "ts": 20}, {"id": 1, "ts": 16}, {"id": 2, "ts": 3}])
    assert s.take_panes()[0]["ids"] == [0, 1]


def test_delta_evictor_compares_with_the_last_element():
    #  v    1   4   9   7   (last = 7)   delta(3, v): evict |v - 7| >= 3 -> 1 and 4 evicted; 9 kept
    s = stream("delta(3, v)")
    s.add_elements([{"id": i, "ts": i, "v": v} for i, v in enumerate((1, 4, 9, 7))])
    p = s.take_panes()[0]
    assert (p["ids"], p["evicted_ids"]) == ([2, 3], [0, 1])


def test_delta_evictor_keeps_null_values_and_everything_when_the_last_is_null():
    s = stream("delta(1, v)", trigger="Repeatedly(AfterCount(3))")
    s.add_elements([{"id": 0, "ts": 0, "v": 100}, {"id": 1, "ts": 1, "v": None}, {"id": 2, "ts": 2, "v": 5}])
    s.add_elements([{"id": 3, "ts": 3, "v": 8}, {"id": 4, "ts": 4, "v": 50}, {"id": 5, "ts": 5, "v": None}])
    a, b = s.take_panes()
    assert (a["ids"], a["evicted_ids"]) == ([1, 2], [0])
    assert (b["ids"], b["evicted_ids"]) == ([1, 2, 3, 4, 5], [])


def test_evicted_elements_leave_the_buffer_for_good():
    # Flink rewrites the window state without the evicted elements: a later, wider pane does
    # not bring them back.
    s = stream("count(1)", trigger="Repeatedly(AfterCount(2))")
    s.add_elements([{"id": 0, "ts": 0}, {"id": 1, "ts": 1}])
    s.add_elements([{"id": 2, "ts": 2}, {"id": 3, "ts": 3}])
    a, b = s.take_panes()
    assert a["ids"] == [1] and b["ids"] == [3] and b["evicted_ids"] == [1, 2]


# ------------------------------------------------------------------ new / evicted / expired

def test_discarding_reports_the_previous_pane_as_expired():
    s = TestStream(window="tumbling(10 milliseconds)", trigger="AfterWatermark(early=AfterCount(2))",
                   process=FN + "ids")
    s.add_elements([{"id": 0, "ts": 1}, {"id": 1, "ts": 2}])
    s.add_elements([{"id": 2, "ts": 3}])
    s.advance_watermark_to(10)
    early, on_time = s.take_panes()
    assert (early["ids"], early["new_ids"], early["expired_ids"]) == ([0, 1], [0, 1], [])
    assert (on_time["ids"], on_time["new_ids"], on_time["expired_ids"]) == ([2], [2], [0, 1])


def test_accumulating_pane_has_old_and_new_elements_and_nothing_expires():
    s = TestStream(window="tumbling(10 milliseconds)", trigger="AfterWatermark(early=AfterCount(2))",
                   process=FN + "ids", accumulation_mode="accumulating_and_retracting")
    s.add_elements([{"id": 0, "ts": 1}, {"id": 1, "ts": 2}])
    s.add_elements([{"id": 2, "ts": 3}])
    s.advance_watermark_to(10)
    early, retraction, on_time = s.take_panes()
    assert retraction["kind"] == "RETRACTION" and retraction["ids"] == early["ids"] == [0, 1]
    assert (on_time["ids"], on_time["new_ids"], on_time["expired_ids"]) == ([0, 1, 2], [2], [])


def test_session_merge_interleaves_the_buffers_by_arrival():
    #  t:  0 (id0, batch 1)   10 (id1, batch 1)   5 (id2, batch 2) bridges both -> one session
    s = TestStream(window="session(5 milliseconds)", trigger="Repeatedly(AfterCount(1))",
                   process=FN + "ids", accumulation_mode="accumulating")
    s.add_elements([{"id": 1, "ts": 10}, {"id": 0, "ts": 0}])
    s.add_elements([{"id": 2, "ts": 5}])
    merged = s.take_panes()[-1]
    assert (merged["window_start"], merged["window_end"], merged["pane_index"]) == (0, 15, 0)
    assert (merged["ids"], merged["new_ids"]) == ([1, 0, 2], [2])


# ------------------------------------------------------------------ every window kind, the context

@pytest.mark.parametrize("window,trigger", [
    ("cumulate(20 milliseconds, 5 milliseconds)", "AfterWatermark(early=AfterCount(2))"),
    ("count(3)", None), ("count(3, 2)", None),
    ("count(3, 10 milliseconds)", None), ("sliding(10 milliseconds, 2 elements)", None),
    ("record_sliding(6 milliseconds)", None),
    ("sliding(20 milliseconds, 5 milliseconds)", "Repeatedly(AfterCount(2))"),
])
def test_every_window_kind_sees_the_elements_collect_list_sees(window, trigger):
    """Without an evictor, a pane's elements are exactly collect_list's, in the same order."""
    bundles = [[{"k": "ab"[i % 2], "ts": (7 * i) % 23 + 5 * b, "id": 10 * b + i} for i in range(6)]
               for b in range(4)]
    kw = dict(window=window, trigger=trigger, key_columns="k", accumulation_mode="accumulating")
    a = TestStream(process=FN + "ids", **kw)
    c = TestStream(aggregate="collect_list(id) AS ids", **kw)
    for b, rows in enumerate(bundles):
        for s in (a, c):
            s.add_elements(rows, watermark=8 * b)
    for s in (a, c):
        s.advance_watermark_to(1000)
    got, want = a.take_panes(), c.take_panes()
    assert got and [p["ids"] for p in got] == [p["ids"] for p in want]
    assert [{k: v for k, v in p.items() if not k.endswith("_ids")} for p in got] == want


def test_context_describes_the_pane_row():
    s = TestStream(window="count(2)", process=FN + "context", key_columns="k")
    s.add_elements([{"k": "a", "ts": 3, "v": 1, "id": 0}, {"k": "a", "ts": 8, "v": 2, "id": 1}])
    (p,) = s.take_panes()
    utc = lambda ms: datetime.fromtimestamp(ms / 1000, timezone.utc)  # noqa: E731
    assert p["c_key"] == repr([("k", "a")]) and p["c_seq"] == p["window_seq"] == 0
    assert (p["c_start"], p["c_end"]) == (utc(p["window_start"]), utc(p["window_end"])) == (utc(3), utc(8))
    assert (p["c_timing"], p["c_index"], p["c_final"]) == (p["pane_timing"], p["pane_index"], p["is_final"])
    assert p["c_columns"] == ["v", "id"]  # input_columns: the projection, in the declared order


@pytest.mark.parametrize("window", ["tumbling(10 milliseconds)", "session(4 milliseconds)",
                                    "record_sliding(10 milliseconds)"])
def test_context_window_bounds_are_the_pane_rows(window):
    """Half-open windows report the exclusive end, record_sliding its inclusive end: the context
    must say what the pane row says."""
    s = TestStream(window=window, process=FN + "context", key_columns="k")
    s.add_elements([{"k": "a", "ts": 3, "v": 1, "id": 0}, {"k": "a", "ts": 5, "v": 2, "id": 1}])
    s.advance_watermark_to(100)
    panes = s.take_panes()
    assert panes
    utc = lambda ms: datetime.fromtimestamp(ms / 1000, timezone.utc)  # noqa: E731
    for p in panes:
        assert (p["c_start"], p["c_end"]) == (utc(p["window_start"]), utc(p["window_end"]))


def test_an_empty_on_time_pane_calls_the_function_with_no_elements():
    s = TestStream(window="tumbling(10 milliseconds)", trigger="AfterWatermark(early=AfterCount(1))",
                   process=FN + "spread")
    s.add_elements([{"ts": 1, "v": 4}])
    s.advance_watermark_to(10)
    early, on_time = s.take_panes()
    assert (early["n"], early["spread"]) == (1, 0)
    assert (on_time["n"], on_time["spread"], on_time["pane_timing"]) == (0, None, "ON_TIME")


# ------------------------------------------------------------------ bad specs

@pytest.mark.parametrize("kw,option,message", [
    (dict(process="no_such_module_xyz:f"), "process", "No module named"),
    (dict(process=FN + "nope"), "process", "has no attribute 'nope'"),
    (dict(process=FN + "no_output_fields"), "process", "no attribute 'output_fields'"),
    (dict(process=FN + "clashing"), "process", "are pane columns"),
    (dict(process="not a target"), "process", "expected module:function"),
    (dict(process=FN + "ids", aggregate="count(*)"), "process", "not both"),
    (dict(evictor="count(2)", aggregate="count(*)"), "evictor", "together with process"),
    (dict(), "aggregate", "required"),
    (dict(process=FN + "ids", evictor="count(0)"), "evictor", "n >= 1"),
    (dict(process=FN + "ids", evictor="count(two)"), "evictor", "integer"),
    (dict(process=FN + "ids", evictor="time(soon)"), "evictor", "Accepted"),
    (dict(process=FN + "ids", evictor="time(0 seconds)"), "evictor", "Accepted"),
    (dict(process=FN + "ids", evictor="delta(-1, v)"), "evictor", "threshold > 0"),
    (dict(process=FN + "ids", evictor="delta(1)"), "evictor", "unknown evictor"),
    (dict(process=FN + "ids", evictor="lru(3)"), "evictor", "unknown evictor"),
])
def test_bad_process_specs_fail_at_parse_time(kw, option, message):
    with pytest.raises(OptionError, match=message) as e:
        OperatorSpec.from_options(window="tumbling(1 second)", **kw)
    assert e.value.option == option


@pytest.mark.parametrize("kw,option,message", [
    (dict(process=FN + "ids", evictor="delta(1, nope)"), "evictor", "'nope' is missing"),
    (dict(process=FN + "ids", evictor="delta(1, k)"), "evictor", "'k' is string"),
    (dict(process=FN + "context"), "process", r"no column\(s\) \['v'\]"),
])
def test_bad_process_columns_fail_when_bound_to_the_schema(kw, option, message):
    s = TestStream(window="tumbling(10 milliseconds)", key_columns="k", **kw)
    with pytest.raises(OptionError, match=message) as e:
        s.add_elements([{"k": "a", "ts": 1, "id": 1}])
    assert e.value.option == option


@pytest.mark.parametrize("fn,message", [
    ("wrong_columns", r"returned columns \['extra', 'n'\].*unexpected: \['extra'\]"),
    ("wrong_type", r"returned n='many' for key None.*declare n as int64"),
    ("not_a_dict", "returned list .* must return a dict"),
])
def test_a_function_returning_other_columns_is_an_error_naming_it(fn, message):
    s = TestStream(window="tumbling(10 milliseconds)", trigger="AfterCount(1)", process=FN + fn)
    with pytest.raises(ProcessError, match=message) as e:
        s.add_elements([{"ts": 1, "v": 1}])
    assert f"process_functions:{fn}" in str(e.value)


def _pane_rows(kinds: list[str], vs: list[int]) -> pa.Table:
    n, ts = len(kinds), pa.timestamp("us", tz="UTC")
    return pa.table({"window_start": pa.array([0] * n, ts), "window_end": pa.array([10_000] * n, ts),
                     "pane_timestamp": pa.array([9_999] * n, ts), "kind": kinds, "v": vs})


def test_process_over_inherited_panes_and_no_retraction_rows():
    s = TestStream(window="inherit", process=FN + "spread", timestamp_column="pane_timestamp")
    s.add_elements(_pane_rows(["TRIGGER", "TRIGGER"], [1, 7]))
    s.advance_watermark_to(10)
    (p,) = s.take_panes()
    assert (p["n"], p["spread"], p["window_end"]) == (2, 6, 10)
    with pytest.raises(OptionError, match="1 RETRACTION row.*cannot take back a retracted row"):
        s.add_elements(_pane_rows(["TRIGGER", "RETRACTION"], [3, 1]))


def test_snapshot_size_follows_the_buffered_elements_not_the_batches():
    """Each window's buffer is a slice of its micro-batch; a snapshot must write only its rows."""
    n, keys = 2000, 200
    s = TestStream(window="tumbling(10 milliseconds)", process=FN + "values", key_columns="k",
                   accumulation_mode="accumulating", trigger="AfterWatermark(early=AfterCount(5))")
    s.add_elements(pa.table({"k": [i % keys for i in range(n)], "ts": [i % 7 for i in range(n)], "v": list(range(n))}))
    assert len(s.take_panes()) == keys
    raw = n * 5 * 8  # k, ts, v, and the hidden event time and arrival number: int64 each
    blob = s.snapshot()
    assert len(blob) < 4 * raw
    restored = TestStream.restore(blob, window="tumbling(10 milliseconds)", process=FN + "values",
                                  key_columns="k", accumulation_mode="accumulating",
                                  trigger="AfterWatermark(early=AfterCount(5))")
    restored.advance_watermark_to(10)
    on_time = restored.take_panes()
    assert sorted(v for p in on_time for v in p["vs"]) == list(range(n))


def _late_after_all_spec(trigger: str, mode: str = "discarding") -> dict:
    return {"window": "tumbling(10 milliseconds)", "accumulation_mode": mode, "trigger": trigger,
            "allowed_lateness": "5 milliseconds", "timestamp_combiner": "end_of_window", "key_columns": None,
            "timestamp_column": "ts", "timestamp_unit": "ms", "fire_only_updated_panes": False, "evictor": None}


def _row(i, v=0):
    return {"id": i, "ts": 0, "k": "a", "k2": 1, "v": v, "gap": 1}


LATE_AFTER_ALL = ("AfterWatermark(late=AfterAll(AfterProcessingTime(5 milliseconds), "
                  "ContinuousEventTime(5 milliseconds)))")


def test_a_reset_late_after_all_does_not_fire_again_at_expiry():
    """Found by the property test above. The late AfterAll fires its LATE pane at processing time 5
    but does not finish (ContinuousEventTime never does), so nothing resets AfterProcessingTime:
    its deadline stays reached. That timer fired once; the window's expiry (watermark to
    infinity) must not fire it again (it made an empty final LATE pane)."""
    ops = [("wm", 4), ("add", [_row(0), _row(1), _row(2, None)]), ("wm", 10),
           ("add", [_row(3), _row(4), _row(5, None), _row(6, None)]), ("pt", 5), ("inf",)]
    assert_matches_reference(_late_after_all_spec(LATE_AFTER_ALL), ops)


@pytest.mark.parametrize("mode", ["discarding", "accumulating"])
@pytest.mark.parametrize("trigger", [
    LATE_AFTER_ALL,  # a fired deadline kept, beside a trigger that never finishes
    f"Repeatedly(AfterAll(AfterProcessingTime(5 {MS}), Default()))",
    # a deadline reached without firing (its AfterAll waits for 9 elements), beside a branch
    # that still says fire
    f"Repeatedly(AfterAny(AfterAll(AfterProcessingTime(0 {MS}), ContinuousEventTime(5 {MS})), "
    f"AfterAll(AfterCount(9), AfterProcessingTime(5 {MS}))))",
    # the same with an event-time timer: a continuous mark passed without firing
    f"Repeatedly(AfterAny(AfterAll(AfterProcessingTime(0 {MS}), ContinuousEventTime(5 {MS})), "
    f"AfterAll(ContinuousEventTime(2 {MS}), AfterCount(9))))",
])
def test_a_reached_timer_does_not_refire_the_window_in_later_steps(trigger, mode):
    """Timers are one-shot (Beam's; the reference model's rule): a trigger that keeps a reached
    timer (AfterAll beside a trigger that never finishes does not reset its sub-triggers) makes
    the window a candidate in the batch that reaches the timer only, not at every later
    watermark step: those would repeat panes (empty ones under discarding) while another branch
    of the trigger still says fire. Nor is it reported as pending, so the Spark source schedules
    no batch without input for it."""
    ops = [("wm", 4), ("add", [_row(0), _row(1)]), ("wm", 10), ("add", [_row(3)]), ("pt", 5),
           ("wm", 11), ("wm", 12), ("add", [_row(7)]), ("wm", 13), ("inf",)]
    spec = _late_after_all_spec(trigger, mode)
    assert_matches_reference(spec, ops)
    s = TestStream(process=FN + "ids", **spec)
    assert any(run(s, ops[:5]))
    ev, pt = s.operator.next_timers()
    assert ev > s.operator.wm and pt > s.operator.proc
    assert run(s, ops[5:7]) == [[], []]
