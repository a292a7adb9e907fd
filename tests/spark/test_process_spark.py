"""Process functions with evictors (options ``process`` and ``evictor``) through Spark into the
Delta pane tables, checked against TestStream replaying the very same micro-batches (events,
watermark, batch time); and their option errors at ``load()``."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_windowing.testing import TestStream
from tests.spark._helpers import replay_versions, rows, run_to_sink
from tests.spark.test_source import SEC, T0, _ts

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64()),
                    ("id", pa.int64())])
FN = "tests.core.fixtures.process_functions:"


def _bundles(seed: int) -> list[list[dict]]:
    rnd = random.Random(seed)
    return [[{"k": rnd.choice("ab"), "ts": T0 + b * 3 * SEC + rnd.randrange(-2 * SEC, 2 * SEC),
              "v": rnd.randrange(10), "id": 10 * b + i} for i in range(6)] for b in range(5)]


def _options(tmp_path, **kw) -> dict[str, str]:
    return {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "watermark": "bounded(2 seconds)", "maxFilesPerTrigger": "1", "shards": "2",
            "stateLocation": str(tmp_path / "state"), **kw}


@pytest.mark.parametrize("window,trigger,mode,evictor", [
    ("session(2 seconds)", "AfterWatermark(early=AfterCount(3))", "accumulating_and_retracting", "count(3)"),
    ("tumbling(6 seconds)", "Repeatedly(AfterCount(4))", "discarding", "time(2 seconds)"),
])
def test_process_with_evictor_through_spark_into_delta(spark, tmp_path, window, trigger, mode, evictor):
    bundles = _bundles(len(window))
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = _options(tmp_path, window=window, trigger=trigger, accumulationMode=mode,
                    process=FN + "ids", evictor=evictor)
    chk = run_to_sink(spark, opts, tmp_path)
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()
    assert triggers.num_rows > 3
    assert {"ids", "new_ids", "evicted_ids", "expired_ids"} <= set(triggers.column_names)

    s = TestStream(window=window, trigger=trigger, accumulation_mode=mode, process=FN + "ids",
                   evictor=evictor, key_columns="k", timestamp_unit="us")
    replay_versions(s, chk, bundles)
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in s.take_panes()])
    want = expected.filter(pc.equal(expected.column("kind"), "TRIGGER"))
    assert rows(triggers, drop=("batch_seq",)) == rows(want, drop=("batch_seq",))
    # the evictor did evict something, and its bound holds in every pane
    assert any(triggers.column("evicted_ids").to_pylist())
    if evictor == "count(3)":
        assert max(len(i) for i in triggers.column("ids").to_pylist()) == 3
        retractions = DeltaTable(str(tmp_path / "panes" / "retractions")).to_pyarrow_table()
        want_r = expected.filter(pc.equal(expected.column("kind"), "RETRACTION"))
        assert retractions.num_rows > 0
        assert rows(retractions, drop=("batch_seq",)) == rows(want_r, drop=("batch_seq",))
    else:  # discarding: each pane's expired elements are the previous pane of its window
        assert any(triggers.column("expired_ids").to_pylist())


@pytest.mark.parametrize("extra,option,fragment", [
    (dict(process="no_such_module_xyz:f"), "process", "No module named"),
    (dict(process=FN + "ids", aggregate="count(*)"), "process", "not both"),
    (dict(aggregate="count(*)", evictor="count(2)"), "evictor", "together with process"),
    (dict(process=FN + "ids", evictor="delta(1, nope)"), "evictor", "'nope' is missing"),
])
def test_bad_process_options_fail_at_load(spark, tmp_path, extra, option, fragment):
    write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
        [{**r, "ts": _ts(r["ts"])} for r in _bundles(1)[0]], schema=SCHEMA))
    reader = spark.readStream.format("windowed")
    for k, v in _options(tmp_path, window="tumbling(5 seconds)", **extra).items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load()
    text = str(info.value)
    assert f"invalid option '{option}'" in text and fragment in text and "Accepted:" in text


def test_needed_columns_are_the_function_s_input_columns(tmp_path):
    """The upstream read is projected to what the function declares (plus keys, time and the
    delta evictor's column); a function declaring nothing reads every column."""
    from spark_windowing.datasource.source.parse import parse_options
    from spark_windowing.datasource.source.reader import needed_columns

    def cfg(**kw):
        return parse_options({k.lower(): v for k, v in _options(tmp_path, window="tumbling(6 seconds)", **kw).items()})
    assert needed_columns(cfg(process=FN + "values")) == ["k", "ts", "v"]
    assert needed_columns(cfg(process=FN + "values", evictor="delta(3, id)")) == ["k", "ts", "v", "id"]
    assert needed_columns(cfg(process=FN + "ids")) is None


def test_projected_process_function_through_spark(spark, tmp_path):
    """A function with input_columns = ["v"] (values) sees the projected upstream through Spark and gives
    the panes of TestStream over the same micro-batches."""
    bundles = _bundles(7)
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = _options(tmp_path, window="tumbling(6 seconds)", process=FN + "values")
    chk = run_to_sink(spark, opts, tmp_path)
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()
    assert triggers.num_rows >= 3 and {"vs", "new_vs"} <= set(triggers.column_names)
    s = TestStream(window="tumbling(6 seconds)", process=FN + "values", key_columns="k", timestamp_unit="us")
    replay_versions(s, chk, bundles)
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in s.take_panes()])
    assert rows(triggers, drop=("batch_seq",)) == rows(expected, drop=("batch_seq",))
