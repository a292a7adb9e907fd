"""``execution=driver``: the operator steps in the driver's planning process and Spark takes the
panes as one in-memory partition. The same events give the same pane tables and late-data table
as ``execution=executors``; the panes carry the windowing spec in their schema on both routes
(the driver route hands Spark Arrow batches with the Spark metadata), so ``current`` closes its windows.
A kill -9 and restart of a driver-mode query: ``test_source_replay``."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.spark._helpers import offsets, run_to_sink
from tests.spark.sink_helpers import TABLE_NAMES, pane_table, rows
from tests.spark.test_source import SEC, T0, _ts
from tests.spark.test_source_replay import _write_events

pytestmark = pytest.mark.spark


def _run(spark, tmp_path, execution: str, **options: str) -> dict[str, list[tuple]]:
    root = tmp_path / "-".join([execution, *options.values()])
    chk = run_to_sink(spark, {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
                        "window": "tumbling(4 seconds)",
                        "trigger": "AfterWatermark(early=AfterCount(2), late=AfterCount(1))",
                        "accumulationMode": "accumulating_and_retracting",
                        "aggregate": "sum(v) AS total, count(*) AS n", "watermark": "bounded(2 seconds)",
                        "allowedLateness": "3 seconds", "maxFilesPerTrigger": "1", "shards": "2",
                        "execution": execution, "stateLocation": str(root / "state"),
                        "lateDataPath": str(root / "late"), **options}, root)
    out = {}
    for name in TABLE_NAMES:
        table = pane_table(root / "panes" / name)
        out[name] = rows(table.drop_columns([c for c in ("batch_time",) if c in table.column_names]))
    late = DeltaTable(str(root / "late")).to_pyarrow_table()
    out["late"] = rows(late.select([c for c in late.column_names if c in ("k", "ts", "v", "reason")]))
    out["final"] = [pc.sum(pane_table(root / "panes" / "current")["is_final"].cast(pa.int64())).as_py()]
    out["routes"] = [end.get("route") for _, end in offsets(chk)]
    return out


def _same_tables(a: dict, b: dict) -> bool:
    return {k: v for k, v in a.items() if k != "routes"} == {k: v for k, v in b.items() if k != "routes"}


def test_driver_execution_gives_the_tables_of_executors(spark, tmp_path):
    events = str(tmp_path / "events")
    _write_events(events, versions=12, seed=23)
    # a last version of events a minute behind the watermark: too late, into the late-data table
    write_deltalake(events, pa.table({"k": ["k1", "k2", "k3"], "ts": [_ts(T0 - 60 * SEC + i) for i in range(3)],
                                      "v": [1, 2, 3]}, schema=pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])),
                    mode="append")
    executors, driver = _run(spark, tmp_path, "executors"), _run(spark, tmp_path, "driver")
    assert len(executors["triggers"]) > 20 and executors["retractions"] and executors["late"]
    # the watermark passed some windows' end + allowedLateness: the sink marked them final in
    # current, which it can only do knowing the spec (in driver mode: through the checkpoint)
    assert 0 < executors["final"][0] < len(executors["current"])
    assert _same_tables(driver, executors)
    assert set(executors["routes"]) == {None} and set(driver["routes"]) == {None}


def test_auto_switches_route_between_batches_and_gives_the_tables_of_either(spark, tmp_path):
    """``execution=auto`` (``source.auto``) with a crossover of 10 events over batches of 30 and
    3 events: the first batch on the driver, then executors after a batch of more than 10 events,
    back to the driver after one of fewer than 5; the tables equal those of the executors route
    (and so the driver route's, by the test above). In this test session (local mode, Java
    serialization) ``auto`` without the option keeps these small batches on the driver."""
    events = str(tmp_path / "events")
    _write_events(events, versions=12, seed=5, sizes=[30, 30, 3, 3, 30, 3])
    executors = _run(spark, tmp_path, "executors")
    switching = _run(spark, tmp_path, "auto", autoExecutorsAbove="10")
    assert len(executors["triggers"]) > 20 and executors["retractions"]
    assert _same_tables(switching, executors)
    routes = switching["routes"]
    assert routes[:7] == ["driver", "executors", "executors", "driver", "driver", "executors", "driver"], routes
    assert set(_run(spark, tmp_path, "auto")["routes"]) == {"driver"}


def test_auto_routes_a_batch_by_its_own_size_when_the_upstream_knows_it(spark, tmp_path):
    """Parquet files say their rows in their footers (``Upstream.planned_events``), so ``auto``
    sends a batch of more than 10 events to the executors before any batch showed the size: the
    first one, and one of 30 after one of 3 (which the events of the batch before would have left
    on the driver); back to the driver as before (after a batch of fewer than 5). The tables equal
    the executors route's. The files: the Delta table's own Parquet files, one per version, read
    in order."""
    events = str(tmp_path / "events")
    _write_events(events, versions=12, seed=7, sizes=[30, 30, 3, 3, 30, 3])
    for version in range(12):     # Spark's and our file sources read files by modification time
        log = (tmp_path / "events" / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        added = next(json.loads(line)["add"]["path"] for line in log if '"add"' in line)
        os.utime(tmp_path / "events" / added, (1_700_000_000 + version, 1_700_000_000 + version))
    executors = _run(spark, tmp_path, "executors", source="parquet")
    sized = _run(spark, tmp_path, "auto", source="parquet", autoExecutorsAbove="10")
    assert len(executors["triggers"]) > 20 and executors["retractions"]
    assert _same_tables(sized, executors)
    assert sized["routes"][:7] == ["executors", "executors", "executors", "driver", "executors", "executors",
                                   "executors"], sized["routes"]
