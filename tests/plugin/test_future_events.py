"""Events from the future (``maxEventTimeAhead``): one event dated 2099 must not close every open
window. Such an event goes to the late output as ``future``, enters no window and moves no
watermark — neither the source's (``bounded``, ``column``) nor a Kafka partition's. No Spark here:
the operator, the option parse and the reader's per-shard maxima (what the driver's next
watermark is computed from) are driven directly.

Timeline (µs; processing time P = 2026-03-02T12:00Z, bound 1 day):

    events      12:00:01 a   12:00:02 b   2099-06-01 x   12:00:05 c
    windows     [12:00, 12:01) gets a, b, c; x -> late 'future'
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from spark_windowing import OperatorSpec, WindowedOperator
from spark_windowing.datasource.source.parse import parse_options
from spark_windowing.datasource.source.maxima import batch_maxima
from spark_windowing.datasource.upstreams.kafka import KafkaUpstream
from spark_windowing.errors import OptionError

TS = pa.timestamp("us", tz="UTC")


def _us(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp() * 1_000_000)


P = _us("2026-03-02T12:00:00")
FUTURE = _us("2099-06-01T11:59:00")


def _events(rows) -> pa.Table:
    return pa.table({"k": [r[0] for r in rows], "ts": pa.array([r[1] for r in rows], pa.int64()).cast(TS)})


def _op(ahead: str | None = "1 day", **kw) -> WindowedOperator:
    spec = OperatorSpec.from_options(window="tumbling(1 minute)", aggregate="count(*) AS n", key_columns="k",
                                     timestamp_column="ts", max_event_time_ahead=ahead, **kw)
    return WindowedOperator(spec)


def test_an_event_years_ahead_goes_to_the_late_output_as_future_and_moves_nothing():
    op = _op()
    first = op.step(_events([("a", P + 1_000_000), ("b", P + 2_000_000), ("x", FUTURE)]),
                    watermark=P, processing_time=P)
    assert first.late.column("reason").to_pylist() == ["future"]
    assert first.late.column("k").to_pylist() == ["x"] and first.metrics["future"] == 1
    assert first.panes.num_rows == 0            # nothing fired: the 12:00 window is still open
    # the next batch's event of the same window is an ordinary element, not too late
    second = op.step(_events([("c", P + 5_000_000)]), watermark=P + 2_000_000, processing_time=P + 10_000_000)
    assert second.late.num_rows == 0
    third = op.step(None, watermark=P + 60_000_000, processing_time=P + 70_000_000)
    assert sorted((r["k"], r["n"]) for r in third.panes.to_pylist()) == [("a", 1), ("b", 1), ("c", 1)]


def test_an_event_within_the_bound_is_an_ordinary_element():
    op = _op("1 hour")
    r = op.step(_events([("a", P + 59 * 60_000_000)]), watermark=P, processing_time=P)
    assert r.late.num_rows == 0 and op.num_windows == 1


def test_without_a_bound_the_event_from_the_future_opens_its_window():
    """``off``: the hazard the bound exists for — the 2099 event is windowed like any other."""
    op = _op("off")
    r = op.step(_events([("x", FUTURE)]), watermark=P, processing_time=P)
    assert r.late.num_rows == 0 and op.num_windows == 1


def test_no_processing_time_no_check():
    """A TestStream that never sets processing time cannot tell the future: no event is refused."""
    op = _op("1 second")
    r = op.step(_events([("x", FUTURE)]), watermark=None, processing_time=None)
    assert r.late.num_rows == 0 and op.num_windows == 1


@pytest.mark.parametrize("raw", ["0 seconds", "soon", "-1 day"])
def test_a_bad_bound_names_the_option_and_the_forms(raw):
    with pytest.raises(OptionError) as e:
        _op(raw)
    assert e.value.option == "maxEventTimeAhead" and "or off" in str(e.value)


def _cfg(**extra):
    base = {"source": "parquet", "path": "/tmp/unused", "timestampColumn": "ts", "keyColumns": "k",
            "window": "tumbling(1 minute)", "aggregate": "count(*) AS n", "stateLocation": "/tmp/unused"}
    return parse_options({k.lower(): v for k, v in {**base, **extra}.items()})


def test_the_source_defaults_to_one_day_and_takes_off():
    assert _cfg().spec.max_time_ahead == 86_400_000_000
    assert _cfg(maxEventTimeAhead="off").spec.max_time_ahead is None
    assert _cfg(maxEventTimeAhead="10 minutes").spec.max_time_ahead == 600_000_000
    with pytest.raises(OptionError) as e:
        _cfg(maxEventTimeAhead="tomorrow")
    assert e.value.option == "maxEventTimeAhead"


def test_the_shards_maxima_leave_future_events_out_of_the_next_watermark():
    """What the driver's next ``bounded`` watermark is computed from: the max event time of the
    events that are neither malformed nor from the future; a ``column`` watermark likewise."""
    cfg = _cfg()
    op = WindowedOperator(cfg.spec)
    events = _events([("a", P + 1_000_000), ("x", FUTURE), ("c", P + 5_000_000)])
    m = batch_maxima(cfg, op, events, P)
    assert m.max_event == P + 5_000_000
    assert m.watermark_times[1].tolist() == [True, False, True]
    col = _cfg(watermark="column(wm)")
    events = events.append_column("wm", pa.array([P, FUTURE, P + 1], pa.int64()).cast(TS))
    assert batch_maxima(col, WindowedOperator(col.spec), events, P).max_col == P + 1
    off = _cfg(maxEventTimeAhead="off")
    assert batch_maxima(off, WindowedOperator(off.spec), _events([("x", FUTURE)]), P).max_event == FUTURE


def test_a_kafka_partitions_watermark_is_protected_the_same_way():
    """Per-partition maxima (what each Kafka partition's watermark follows) skip future events."""
    opts = {"source": "kafka", "kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "schema": "k string",
            "timestampColumn": "timestamp", "keyColumns": "k", "window": "tumbling(1 minute)",
            "aggregate": "count(*) AS n", "stateLocation": "/tmp/unused"}
    cfg = parse_options({k.lower(): v for k, v in opts.items()})
    events = pa.table({"k": ["a", "x", "b"], "topic": ["t", "t", "t"], "partition": pa.array([0, 0, 1], pa.int32()),
                       "timestamp": pa.array([P + 1, FUTURE, P + 2], pa.int64()).cast(TS)})
    maxima = batch_maxima(cfg, WindowedOperator(cfg.spec), events, P)
    report = KafkaUpstream(cfg).report_fields(events, maxima.watermark_times, {"skipped": 0}, 0)
    assert report["partition_max_us"] == {"t:0": P + 1, "t:1": P + 2}
    assert np.array_equal(maxima.watermark_times[1], [True, False, True])
