"""``countOrder`` through the plugin's parsers (no Spark session): ``format("windowed")``'s
reader options, ``window(df)``'s options, the ``spark.windowed.*`` conf defaults, and the
recorded producing spec (a restart or a sink fed with the other order is refused by name).
The semantics are tested in ``tests/core/test_count_order.py``."""

from __future__ import annotations

import json

import pytest

from spark_windowing.datasource._plugin import WindowedDataSource
from spark_windowing.datasource.options.spark_conf import CONF_DEFAULTS_OPTION
from spark_windowing.datasource.source.checks import check_state_spec
from spark_windowing.datasource.source.parse import parse_options
from spark_windowing.datasource.tables import pane_spec
from spark_windowing.datasource.window_options import parse_window_options
from spark_windowing.errors import OptionError
from spark_windowing.windows.kinds import CountWindow, TimestampCount

BASE = {"source": "generator", "timestampColumn": "event_time", "keyColumns": "user_id",
        "window": "count(3, 1)", "aggregate": "count(*) AS n", "stateLocation": "/tmp/unused-state"}


def _reader(**kw):
    return parse_options({k.lower(): v for k, v in {**BASE, **kw}.items() if v is not None})


def test_reader_and_window_df_parse_the_option():
    assert _reader().spec.window == CountWindow(3, 1)
    assert _reader(countOrder="timestamp").spec.window == TimestampCount(3, 1)
    assert _reader(COUNTORDER="Arrival").spec.window == CountWindow(3, 1)
    df_opts = {k: v for k, v in BASE.items() if k not in ("source", "stateLocation")}
    assert parse_window_options({**df_opts, "countOrder": "timestamp"})["spec"].window == TimestampCount(3, 1)


@pytest.mark.parametrize("kw,why", [
    (dict(countOrder="flink"), "Accepted"),
    (dict(countOrder="timestamp", window="tumbling(1 minute)"), "only count(<size>[, <slide>]) windows"),
    (dict(countOrder="timestamp", timestampColumn=None), "no timestampColumn"),
    (dict(countOrder="timestamp", trigger="AfterCount(2)"), "countOrder=timestamp"),
])
def test_bad_values_fail_at_load_naming_the_option(kw, why):
    with pytest.raises(OptionError) as e:
        _reader(**kw)
    assert why in str(e.value)
    assert e.value.option == ("trigger" if "trigger" in kw else "countOrder")


def test_a_restart_with_the_other_order_is_refused_naming_it():
    old = _reader(countOrder="timestamp")
    recorded = {"fingerprint": old.spec.fingerprint(), "shards": old.shards, "stateBuckets": old.state_buckets,
                "options": pane_spec.produced_by(old.spec)}
    check_state_spec(old, recorded)
    with pytest.raises(OptionError) as e:
        check_state_spec(_reader(), recorded)
    assert e.value.option == "countOrder" and "countOrder 'timestamp' →" in str(e.value)


def test_the_sink_compares_the_order():
    arrival, timestamp = (pane_spec.produced_by(_reader(countOrder=o).spec) for o in (None, "timestamp"))
    assert "countOrder" not in arrival  # queries without it record what they recorded before
    changed = {c[0]: c[1:] for c in pane_spec.changes(arrival, timestamp, pane_spec.COMPARED)}
    assert changed["countOrder"] == (None, "timestamp") and changed["trigger"] == ("Default()", "Never()")


@pytest.mark.parametrize("window,applies", [("count(5)", True), ("count(5, 2)", True),
                                            ("tumbling(1 minute)", False), ("count(5, 1 minute)", False)])
def test_a_conf_default_applies_to_count_windows_only(window, applies):
    conf = json.dumps({"countOrder": "timestamp", "join": "inner"})
    source = WindowedDataSource({"source": "generator", "window": window, CONF_DEFAULTS_OPTION: conf})
    assert source.options.get("countorder") == ("timestamp" if applies else None)
    assert "join" not in source.options  # a one-stream query: no join default either
