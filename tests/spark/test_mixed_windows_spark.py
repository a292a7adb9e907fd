"""Storm's mixed windows — ``count(n, <duration>)`` and ``sliding(<duration>, n elements)`` —
through Spark into the Delta pane tables and the late-data table, checked against TestStream
replaying the very same micro-batches (events, watermark, batch time)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_windowing.testing import TestStream
from tests.spark._helpers import replay_versions, rows, run_to_sink
from tests.spark.sink_helpers import pane_table
from tests.spark.test_source import SEC, T0, _ts

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64()),
                    ("id", pa.int64())])
AGG = "sum(v) AS total, count(*) AS n, collect_list(id) AS ids"


def _bundles(seed: int) -> list[list[dict]]:
    rnd = random.Random(seed)
    out, i = [], 0
    for b in range(6):
        bundle = []
        for _ in range(8):
            bundle.append({"k": rnd.choice("ab"), "ts": T0 + b * 4 * SEC + rnd.randrange(-7 * SEC, 3 * SEC),
                           "v": rnd.randrange(100), "id": i})
            i += 1
        out.append(bundle)
    return out


@pytest.mark.parametrize("window", ["count(3, 4 seconds)", "sliding(6 seconds, 3 elements)"])
def test_mixed_window_through_spark_into_delta(spark, tmp_path, window):
    bundles = _bundles(len(window))
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": window, "aggregate": AGG, "watermark": "bounded(2 seconds)", "maxFilesPerTrigger": "1",
            "shards": "2", "stateLocation": str(tmp_path / "state"), "lateDataPath": str(tmp_path / "late")}
    chk = run_to_sink(spark, opts, tmp_path)
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()
    current = pane_table(tmp_path / "panes" / "current")
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table()

    s = TestStream(window=window, aggregate=AGG, key_columns="k", timestamp_unit="us")
    replay_versions(s, chk, bundles)
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in s.take_panes()])
    assert triggers.num_rows > 3 and "window_seq" in triggers.column_names
    assert rows(triggers, drop=("batch_seq",)) == rows(expected, drop=("batch_seq",))
    assert set(triggers.column("pane_timing").to_pylist()) == {"ON_TIME"} and all(triggers.column("is_final").to_pylist())
    # each evaluation is its own window in `current` (told apart by window_seq)
    assert current.num_rows == triggers.num_rows
    want_late = sorted(r["id"] for r in s.take_late())
    assert len(want_late) > 0 and sorted(late.column("id").to_pylist()) == want_late
    assert set(late.column("reason").to_pylist()) == {"too_late"}
    # a late element is in no window
    seen = {i for ids in triggers.column("ids").to_pylist() for i in ids}
    assert seen.isdisjoint(want_late)
