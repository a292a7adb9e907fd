"""The reference model itself against Beam's trigger transcripts (and a few hand-made cases).

If the model did not reproduce Beam, comparing the operator with it would prove nothing.
"""

from __future__ import annotations

import pytest

from beam_scenarios import NEGATIVE_SCENARIOS, SCENARIOS, run_scenario, variants_for
from reference import (GLOBAL_END, GLOBAL_START, ReferenceStream, Sliding, Tumbling,
                       parse_duration, parse_trigger)

CASES = [pytest.param(s, v, id=f"{s.name}[{v}]") for s in SCENARIOS for v in variants_for(s)]


@pytest.mark.parametrize("scenario,variant", CASES)
def test_model_reproduces_beam_transcript(scenario, variant):
    run_scenario(scenario, ReferenceStream, variant)


def test_the_ten_in_scope_transcripts_are_all_there():
    assert len({s.name for s in SCENARIOS}) == 10


@pytest.mark.parametrize("scenario,message", NEGATIVE_SCENARIOS, ids=lambda x: getattr(x, "name", ""))
def test_harness_rejects_bad_transcripts(scenario, message):
    with pytest.raises(AssertionError, match=message):
        run_scenario(scenario, ReferenceStream)


# --- hand-made cases for rules the transcripts do not reach ---------------------------------------

def _stream(**kw):
    base = dict(window="tumbling(10 milliseconds)", trigger="Default()",
                accumulation_mode="accumulating", allowed_lateness="0 milliseconds",
                aggregate="sum(v) AS s, collect_list(v) AS vs", timestamp_combiner="end_of_window",
                key_columns=None, timestamp_column="ts", timestamp_unit="ms")
    return ReferenceStream(**{**base, **kw})


def test_duration_and_assigners():
    assert parse_duration("10 milliseconds") == 10_000
    assert parse_duration("1 hour 30 minutes") == 5_400_000_000
    assert Tumbling(10, 3).assign(2) == [(-7, 3)]
    assert Sliding(10, 4).assign(9) == [(0, 10), (4, 14), (8, 18)]
    assert Sliding(10, 4, 1).assign(0) == [(-7, 3), (-3, 7)]


def test_retraction_precedes_each_replacing_pane():
    s = _stream(trigger="Repeatedly(AfterCount(1))", accumulation_mode="accumulating_and_retracting")
    s.add_elements([{"ts": 1, "v": 1}])
    s.add_elements([{"ts": 2, "v": 2}])
    kinds = [(p["kind"], p["pane_index"], p["s"]) for p in s.take_panes()]
    assert kinds == [("TRIGGER", 0, 1), ("RETRACTION", 0, 1), ("TRIGGER", 1, 3)]


def test_session_merge_retracts_both_and_restarts_index():
    s = _stream(window="session(5 milliseconds)", trigger="Repeatedly(AfterCount(1))",
                accumulation_mode="accumulating_and_retracting")
    s.add_elements([{"ts": 0, "v": 1}, {"ts": 20, "v": 2}])
    assert {(p["window_start"], p["window_end"]) for p in s.take_panes()} == {(0, 5), (20, 25)}
    s.add_elements([{"ts": 5, "v": 4}, {"ts": 10, "v": 8}, {"ts": 15, "v": 16}])  # touches both
    out = s.take_panes()
    assert [(p["kind"], p["window_start"], p["window_end"], p["s"], p["pane_index"]) for p in out] == [
        ("RETRACTION", 0, 5, 1, 0), ("RETRACTION", 20, 25, 2, 0), ("TRIGGER", 0, 25, 31, 0)]


def test_closed_window_drops_and_tombstone_expires():
    s = _stream(trigger="AfterCount(1)", allowed_lateness="5 milliseconds")
    s.add_elements([{"ts": 1, "v": 1}])
    assert [p["is_final"] for p in s.take_panes()] == [True]
    s.add_elements([{"ts": 2, "v": 2}])
    assert [(r["reason"], r["window_start"]) for r in s.take_late()] == [("closed", 0)]
    s.advance_watermark_to(15)          # 10 + 5 <= 15: the tombstone goes
    s.add_elements([{"ts": 3, "v": 3}])
    assert [r["reason"] for r in s.take_late()] == ["too_late"]


def test_malformed_rows():
    s = _stream(key_columns="k")
    s.add_elements([{"ts": None, "k": "a", "v": 1}, {"ts": 1, "k": None, "v": 1}])
    assert [(r["reason"], r["window_start"]) for r in s.take_late()] == [("malformed", None)] * 2


def test_is_final_when_the_window_expires_in_the_step():
    s = _stream(allowed_lateness="0 milliseconds")
    s.add_elements([{"ts": 1, "v": 1}])
    s.advance_watermark_to(10)
    (p,) = s.take_panes()
    assert (p["pane_timing"], p["is_final"], p["watermark"], p["batch_seq"]) == ("ON_TIME", True, 10, 1)


def test_fire_only_updated_panes_skips_equal_values():
    s = _stream(trigger="Repeatedly(AfterCount(1))", aggregate="max(v) AS m",
                fire_only_updated_panes=True)
    s.add_elements([{"ts": 1, "v": 5}])
    s.add_elements([{"ts": 2, "v": 3}])    # max still 5: nothing
    s.add_elements([{"ts": 3, "v": 7}])
    assert [(p["m"], p["pane_index"]) for p in s.take_panes()] == [(5, 0), (7, 1)]


def test_after_processing_time_and_continuous_event_time():
    s = _stream(trigger="Repeatedly(AfterProcessingTime(5 milliseconds))",
                accumulation_mode="discarding")
    s.add_elements([{"ts": 1, "v": 1}])
    s.advance_processing_time(4)
    assert s.take_panes() == []
    s.advance_processing_time(1)
    assert [(p["vs"], p["batch_time"], p["pane_timing"]) for p in s.take_panes()] == [([1], 5, "EARLY")]
    c = _stream(window="tumbling(100 milliseconds)", trigger="ContinuousEventTime(10 milliseconds)")
    c.add_elements([{"ts": 13, "v": 1}])           # next mark 20
    c.advance_watermark_to(19)
    assert c.take_panes() == []
    c.advance_watermark_to(35)                      # fires, next mark 40
    c.advance_watermark_to(39)
    assert [p["watermark"] for p in c.take_panes()] == [35]


def test_global_window_fires_at_infinity():
    s = _stream(window="global")
    s.add_elements([{"ts": 1, "v": 1}])
    s.advance_watermark_to_infinity()
    (p,) = s.take_panes()
    assert p["window_start"] == GLOBAL_START // 1000 and p["window_end"] == GLOBAL_END // 1000
    assert p["pane_timing"] == "ON_TIME" and p["pane_timestamp"] == (GLOBAL_END - 1) // 1000


def test_after_each_and_after_all():
    assert parse_trigger("OrFinally(Never(), AfterCount(1))") == parse_trigger("AfterAny(Never(), AfterCount(1))")
    s = _stream(trigger="AfterEach(AfterCount(2), AfterAll(AfterCount(1), AfterCount(2)))",
                accumulation_mode="discarding")
    for ts in (1, 2, 3, 4, 5):
        s.add_elements([{"ts": ts, "v": ts}])
    assert [(p["vs"], p["is_final"]) for p in s.take_panes()] == [([1, 2], False), ([3, 4], True)]
    assert [(r["ts"], r["reason"]) for r in s.take_late()] == [(5, "closed")]


def test_watermark_cannot_go_back():
    s = _stream()
    s.advance_watermark_to(10)
    with pytest.raises(ValueError):
        s.advance_watermark_to(9)


def test_timers_fire_once_and_only_for_the_active_subtrigger():
    s = _stream(trigger="AfterWatermark(early=AfterProcessingTime(20 milliseconds), late=Default())",
                allowed_lateness="100 milliseconds")
    s.add_elements([{"ts": 1, "v": 1}])
    s.advance_watermark_to(10)
    assert [p["pane_timing"] for p in s.take_panes()] == ["ON_TIME"]
    for _ in range(3):                  # the early deadline (20) passes after the on-time pane
        s.advance_processing_time(15)
    assert s.take_panes() == []
    s.add_elements([{"ts": 2, "v": 2}])  # a late element still gives its LATE pane
    assert [(p["pane_timing"], p["s"]) for p in s.take_panes()] == [("LATE", 3)]


def test_end_of_window_timer_is_set_by_any_element_before_the_end():
    s = _stream(trigger="AfterEach(AfterCount(1), AfterWatermark())", accumulation_mode="discarding")
    s.add_elements([{"ts": 1, "v": 1}])
    s.advance_watermark_to(100)
    assert [(p["pane_timing"], p["vs"], p["is_final"]) for p in s.take_panes()] == [
        ("EARLY", [1], False), ("ON_TIME", [], True)]
