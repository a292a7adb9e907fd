"""Custom ``module:Class`` accumulations (incl. session merges and retractions) and the watermark
strategies the Spark source uses (bounded, processing lag, upstream column, idle timeout)."""

from __future__ import annotations

import pytest

from spark_windowing._time import MIN_TIME, SECOND
from spark_windowing.errors import OptionError
from spark_windowing.operator.watermark import parse_watermark
from spark_windowing.testing import TestStream

CUSTOM = "tests.core.fixtures.accumulations:SpreadAndTags"


def test_custom_accumulation_merges_sessions_and_retracts():
    #   a: 1 ----- 3          9 ---- 11        (gap 4 ms)
    #   then 6 bridges them: one session [1, 15)
    s = TestStream(window="session(4 milliseconds)", trigger="AfterWatermark(early=AfterCount(1))",
                   aggregate=CUSTOM, key_columns="k", accumulation_mode="accumulating_and_retracting")
    s.add_elements([{"k": "a", "ts": 1, "v": 5, "tag": "x"}, {"k": "a", "ts": 3, "v": 7, "tag": "y"},
                    {"k": "a", "ts": 9, "v": 1, "tag": "x"}, {"k": "a", "ts": 11, "v": 2, "tag": "z"}])
    first = s.take_panes()
    assert sorted((p["window_start"], p["total"], p["tags"], p["spread"]) for p in first) == \
        [(1, 12, ["x", "y"], 2), (9, 3, ["x", "z"], 1)]
    s.add_elements([{"k": "a", "ts": 6, "v": 10, "tag": "w"}])
    panes = s.take_panes()
    retracted = sorted((p["window_start"], p["total"]) for p in panes if p["kind"] == "RETRACTION")
    merged = [p for p in panes if p["kind"] == "TRIGGER"]
    assert retracted == [(1, 12), (9, 3)]
    assert [(m["window_start"], m["window_end"], m["total"], m["tags"], m["spread"]) for m in merged] == \
        [(1, 15, 25, ["w", "x", "y", "z"], 9)]


def test_custom_accumulation_that_does_not_exist_fails_with_the_option():
    s = TestStream(window="tumbling(1 second)", aggregate="no_such_module_xyz:Acc")
    with pytest.raises(OptionError, match="no_such_module_xyz:Acc"):
        s.add_elements([{"ts": 1, "v": 1}])


def test_bounded_watermark_never_decreases():
    w = parse_watermark("bounded(10 seconds)")
    assert w.advance(current=MIN_TIME, max_event=None, max_column=None, batch_time=0, last_input=None) == MIN_TIME
    assert w.advance(current=MIN_TIME, max_event=30 * SECOND, max_column=None, batch_time=0,
                     last_input=0) == 20 * SECOND
    assert w.advance(current=25 * SECOND, max_event=30 * SECOND, max_column=None, batch_time=0,
                     last_input=0) == 25 * SECOND


def test_processing_and_column_watermarks():
    p = parse_watermark("processing(5 seconds)")
    assert p.advance(current=MIN_TIME, max_event=None, max_column=None, batch_time=100 * SECOND,
                     last_input=None) == 95 * SECOND
    c = parse_watermark("column(wm)")
    assert c.column == "wm"
    assert c.advance(current=MIN_TIME, max_event=999 * SECOND, max_column=40 * SECOND, batch_time=0,
                     last_input=0) == 40 * SECOND


def test_idle_timeout_advances_a_quiet_stream_by_processing_time():
    w = parse_watermark("bounded(10 seconds)", "30 seconds")
    args = dict(current=MIN_TIME, max_event=100 * SECOND, max_column=None)
    assert w.advance(**args, batch_time=1_000 * SECOND, last_input=990 * SECOND) == 90 * SECOND  # not idle yet
    assert w.advance(**args, batch_time=1_000 * SECOND, last_input=950 * SECOND) == 110 * SECOND  # idle 20 s past


@pytest.mark.parametrize("text", ["bounded(ten seconds)", "eventually(1 second)", "bounded()",
                                  "processing(1 second, 2 seconds)"])
def test_bad_watermarks(text):
    with pytest.raises(OptionError, match="invalid option 'watermark'"):
        parse_watermark(text)
