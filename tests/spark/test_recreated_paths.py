"""A deployment's ordinary re-runs in one SparkSession (Spark reuses its Python workers across
queries, so every cache that outlives a query is exposed): a windowed query into ``out/panes``
with its state, late table and checkpoint beside it; everything deleted (``rm -rf``); the same
query again in the same session. The second run's tables equal the first's, on both execution
routes. Before the caches knew their table's identity, the second run's first commit failed
(``DeltaError: ... File not found: .../panes/current/_delta_log/...json``): a table handle kept
by URI trusted a table deleted and created anew."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.sink_helpers import run_tables

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000


def _events(directory, batches: int = 4) -> None:
    directory.mkdir(parents=True)
    for b in range(batches):
        ts = [T0 + (b * 30 + i) * 1_000_000 for i in range(30)]
        ts[5] -= 120_000_000                                # late: to the late table
        pq.write_table(pa.table({"k": [f"k{i % 3}" for i in range(30)], "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
                                 "v": list(range(30))}), directory / f"part-{b}.parquet")


def _run(spark, out, execution: str) -> None:
    options = {"source": "parquet", "path": str(out / "events"), "maxFilesPerTrigger": "1",
               "timestampColumn": "ts", "keyColumns": "k", "window": "tumbling(20 seconds)",
               "trigger": "AfterWatermark(early=AfterCount(5))", "accumulationMode": "accumulating_and_retracting",
               "allowedLateness": "20 seconds", "watermark": "bounded(5 seconds)",
               "aggregate": "count(*) AS n, sum(v) AS s", "stateLocation": str(out / "state"),
               "lateDataPath": str(out / "late"), "execution": execution}
    q = (spark.readStream.format("windowed").options(**options).load()
         .writeStream.format("windowed").option("path", str(out / "panes"))
         .option("checkpointLocation", str(out / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive, "query did not finish in time"
    assert q.exception() is None, q.exception()


def _tables(out) -> dict[str, list[tuple]]:
    """The pane tables and the late table, without the batch time (the wall clock of each run)."""
    return run_tables(out)


@pytest.mark.parametrize("execution", ["executors", "driver"])
def test_a_deleted_and_recreated_output_runs_again_in_the_same_session(spark, tmp_path, execution):
    out = tmp_path / "out"
    _events(out / "events")
    _run(spark, out, execution)
    first = _tables(out)
    assert first["current"] and first["retractions"] and first["late"]
    for part in ("panes", "state", "late", "chk"):
        shutil.rmtree(out / part)
    _run(spark, out, execution)
    assert _tables(out) == first
