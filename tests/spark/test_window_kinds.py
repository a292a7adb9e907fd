"""Window kinds beyond tumbling/sliding/session, through Spark into the Delta pane tables, checked
against TestStream replaying the very same micro-batches (events, watermark, batch time)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_windowing.testing import TestStream
from tests.spark._helpers import micros, offsets, rows, run_to_sink
from tests.spark.test_source import SEC, T0, _ts

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64()),
                    ("gap", pa.int64())])


def _bundles(seed: int) -> list[list[dict]]:
    rnd = random.Random(seed)
    return [[{"k": rnd.choice("ab"), "ts": T0 + b * 4 * SEC + rnd.randrange(-3 * SEC, 3 * SEC),
              "v": rnd.randrange(100), "gap": rnd.choice([1000, 2000, 4000])} for _ in range(7)]
            for b in range(6)]


@pytest.mark.parametrize("window,trigger", [
    ("cumulate(8 seconds, 2 seconds)", "AfterWatermark(early=AfterCount(3))"),
    ("count(4, 2)", None),
    ("session(gapColumn=gap)", "AfterWatermark(early=AfterCount(2))"),
])
def test_window_kind_through_spark_into_delta(spark, tmp_path, window, trigger):
    bundles = _bundles(len(window))
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": window, "aggregate": "sum(v) AS total, count(*) AS n", "watermark": "bounded(3 seconds)",
            "accumulationMode": "accumulating_and_retracting", "maxFilesPerTrigger": "1", "shards": "2",
            "stateLocation": str(tmp_path / "state")}
    if trigger:
        opts["trigger"] = trigger
    chk = run_to_sink(spark, opts, tmp_path)
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()
    retractions = DeltaTable(str(tmp_path / "panes" / "retractions")).to_pyarrow_table()
    assert triggers.num_rows > 0

    s = TestStream(window=window, trigger=trigger, accumulation_mode="accumulating_and_retracting",
                   aggregate="sum(v) AS total, count(*) AS n", key_columns="k", timestamp_unit="us")
    for start, end in offsets(chk):
        first = 0 if start is None else start["up"] + 1
        # numeric gaps are in timestampUnit (ms by default); the replay runs in microseconds
        events = [{**r, "gap": r["gap"] * 1000} for v in range(first, end["up"] + 1) for r in bundles[v]]
        s.add_elements(events or pa.table({c: pa.array([], pa.int64() if c != "k" else pa.string())
                                           for c in ("k", "ts", "v", "gap")}),
                       watermark=end["wm"], processing_time=end["bt"])
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in s.take_panes()])
    want_t = expected.filter(pa.compute.equal(expected.column("kind"), "TRIGGER"))
    want_r = expected.filter(pa.compute.equal(expected.column("kind"), "RETRACTION"))
    assert rows(triggers, drop=("batch_seq",)) == rows(want_t, drop=("batch_seq",))
    assert rows(retractions, drop=("batch_seq",)) == rows(want_r, drop=("batch_seq",))
    if window.startswith("count"):
        assert "window_seq" in triggers.column_names
        assert set(triggers.column("pane_timing").to_pylist()) == {"ON_TIME"}
        # count(4, 2) as Flink's countWindow(4, 2): window j fires at a key's element 2(j+1),
        # holding its last 4 elements — 2 in the first window
        assert all(n == min(4, 2 * (j + 1)) for n, j in zip(triggers.column("n").to_pylist(),
                                                              triggers.column("window_seq").to_pylist()))
    if window.startswith("cumulate"):
        sizes = {micros(e) - micros(b) for b, e in zip(triggers.column("window_start").to_pylist(),
                                                       triggers.column("window_end").to_pylist())}
        assert sizes <= {2 * SEC, 4 * SEC, 6 * SEC, 8 * SEC} and len(sizes) > 1
