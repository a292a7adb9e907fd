"""The shard pipeline (``spark_windowing.datasource.source.pipeline``) run by its three routes,
without Spark, over the same files: ``format("windowed")``'s executors (every partition's
``read``), its ``execution=driver`` (``latestOffset`` steps, ``partitions`` writes, ``getCache``
hands over) and ``window(df)``'s ``mapInArrow`` step (each shard's rows as Spark's shuffle would
give them, with the internal watermark and batch-time columns). Every micro-batch's panes and
the late table are the same on the three routes: one scenario for the steps they share (session
windows merging, early, on-time and late panes, retractions, too-late and malformed rows).

    files:  f0  f1  f2 ... f7     one file a micro-batch (maxFilesPerTrigger=1)
    keys:   40 users; event times disordered by up to 3 s; some 4 s behind (late), some 20 s (too late); some without a time
"""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from spark_windowing.datasource.source.driver import DriverStreamReader
from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
from spark_windowing.datasource.window_df import BT_COLUMN, PART_COLUMN, WM_COLUMN, _ShardStep
from spark_windowing.datasource.window_options import parse_window_options

BATCHES, SHARDS, DELAY_US = 8, 2, 1_000_000
T0 = 1_700_000_000_000_000
OPERATOR = {"window": "session(2 seconds)", "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
            "accumulationMode": "accumulating_and_retracting", "allowedLateness": "2 seconds",
            "aggregate": "sum(amount) AS s, count(*) AS n", "timestampColumn": "event_time",
            "keyColumns": "user_id", "watermark": "bounded(1 second)", "shards": str(SHARDS)}
SCHEMA = pa.schema([("user_id", pa.string()), ("event_time", pa.timestamp("us", tz="UTC")), ("amount", pa.float64())])


def _files(directory) -> list[pa.Table]:
    rng = random.Random(7)
    tables = []
    for b in range(BATCHES):
        rows = []
        for i in range(120):
            t = T0 + (b * 120 + i) * 50_000 + rng.randint(-3_000_000, 0)
            draw = rng.random()
            if draw < 0.05:
                t -= 20_000_000          # too late by then
            elif draw < 0.15:
                t -= 4_000_000           # behind the watermark, within the allowed lateness
            rows.append((f"u{rng.randrange(40)}", None if rng.random() < 0.02 else t, float(rng.randint(1, 9))))
        table = pa.table({"user_id": [r[0] for r in rows], "event_time": pa.array([r[1] for r in rows], SCHEMA[1].type),
                          "amount": [r[2] for r in rows]}, schema=SCHEMA)
        directory.mkdir(exist_ok=True)
        pq.write_table(table, directory / f"part-{b:03d}.parquet")
        tables.append(table)
    return tables


def _canonical(batches) -> list[str]:
    return sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_time"))
                  for b in batches for r in b.to_pylist())


def _source_options(tmp_path, route: str) -> dict[str, str]:
    return {**OPERATOR, "source": "parquet", "path": str(tmp_path / "events"), "maxFilesPerTrigger": "1",
            "stateLocation": str(tmp_path / route / "state"), "lateDataPath": str(tmp_path / route / "late"),
            "execution": "driver" if route == "driver" else "executors"}


def _executors(tmp_path) -> list[list[str]]:
    options = _source_options(tmp_path, "executors")
    reader = WindowedStreamReader(options, stream_schema(options))
    start, out = reader.initialOffset(), []
    for _ in range(BATCHES):
        end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
        out.append(_canonical(b for p in reader.partitions(start, end) for b in reader.read(p)))
        reader.commit(end)
        start = end
    return out


def _driver(tmp_path) -> list[list[str]]:
    options = _source_options(tmp_path, "driver")
    reader = DriverStreamReader(options, stream_schema(options))
    start, out = reader.initialOffset(), []
    for _ in range(BATCHES):
        end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
        reader.partitions(start, end)
        out.append(_canonical(reader.getCache(start, end)))
        reader.commit(end)
        start = end
    reader.stop()
    return out


def _window_df(tmp_path, files: list[pa.Table]) -> list[list[str]]:
    """Each file as one Spark micro-batch of ``window(df)``: the columns its plan adds (the
    watermark time = event time − delay, the batch time, a shard label), rows split by key shard
    (any split by key: which shard owns a key is the route's business), every shard's task run."""
    options = {**{k: v for k, v in OPERATOR.items()}, "stateLocation": str(tmp_path / "window_df" / "state"),
               "lateDataPath": str(tmp_path / "window_df" / "late")}
    cfg = parse_window_options(options)
    step = _ShardStep(cfg["spec"], SCHEMA, cfg, "spark-windowing-late:window-df:test", str(tmp_path / "unused"))
    from spark_windowing.datasource.tables.late import create_late_table
    from spark_windowing.operator import WindowedOperator
    create_late_table(cfg["late_path"], WindowedOperator(cfg["spec"], SCHEMA).late_schema())
    out = []
    for batch_id, table in enumerate(files):
        times = pc_micros(table.column("event_time"))
        wm = pa.array([None if t is None else t - DELAY_US for t in times], pa.int64())
        shard_of = np.array([hash(u) % SHARDS for u in table.column("user_id").to_pylist()])
        staged = table.append_column(WM_COLUMN, wm).append_column(
            BT_COLUMN, pa.array(np.full(table.num_rows, T0, np.int64))).append_column(
            PART_COLUMN, pa.array(shard_of.astype(np.int32)))
        panes = []
        for shard in range(SHARDS):
            rows = staged.filter(pa.array(shard_of == shard))
            panes += list(step.run(iter(rows.to_batches()), shard=shard, batch_id=batch_id, query_id="q"))
        out.append(_canonical(panes))
    return out


def pc_micros(column: pa.ChunkedArray) -> list[int | None]:
    return column.cast(pa.int64()).to_pylist()


def _late(path) -> list[str]:
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return sorted(repr((r["user_id"], r["event_time"], r["amount"], r["reason"])) for r in rows)


@pytest.fixture(scope="module")
def routes(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("pipeline")
    files = _files(tmp_path / "events")
    return tmp_path, {"executors": _executors(tmp_path), "driver": _driver(tmp_path),
                      "window_df": _window_df(tmp_path, files)}


def test_the_three_routes_give_the_same_panes_every_batch(routes):
    _, panes = routes
    assert sum(map(len, panes["executors"])) > 200
    assert any("RETRACTION" in r for b in panes["executors"] for r in b)
    assert any("'LATE'" in r for b in panes["executors"] for r in b)
    assert panes["driver"] == panes["executors"]
    assert panes["window_df"] == panes["executors"]


def test_the_three_routes_write_the_same_late_table(routes):
    tmp_path, _ = routes
    executors = _late(tmp_path / "executors" / "late")
    assert {r.rsplit(", ", 1)[1] for r in executors} >= {"'too_late')", "'malformed')"}
    assert _late(tmp_path / "driver" / "late") == executors
    assert _late(tmp_path / "window_df" / "late") == executors
