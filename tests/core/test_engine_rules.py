"""Cases where our panes were checked against engines nobody here wrote (Apache Flink's
``WindowOperator``, Apache Beam's trigger drivers, Spark's batch ``session_window``), one test per
rule. ``docs/semantics.md`` lists the rules, what each engine does, and these test names.

Times are milliseconds; "bounded(0)" inputs move the watermark to each element's timestamp
after its bundle (our convention: watermark ``W`` means nothing more with a timestamp ``< W``;
Flink's watermark ``W - 1`` means the same).
"""

from __future__ import annotations

from spark_windowing.testing import TestStream


def _stream(**kw) -> TestStream:
    base = dict(aggregate="collect_list(ts) AS ts_list", key_columns="k", accumulation_mode="accumulating")
    return TestStream(**{**base, **kw})


def _bounded_zero(s: TestStream, elements: list[tuple[str, int]]) -> None:
    """One element per bundle, the watermark moved to its timestamp after it (never back)."""
    wm = None
    for k, t in elements:
        s.add_elements([{"k": k, "ts": t}])
        wm = t if wm is None else max(wm, t)
        s.advance_watermark_to(wm)


def _summary(panes: list[dict]) -> list[tuple]:
    return [(p["k"], p["window_start"], p["window_end"], sorted(p["ts_list"]), p["pane_timing"], p["watermark"])
            for p in panes]


# --- ContinuousEventTime (Flink's ContinuousEventTimeTrigger) ----------------------------------------

def test_continuous_mark_fires_only_when_the_watermark_is_past_it():
    """Defect 1: mark 5 fires once the watermark guarantees every element stamped <= 5 arrived,
    i.e. W > 5. At W == 5 an element stamped 5 may still come; Flink fires [0,10) once, at its end."""
    s = _stream(window="tumbling(10 milliseconds)", trigger="ContinuousEventTime(5 milliseconds)")
    _bounded_zero(s, [("a", 1), ("a", 5)])
    assert s.take_panes() == []
    s.add_elements([{"k": "a", "ts": 5}])  # stamped exactly at the mark: not late, not missed
    s.advance_watermark_to(10)
    assert _summary(s.take_panes()) == [("a", 0, 10, [1, 5, 5], "ON_TIME", 10)]


def test_continuous_marks_are_capped_at_the_window_end():
    """Defect 2: Flink registers the next mark at min(m + d, window max timestamp), so nothing
    repeats during allowed lateness: [0,10) fires once (at watermark 12), not again at 16 or at
    its expiry."""
    s = _stream(window="tumbling(10 milliseconds)", trigger="ContinuousEventTime(5 milliseconds)",
                allowed_lateness="10 milliseconds")
    _bounded_zero(s, [("a", 1), ("a", 12), ("a", 16)])
    s.advance_watermark_to(40)
    assert _summary(s.take_panes()) == [
        ("a", 0, 10, [1], "ON_TIME", 12),
        ("a", 10, 20, [12, 16], "EARLY", 16),   # mark 15
        ("a", 10, 20, [12, 16], "ON_TIME", 40),
    ]


def test_capped_continuous_mark_carries_into_the_merged_session():
    """Defect 2, sessions: a's first session [53,56) fires at mark 54 (watermark 55) and caps its
    next mark at its max timestamp (55.999); a@55 merges it into [53,58), which inherits that mark
    and fires at watermark 56 — as Flink's merging trigger context registers the merged window's
    timer at the smallest mark."""
    s = _stream(window="session(3 milliseconds)", trigger="ContinuousEventTime(3 milliseconds)")
    _bounded_zero(s, [("a", 53), ("b", 55), ("a", 55), ("b", 56)])
    assert [x for x in _summary(s.take_panes()) if x[0] == "a"] == [
        ("a", 53, 56, [53], "EARLY", 55),
        ("a", 53, 58, [53, 55], "EARLY", 56),
    ]


# --- closed sessions (Beam: a finished trigger's window absorbs what merges into it) --------------

def _closed_case(trigger: str, lateness: str, steps: list) -> tuple[list[tuple], list[tuple]]:
    s = _stream(window="session(5 milliseconds)", trigger=trigger, accumulation_mode="discarding",
                allowed_lateness=lateness)
    for step in steps:
        if isinstance(step, int):
            s.advance_watermark_to(step)
        else:
            s.add_elements([{"k": "a", "ts": t} for t in step])
    s.advance_watermark_to_infinity()
    late = [(r["ts"], r["reason"]) for r in s.take_late()]
    return _summary(s.take_panes()), late


def test_closed_session_absorbs_what_merges_into_it_after_any():
    """Defect 3: [7,12) closes at its ON_TIME pane; [11, 13] merge into it (dropped, the closed
    window grows to [7,18)), so a later 13 overlaps the closed window and is dropped too (Beam)."""
    panes, late = _closed_case("AfterAny(AfterCount(3), AfterWatermark())", "20 milliseconds",
                               [[7], 15, [11, 13], [13], 217])
    assert [p[:5] for p in panes] == [("a", 7, 12, [7], "ON_TIME")]
    assert late == [(11, "closed"), (13, "closed"), (13, "closed")]


def test_closed_session_absorbs_what_merges_into_it_after_watermark():
    panes, late = _closed_case("AfterWatermark()", "30 milliseconds", [[7], 15, [11], [14], [18]])
    assert [p[:5] for p in panes] == [("a", 7, 12, [7], "ON_TIME")]
    assert late == [(11, "closed"), (14, "closed"), (18, "closed")]


def test_closed_session_absorbs_what_merges_into_it_after_count():
    panes, late = _closed_case("AfterCount(2)", "50 milliseconds", [[1, 2], [5], [9], [13]])
    assert [p[:5] for p in panes] == [("a", 1, 7, [1, 2], "EARLY")]
    assert late == [(5, "closed"), (9, "closed"), (13, "closed")]


def test_closed_session_result_does_not_depend_on_bundling():
    """The same elements in one bundle or one per bundle: the same panes and drops."""
    one_each, late_each = _closed_case("AfterCount(2)", "50 milliseconds", [[1, 2], [5], [9], [13]])
    together, late_together = _closed_case("AfterCount(2)", "50 milliseconds", [[1, 2], [5, 9, 13]])
    assert [p[:5] for p in one_each] == [p[:5] for p in together]
    assert sorted(late_each) == sorted(late_together)


# --- where engines disagree -------------------------------------------------------------------------

def test_session_element_beyond_lateness_is_late_even_inside_a_live_session():
    """a@51's own proto-window [51,56) ends at the watermark 56 (lateness 0), so it is late, although
    it falls inside the live session [50,61): Beam (Java and Python) and Spark drop it before
    merging; Flink merges first and keeps it. We keep Beam's and Spark's rule."""
    s = _stream(window="session(5 milliseconds)")
    _bounded_zero(s, [("a", 50), ("a", 53), ("a", 56), ("a", 51)])
    late = s.take_late()
    assert [(r["ts"], r["reason"], r["window_start"], r["window_end"]) for r in late] == [
        (51, "too_late", 51, 56)]
    s.advance_watermark_to(100)
    assert _summary(s.take_panes()) == [("a", 50, 61, [50, 53, 56], "ON_TIME", 100)]


def test_touching_sessions_merge():
    """[0,5) and [5,10) touch: one session (Flink and Spark merge them; Beam only merges overlaps)."""
    s = _stream(window="session(5 milliseconds)")
    s.add_elements([{"k": "a", "ts": 0}])
    s.add_elements([{"k": "a", "ts": 5}])
    s.advance_watermark_to(100)
    assert _summary(s.take_panes()) == [("a", 0, 10, [0, 5], "ON_TIME", 100)]


def test_on_time_pane_holds_the_late_elements_of_its_batch():
    """A batch whose watermark passes the window end and that brings elements for it (within
    allowed lateness): the elements are added first, then the trigger fires once — one ON_TIME
    pane with them (Beam's bundle rule), not an ON_TIME pane followed by a LATE one."""
    s = _stream(window="tumbling(10 milliseconds)", allowed_lateness="10 milliseconds")
    s.add_elements([{"k": "a", "ts": 1}])
    s.add_elements([{"k": "a", "ts": 5}], watermark=12)
    assert _summary(s.take_panes()) == [("a", 0, 10, [1, 5], "ON_TIME", 12)]


def test_one_firing_per_window_and_batch():
    """Repeatedly(AfterCount(1)) over a bundle of three: one pane of three (per-batch firing, as
    Beam fires per bundle; Flink, per element, would fire three times)."""
    s = _stream(window="tumbling(10 milliseconds)", trigger="Repeatedly(AfterCount(1))")
    s.add_elements([{"k": "a", "ts": t} for t in (1, 2, 3)])
    assert [(p["ts_list"], p["pane_timing"]) for p in s.take_panes()] == [([1, 2, 3], "EARLY")]


def test_a_window_that_expires_before_its_trigger_fired_emits_nothing():
    """Flink's rule (a window is purged at end + lateness; a CountTrigger short of its count
    never fires), not Beam's (``ClosingBehavior.FIRE_IF_NON_EMPTY``: a last pane of what is
    left): docs/semantics.md, 'Windows that expire before their trigger fires'. Paired with the
    watermark, the same count trigger gives the remainder at the window end."""
    rows = [{"k": "a", "ts": t, "v": 1} for t in (1, 2, 3)]
    alone = TestStream(window="tumbling(10 milliseconds)", trigger="Repeatedly(AfterCount(5))",
                       aggregate="count(*) AS n", key_columns="k", timestamp_column="ts", timestamp_unit="ms")
    alone.add_elements(rows)
    alone.advance_watermark_to_infinity()
    assert alone.take_panes() == [] and alone.take_late() == []
    paired = TestStream(window="tumbling(10 milliseconds)", trigger="AfterWatermark(early=AfterCount(5))",
                        aggregate="count(*) AS n", key_columns="k", timestamp_column="ts", timestamp_unit="ms")
    paired.add_elements(rows)
    paired.advance_watermark_to_infinity()
    assert [(p["pane_timing"], p["n"]) for p in paired.take_panes()] == [("ON_TIME", 3)]
