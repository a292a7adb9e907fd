"""``record_sliding(<size>)`` (Kafka Streams' KIP-450 sliding windows) through Spark into the Delta
pane tables and the late-data table, checked against TestStream replaying the very same
micro-batches (events, watermark, batch time)."""

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
WINDOW = "record_sliding(3 seconds)"
MS = 1000


def _bundles() -> list[list[dict]]:
    rnd = random.Random(450)
    out, i = [], 0
    for b in range(5):
        bundle = []
        for _ in range(6):  # out of order, some behind the watermark by more than the lateness
            bundle.append({"k": rnd.choice("ab"), "ts": T0 + b * 4 * SEC + rnd.randrange(-9_000, 3_000) * MS,
                           "v": rnd.randrange(100), "id": i})
            i += 1
        out.append(bundle)
    return out


def test_record_sliding_through_spark_into_delta(spark, tmp_path):
    bundles = _bundles()
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": WINDOW, "aggregate": AGG, "watermark": "bounded(1 second)",
            "allowedLateness": "2 seconds", "maxFilesPerTrigger": "1", "shards": "2",
            "stateLocation": str(tmp_path / "state"), "lateDataPath": str(tmp_path / "late")}
    chk = run_to_sink(spark, opts, tmp_path)
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()
    current = pane_table(tmp_path / "panes" / "current")
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table()

    s = TestStream(window=WINDOW, aggregate=AGG, key_columns="k", timestamp_unit="us",
                   allowed_lateness="2 seconds")
    replay_versions(s, chk, bundles)
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in s.take_panes()])
    assert triggers.num_rows > 5 and "window_seq" not in triggers.column_names
    assert rows(triggers, drop=("batch_seq",)) == rows(expected, drop=("batch_seq",))
    assert set(triggers.column("pane_timing").to_pylist()) == {"ON_TIME"} and all(triggers.column("is_final").to_pylist())
    # windows are [start, start + 3 s], both bounds inclusive, and hold only records within them
    ts_of = {r["id"]: r["ts"] for b in bundles for r in b}
    for r in rows(triggers):
        assert r["window_end"] - r["window_start"] == 3 * SEC
        assert all(r["window_start"] <= ts_of[i] <= r["window_end"] for i in r["ids"])
    # each window fires once: one row per key and window in `current`
    assert current.num_rows == triggers.num_rows
    want_late = sorted(r["id"] for r in s.take_late())
    assert len(want_late) > 0 and sorted(late.column("id").to_pylist()) == want_late
    assert set(late.column("reason").to_pylist()) == {"too_late"}
    seen = {i for ids in triggers.column("ids").to_pylist() for i in ids}
    assert seen.isdisjoint(want_late)
