"""``window=inherit`` (Apex window propagation): a windowed query over the pane rows of another.

Stage 1 (per key, retracting) -> its pane rows, bundle by bundle -> stage 2 (``inherit``, no key):
after every bundle, stage 2's live panes (TRIGGERs not retracted since) must equal the reference:
per window, the sum/count/keys of stage 1's live panes. ::

    stage 1  a [0,10): TRIGGER 3        RETRACTION 3, TRIGGER 5
             b [0,10): TRIGGER 4
    stage 2    [0,10): TRIGGER 7 (a,b)  RETRACTION 7, TRIGGER 9 (a,b)
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_windowing.errors import OptionError
from spark_windowing.testing import TestStream

COLUMNS = ("k", "window_start", "window_end", "total", "kind", "pane_timestamp")


def _live(panes: list[dict], key: tuple[str, ...]) -> dict[tuple, dict]:
    """Fold a pane stream: a TRIGGER replaces the window's row, a RETRACTION alone removes it."""
    live: dict[tuple, dict] = {}
    for p in panes:
        kw = tuple(p[c] for c in key)
        if p["kind"] == "TRIGGER":
            live[kw] = p
        else:
            live.pop(kw, None)
    return live


def _reference(stage1_live: dict[tuple, dict]) -> dict[tuple, tuple]:
    out: dict[tuple, list] = {}
    for (_, ws, we), p in stage1_live.items():
        out.setdefault((ws, we), []).append((p["k"], p["total"]))
    return {w: (sum(t for _, t in v), len(v), sorted(k for k, _ in v),
                sorted((t, k) for k, t in v if t == max(t for _, t in v)),
                sorted((t, k) for k, t in v if sum(o < t for _, o in v) < 2)) for w, v in out.items()}


def _stage2(**kw) -> TestStream:
    return TestStream(window="inherit", timestamp_column="pane_timestamp",
                      aggregate="sum(total) AS grand, count(*) AS n, collect_list(k) AS ks, "
                                "max_rows(total, k) AS best, bottom(2, total, k) AS low",
                      trigger="AfterWatermark(early=AfterCount(1), late=AfterCount(1))",
                      accumulation_mode="accumulating_and_retracting", allowed_lateness="1 hour", **kw)


bundles = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 60), st.integers(1, 9)),
                                      max_size=6),
                             st.integers(0, 12)),
                   min_size=1, max_size=8)


@given(window=st.sampled_from(["tumbling(10 milliseconds)", "sliding(10 milliseconds, 5 milliseconds)",
                               "session(4 milliseconds)", "cumulate(20 milliseconds, 5 milliseconds)"]),
       trigger=st.sampled_from(["AfterWatermark(early=AfterCount(1))",
                                "AfterWatermark(early=AfterCount(2), late=AfterCount(1))", "Repeatedly(AfterCount(2))"]),
       steps=bundles, restore_at=st.integers(0, 8))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_stage2_live_panes_equal_the_sums_of_stage1_live_panes(window, trigger, steps, restore_at):
    s1 = TestStream(window=window, trigger=trigger, aggregate="sum(v) AS total", key_columns="k",
                    accumulation_mode="accumulating_and_retracting", allowed_lateness="5 milliseconds")
    s2 = _stage2()
    wm, s1_panes, s2_panes = 0, [], []
    for i, (rows, move) in enumerate(steps + [([], 10_000)]):
        upstream_wm = s1.watermark or 0       # stage 2's watermark lags one bundle (column(watermark))
        wm += move
        s1.add_elements([{"k": k, "ts": t, "v": v} for k, t, v in rows] or
                        pa.table({"k": pa.array([], pa.string()), "ts": pa.array([], pa.int64()),
                                  "v": pa.array([], pa.int64())}), watermark=wm)
        new = s1.take_panes()
        s1_panes += new
        s2.add_elements(pa.Table.from_pylist([{c: p[c] for c in COLUMNS} for p in new],
                                             schema=pa.schema([("k", pa.string()), ("window_start", pa.int64()),
                                                               ("window_end", pa.int64()), ("total", pa.int64()),
                                                               ("kind", pa.string()), ("pane_timestamp", pa.int64())])),
                        watermark=upstream_wm)
        s2_panes += s2.take_panes()
        if i == restore_at:  # snapshot -> restore -> continue
            s2 = TestStream.restore(s2.snapshot(), **s2._kwargs)
        expected = _reference(_live(s1_panes, ("k", "window_start", "window_end")))
        got = {w: (p["grand"], p["n"], sorted(p["ks"]), sorted((r["total"], r["k"]) for r in p["best"]),
                   sorted((r["total"], r["k"]) for r in p["low"]))
               for w, p in _live(s2_panes, ("window_start", "window_end")).items()}
        assert got == expected, f"after bundle {i}"
    assert s2.take_late() == []


def test_a_window_whose_every_row_is_retracted_is_only_retracted():
    """A session merged away upstream: its window gets a RETRACTION and nothing else."""
    s2 = _stage2()
    row = {"k": "a", "window_start": 0, "window_end": 10, "total": 3, "pane_timestamp": 9}
    s2.add_elements([{**row, "kind": "TRIGGER"}])
    assert [(p["kind"], p["grand"]) for p in s2.take_panes()] == [("TRIGGER", 3)]
    s2.add_elements([{**row, "kind": "RETRACTION"}])
    assert [(p["kind"], p["grand"]) for p in s2.take_panes()] == [("RETRACTION", 3)]
    s2.add_elements([{**row, "kind": "TRIGGER", "total": 4}])   # it comes back: a fresh pane
    assert [(p["kind"], p["grand"], p["pane_index"]) for p in s2.take_panes()] == [("TRIGGER", 4, 1)]


def test_top_n_per_window_over_retracting_per_key_sums():
    s2 = TestStream(window="inherit", timestamp_column="pane_timestamp", trigger="AfterWatermark(early=AfterCount(1))",
                    aggregate="spark_windowing.aggregates.accumulations:TopN(2, total, k)",
                    accumulation_mode="accumulating_and_retracting")
    base = {"window_start": 0, "window_end": 10, "pane_timestamp": 9}
    s2.add_elements([{**base, "k": k, "total": t, "kind": "TRIGGER"} for k, t in (("a", 5), ("b", 9), ("c", 7))])
    s2.add_elements([{**base, "k": "b", "total": 9, "kind": "RETRACTION"},
                     {**base, "k": "b", "total": 1, "kind": "TRIGGER"}])
    last = [p for p in s2.take_panes() if p["kind"] == "TRIGGER"][-1]
    assert last["top"] == [{"label": "c", "value": 7.0}, {"label": "a", "value": 5.0}]


def test_ranked_rows_take_back_a_retracted_winner():
    """The winner retracted upstream: the rows beneath it, kept for this, win; types are kept."""
    s2 = TestStream(window="inherit", timestamp_column="pane_timestamp", trigger="AfterWatermark(early=AfterCount(1))",
                    aggregate="max_rows(total, k) AS best", accumulation_mode="accumulating_and_retracting")
    base = {"window_start": 0, "window_end": 10, "pane_timestamp": 9}
    s2.add_elements([{**base, "k": k, "total": t, "kind": "TRIGGER"} for k, t in (("a", 7), ("b", 9), ("c", 7))])
    s2.add_elements([{**base, "k": "b", "total": 9, "kind": "RETRACTION"},
                     {**base, "k": "b", "total": 1, "kind": "TRIGGER"}])
    last = [p for p in s2.take_panes() if p["kind"] == "TRIGGER"][-1]
    assert last["best"] == [{"total": 7, "k": "a"}, {"total": 7, "k": "c"}]


def test_rows_without_a_window_are_malformed():
    s2 = _stage2()
    s2.add_elements([{"k": "a", "window_start": 0, "window_end": 10, "total": 1, "kind": "TRIGGER", "pane_timestamp": 9},
                     {"k": "b", "window_start": None, "window_end": 10, "total": 2, "kind": "TRIGGER", "pane_timestamp": 9},
                     {"k": "c", "window_start": 10, "window_end": 10, "total": 3, "kind": "TRIGGER", "pane_timestamp": 9}])
    assert [p["grand"] for p in s2.take_panes()] == [1]
    assert sorted((r["k"], r["reason"]) for r in s2.take_late()) == [("b", "malformed"), ("c", "malformed")]


@pytest.mark.parametrize("aggregate,fragment", [
    ("max(total) AS m", "cannot take back"),
    ("count_distinct(k) AS d", "cannot take back"),
    ("tests.core.fixtures.accumulations:SpreadAndTags", "has no retract"),
])
def test_aggregates_that_cannot_subtract_fail_at_the_first_retraction_row(aggregate, fragment):
    """Over TRIGGER rows only (a discarding or accumulating upstream) they aggregate; a RETRACTION
    row is an error naming the aggregate, raised before the batch changes any state."""
    s2 = TestStream(window="inherit", timestamp_column="pane_timestamp", aggregate=aggregate)
    row = {"k": "a", "window_start": 0, "window_end": 10, "total": 1, "kind": "TRIGGER", "pane_timestamp": 9,
           "v": 1, "tag": "x"}  # v, tag: the custom accumulation's columns
    s2.add_elements([row])
    with pytest.raises(OptionError) as info:
        s2.add_elements([{**row, "kind": "RETRACTION"}, {**row, "total": 2}])
    assert fragment in str(info.value) and "invalid option 'aggregate'" in str(info.value)
    assert "1 RETRACTION row(s) arrived" in str(info.value)


def test_max_over_panes_without_retractions():
    """q7's second stage over a discarding first stage: ``max`` of the inherited rows per window."""
    s2 = TestStream(window="inherit", timestamp_column="pane_timestamp", aggregate="max(total) AS m")
    s2.add_elements([{"k": k, "window_start": 0, "window_end": 10, "total": t, "kind": "TRIGGER", "pane_timestamp": 9}
                     for k, t in (("a", 4), ("b", 9), ("c", 7))])
    s2.advance_watermark_to(10)
    assert [(p["kind"], p["m"]) for p in s2.take_panes()] == [("TRIGGER", 9)]


def test_input_without_window_columns_is_rejected():
    s2 = _stage2()
    with pytest.raises(OptionError) as info:
        s2.add_elements([{"k": "a", "total": 1, "pane_timestamp": 9}])
    assert "window_start" in str(info.value) and "invalid option 'window'" in str(info.value)


def test_without_a_kind_column_every_row_adds():
    s2 = TestStream(window="inherit", timestamp_column="pane_timestamp", aggregate="max(total) AS m")
    s2.add_elements([{"window_start": 0, "window_end": 10, "total": t, "pane_timestamp": 9} for t in (4, 8)])
    s2.advance_watermark_to(10)
    assert [p["m"] for p in s2.take_panes()] == [8]


def test_most_frequent_takes_back_a_retracted_value():
    """A RETRACTION row takes its value's row back: the value beneath, once tied, is alone."""
    s2 = TestStream(window="inherit", timestamp_column="pane_timestamp", trigger="AfterWatermark(early=AfterCount(1))",
                    aggregate="most_frequent(1, k) AS hot", accumulation_mode="accumulating_and_retracting")
    base = {"window_start": 0, "window_end": 10, "pane_timestamp": 9, "kind": "TRIGGER"}
    s2.add_elements([{**base, "k": k} for k in ("a", "b", "a", "b", "c")])
    assert [p["hot"] for p in s2.take_panes() if p["kind"] == "TRIGGER"][-1] == \
        [{"k": "a", "count": 2}, {"k": "b", "count": 2}]
    s2.add_elements([{**base, "k": "a", "kind": "RETRACTION"}])
    assert [p["hot"] for p in s2.take_panes() if p["kind"] == "TRIGGER"][-1] == [{"k": "b", "count": 2}]
