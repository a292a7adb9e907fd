"""The late table (``lateDataPath``) deleted alone before a restart, the checkpoint, state and pane
tables kept (#56 item 4): the restart fails with an ``OptionError`` naming ``lateDataPath``, what is
missing and the two ways out (restore it; or a new checkpointLocation and stateLocation), and
changes no table. ``format("windowed")`` refuses at its first offset, before it creates anything;
``window(df)`` with a ``stateLocation`` refuses when it is called, and without one (its state found
by the query id) in the restart's first micro-batch. Restoring the table resumes the query, and
the tables then equal those of a run in which nothing was deleted. The check itself:
``tests/plugin/test_late_table_check.py``."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import spark_windowing
from spark_windowing.errors import OptionError
from tests.spark.sink_helpers import TABLE_NAMES, pane_table, rows

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000
WAYS_OUT = r"(?s)lateDataPath.*is missing.*committed micro-batches.*restored.*new checkpointLocation and a new stateLocation"
OPTIONS = {"timestampColumn": "ts", "keyColumns": "k", "window": "tumbling(20 seconds)",
           "trigger": "AfterWatermark(early=AfterCount(5))", "accumulationMode": "accumulating_and_retracting",
           "allowedLateness": "20 seconds", "watermark": "bounded(5 seconds)", "aggregate": "count(*) AS n, sum(v) AS s"}


def _events(directory, first: int, last: int) -> None:
    """Files ``first`` .. ``last - 1`` of 30 events each, one late (to the late table); mtimes in order."""
    directory.mkdir(parents=True, exist_ok=True)
    for b in range(first, last):
        ts = [T0 + (b * 30 + i) * 1_000_000 for i in range(30)]
        ts[5] -= 120_000_000
        path = directory / f"part-{b}.parquet"
        pq.write_table(pa.table({"k": [f"k{i % 3}" for i in range(30)], "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
                                 "v": list(range(30))}), path)
        os.utime(path, ns=(1_600_000_000_000_000_000 + b * 10**9,) * 2)


def _windowed(spark, out) -> None:
    """format("windowed") over the files into the windowed sink, availableNow."""
    options = {**OPTIONS, "source": "parquet", "path": str(out / "events"), "maxFilesPerTrigger": "1",
               "stateLocation": str(out / "state"), "lateDataPath": str(out / "late")}
    q = (spark.readStream.format("windowed").options(**options).load()
         .writeStream.format("windowed").option("path", str(out / "panes"))
         .option("checkpointLocation", str(out / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(300)            # raises the query's failure
    assert not q.isActive, "query did not finish in time"


def _window_df(spark, out, **extra) -> None:
    """window(df) over the files (Spark's file source, one file a batch) into the windowed sink."""
    df = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1).parquet(
        str(out / "events"))
    q = (spark_windowing.window(df, **OPTIONS, lateDataPath=str(out / "late"), shards=2, **extra)
         .writeStream.format("windowed").option("path", str(out / "panes"))
         .option("checkpointLocation", str(out / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive, "query did not finish in time"


def _tables(out) -> dict[str, list[tuple]]:
    """The pane tables and the late table, without the batch time (each run's wall clock)."""
    tables = {t: rows(pane_table(out / "panes" / t).drop_columns(["batch_time"])) for t in TABLE_NAMES}
    late = DeltaTable(str(out / "late")).to_pyarrow_table().select(["k", "ts", "v", "reason"])
    tables["late"] = sorted(tuple(r.values()) for r in late.to_pylist())
    return tables


def _versions(out) -> dict[str, int]:
    return {t: DeltaTable(str(out / "panes" / t)).version() for t in TABLE_NAMES}


@pytest.mark.parametrize("route", ["windowed", "window_df_state", "window_df"])
def test_a_late_table_deleted_alone_is_refused_and_restoring_it_resumes(spark, tmp_path, route):
    run = {"windowed": _windowed,
           "window_df_state": lambda s, o: _window_df(s, o, stateLocation=str(o / "state")),
           "window_df": _window_df}[route]
    clean, out = tmp_path / "clean", tmp_path / "out"
    for d in (clean, out):                       # two files, a restart, two more
        _events(d / "events", 0, 2)
        run(spark, d)
        _events(d / "events", 2, 4)
    run(spark, clean)
    assert _tables(out)["late"]                  # the first run wrote late rows
    shutil.copytree(out / "late", tmp_path / "backup")
    shutil.rmtree(out / "late")
    before = _versions(out)
    with pytest.raises(Exception, match=WAYS_OUT if route != "window_df" else
                       r"(?s)lateDataPath.*another table.*created anew.*committed micro-batches.*restored"):
        run(spark, out)
    assert _versions(out) == before              # no pane table written
    if route == "windowed":
        assert not (out / "late").exists()       # nothing created in its place
    shutil.rmtree(out / "late", ignore_errors=True)
    shutil.copytree(tmp_path / "backup", out / "late")
    run(spark, out)
    assert _tables(out) == _tables(clean)


def test_window_df_refuses_when_called(spark, tmp_path):
    """With a ``stateLocation``, ``window(df)`` itself raises: the query never starts."""
    out = tmp_path / "out"
    _events(out / "events", 0, 2)
    _window_df(spark, out, stateLocation=str(out / "state"))
    shutil.rmtree(out / "late")
    df = spark.readStream.schema("k string, ts timestamp, v long").parquet(str(out / "events"))
    with pytest.raises(OptionError, match=WAYS_OUT):
        spark_windowing.window(df, **OPTIONS, lateDataPath=str(out / "late"), stateLocation=str(out / "state"))
    assert not (out / "late").exists()
