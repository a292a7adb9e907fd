"""Bad settings fail at construction with an OptionError naming the option, the bad value and the
accepted forms (docs/options.md) — and valid-but-unusual input is not rejected."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_windowing import testing
from spark_windowing.errors import OptionError

ROOT = Path(__file__).resolve().parents[2]

GOOD = dict(window="tumbling(10 milliseconds)", trigger="Default()", accumulation_mode="discarding",
            allowed_lateness="0 milliseconds", aggregate="sum(v) AS s",
            timestamp_combiner="end_of_window", key_columns=None, timestamp_column="ts",
            timestamp_unit="ms", fire_only_updated_panes=False)

BAD = [
    # (keyword, bad value, text the error must quote)
    ("window", "sliding(5 minutes, 0 seconds)", "sliding(5 minutes, 0 seconds)"),
    ("window", "sliding(5 minutes, -1 seconds)", "sliding(5 minutes, -1 seconds)"),
    ("window", "sliding(5 minutes)", "sliding(5 minutes)"),
    ("window", "tumbling(0 seconds)", "tumbling(0 seconds)"),
    ("window", "tumbling(-10 seconds)", "tumbling(-10 seconds)"),
    ("window", "tumbling(ten seconds)", "tumbling(ten seconds)"),
    ("window", "tumbling(10 parsecs)", "tumbling(10 parsecs)"),
    ("window", "rolling(5 minutes)", "rolling(5 minutes)"),
    ("window", "session(0 seconds)", "session(0 seconds)"),
    ("window", "session()", "session()"),
    ("window", "", ""),
    ("window", "record_sliding(0 seconds)", "record_sliding(0 seconds)"),
    ("window", "record_sliding(0)", "record_sliding(0)"),
    ("window", "record_sliding(abc)", "record_sliding(abc)"),
    ("window", "record_sliding()", "record_sliding()"),
    ("window", "record_sliding(1 second, 2 seconds)", "record_sliding(1 second, 2 seconds)"),
    ("trigger", "AfterCount(-1)", "AfterCount(-1)"),
    ("trigger", "AfterCount(0)", "AfterCount(0)"),
    ("trigger", "AfterCount(two)", "AfterCount(two)"),
    ("trigger", "AfterSomething(3)", "AfterSomething"),
    ("trigger", "Repeatedly()", "Repeatedly()"),
    ("trigger", "AfterWatermark(erly=AfterCount(1))", "erly"),
    ("trigger", "OrFinally(AfterCount(1))", "OrFinally(AfterCount(1))"),
    ("trigger", "AfterProcessingTime(-5 seconds)", "AfterProcessingTime(-5 seconds)"),
    ("trigger", "ContinuousEventTime(0 seconds)", "ContinuousEventTime(0 seconds)"),
    ("trigger", "AfterCount(2", "AfterCount(2"),
    ("trigger", "AfterCount(2))", "AfterCount(2))"),
    ("aggregate", "summ(v)", "summ(v)"),
    ("aggregate", "sum(*)", "sum(*)"),
    ("aggregate", "collect_lst(v) AS vs", "collect_lst(v)"),
    ("aggregate", "", ""),
    ("aggregate", "sum(v) AS s, max(v) AS s", "s"),
    ("accumulation_mode", "accumulate", "accumulate"),
    ("accumulation_mode", "retracting", "retracting"),
    ("allowed_lateness", "-5 seconds", "-5 seconds"),
    ("allowed_lateness", "5 parsecs", "5 parsecs"),
    ("allowed_lateness", "soon", "soon"),
    ("timestamp_combiner", "first", "first"),
    ("timestamp_unit", "minutes", "minutes"),
    ("fire_only_updated_panes", "maybe", "maybe"),
]


def _same_option(reported: str, keyword: str) -> bool:
    """'allowedLateness' and 'allowed_lateness' name the same option."""
    return reported.replace("_", "").lower() == keyword.replace("_", "").lower()


@pytest.mark.parametrize("keyword,value,quoted", BAD, ids=[f"{k}={v!r}" for k, v, _ in BAD])
def test_bad_option_raises_option_error_naming_option_value_and_accepted_forms(keyword, value, quoted):
    with pytest.raises(OptionError) as info:
        testing.TestStream(**{**GOOD, keyword: value})
    err = info.value
    message = str(err)
    assert isinstance(err, ValueError)
    assert _same_option(err.option, keyword), f"names option {err.option!r}, not {keyword!r}: {message}"
    assert quoted in message, f"does not quote {quoted!r}: {message}"
    assert err.accepted and "Accepted" in message and err.accepted in message, message
    assert len(message) < 1000, "one readable line, not a dump"


def test_the_good_spec_is_accepted():
    s = testing.TestStream(**GOOD)
    s.add_elements([{"ts": 1, "v": 2}])
    s.advance_watermark_to(10)
    assert [p["s"] for p in s.take_panes()] == [2]


def test_aggregate_over_a_missing_column_names_the_aggregate():
    s = testing.TestStream(**{**GOOD, "aggregate": "sum(amount) AS total"})
    with pytest.raises(OptionError) as info:
        s.add_elements([{"ts": 1, "v": 2}])
    assert _same_option(info.value.option, "aggregate") and "amount" in str(info.value)


# --- valid input that must not crash: dict bundles whose first one has an all-null column --------
# Each runs in a subprocess: some of these crash the interpreter (segfault inside Arrow), which
# must show up as one failed test, not kill the whole test run.

_ALL_NULL_FIRST_BUNDLE = """
import json
from spark_windowing.testing import TestStream
s = TestStream(window="tumbling(10 milliseconds)", aggregate={aggregate!r}, key_columns="k",
               trigger="Repeatedly(AfterCount(1))", accumulation_mode="discarding")
s.add_elements({first!r})
s.add_elements([{{"ts": 2, "k": "a", "v": 6}}])
print(json.dumps([p["x"] for p in s.take_panes()]))
"""

FUNCS = ["sum", "count", "avg", "min", "max", "first", "last", "collect_list", "count_distinct"]
NULL_FIRST = {  # column that is all null in the first bundle -> that bundle
    "value": [{"ts": 1, "k": "a", "v": None}],
    "key": [{"ts": 1, "k": None, "v": 5}],
}


def _expected(func: str, column: str):
    after = {"sum": 6, "count": 1, "avg": 6.0, "min": 6, "max": 6, "first": 6, "last": 6,
             "collect_list": [6], "count_distinct": 1}[func]
    if column == "key":                 # the null-key row is malformed; only the second counts
        return [after]
    before = {"count": 0, "collect_list": [], "count_distinct": 0}.get(func)
    return [before, after]


@pytest.mark.parametrize("column", list(NULL_FIRST))
@pytest.mark.parametrize("func", FUNCS)
def test_all_null_first_bundle_is_valid_input(func, column):
    """A dict bundle's types are inferred; a first bundle whose value (or key) column is all null
    must not fix that column's type to null: no crash, and later values aggregate normally."""
    code = _ALL_NULL_FIRST_BUNDLE.format(aggregate=f"{func}(v) AS x", first=NULL_FIRST[column])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stderr[-1500:]}"
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == _expected(func, column)
