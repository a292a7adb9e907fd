"""Per-slide pre-aggregation of sliding windows equals the per-(event, window) path exactly.

    sliding(6, 2):  bucket [4,6) feeds windows [0,6) [2,8) [4,10)
    events of a bucket are summed once, then the bucket's partials go to its 3 windows.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing.operator.windowed import WindowedOperator
from spark_windowing.testing import TestStream

steps = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60), st.integers(-5, 5)),
                                       min_size=1, max_size=8)),
    st.tuples(st.just("wm"), st.integers(0, 80))), min_size=1, max_size=8)


def _run(actions, trigger, lateness, combiner, per_pair: bool):
    s = TestStream(window="sliding(6 milliseconds, 2 milliseconds)", trigger=trigger,
                   aggregate="sum(v) AS s, count(*) AS n, min(v) AS lo, max(v) AS hi, avg(v) AS mean",
                   key_columns="k", allowed_lateness=f"{lateness} milliseconds",
                   accumulation_mode="accumulating_and_retracting", timestamp_combiner=combiner)
    if per_pair:
        s.operator._bucketable = lambda ts: None  # the exact per-pair path, for reference
    wm = 0
    for kind, arg in actions:
        if kind == "add":
            s.add_elements([{"k": k, "ts": t, "v": v} for k, t, v in arg])
        else:
            wm = max(wm, arg)
            s.advance_watermark_to(wm)
    key = lambda p: sorted(p.items())  # noqa: E731
    return sorted(s.take_panes(), key=key), sorted(s.take_late(), key=key)


@given(steps, st.sampled_from(["Default()", "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
                               "Repeatedly(AfterCount(3))", "AfterCount(2)"]),
       st.integers(0, 10), st.sampled_from(["end_of_window", "earliest", "latest"]))
@settings(max_examples=200, deadline=None)
def test_bucket_path_equals_per_pair_path(actions, trigger, lateness, combiner):
    assert _run(actions, trigger, lateness, combiner, per_pair=False) == \
        _run(actions, trigger, lateness, combiner, per_pair=True)


def test_bucket_path_is_taken():
    op_calls = []
    orig = WindowedOperator._add_buckets

    def spy(self, *a):
        op_calls.append(1)
        return orig(self, *a)

    WindowedOperator._add_buckets = spy
    try:
        _run([("add", [("a", 1, 1), ("a", 3, 2)])], "Default()", 0, "end_of_window", per_pair=False)
    finally:
        WindowedOperator._add_buckets = orig
    assert op_calls
