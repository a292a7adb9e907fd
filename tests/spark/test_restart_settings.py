"""A restart with other session settings gives identical tables (#56): a query stopped after its
first files and restarted from its checkpoint under another ``spark.sql.session.timeZone`` and
``spark.sql.shuffle.partitions`` writes the tables a run that kept the settings writes, through
``format("windowed")`` and through ``window(df)``. The state and the offsets hold event times as
UTC microseconds, so the session's zone changes no window; ``window(df)``'s shuffle into key
shards takes its partition count from ``shards``, not from ``spark.sql.shuffle.partitions``."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.sink_helpers import TABLE_NAMES, pane_table, rows

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000
OPERATOR = {"timestampColumn": "ts", "keyColumns": "k", "window": "session(15 seconds)",
            "trigger": "AfterWatermark(early=AfterCount(4))", "accumulationMode": "accumulating_and_retracting",
            "watermark": "bounded(5 seconds)", "aggregate": "count(*) AS n, sum(v) AS s", "shards": "2"}
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])


def _file(directory, b: int) -> None:
    ts = [T0 + (b * 40 + i) * 1_000_000 + (i % 3) * 7_000_000 for i in range(40)]
    pq.write_table(pa.table({"k": [f"k{i % 5}" for i in range(40)], "ts": ts, "v": list(range(40))}, schema=SCHEMA),
                   directory / f"part-{b}.parquet")
    os.utime(directory / f"part-{b}.parquet", (1_700_000_000 + b * 10,) * 2)   # Spark's file source reads by mtime


def _run(spark, out, route: str) -> None:
    if route == "source":
        panes = (spark.readStream.format("windowed").options(**OPERATOR)
                 .options(source="parquet", path=str(out / "events"), maxFilesPerTrigger="1",
                          stateLocation=str(out / "state")).load())
    else:
        import spark_windowing
        events = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1) \
            .parquet(str(out / "events"))
        panes = spark_windowing.window(events, **OPERATOR, stateLocation=str(out / "state"))
    q = (panes.writeStream.format("windowed").option("path", str(out / "panes"))
         .option("checkpointLocation", str(out / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive, "query did not finish in time"
    assert q.exception() is None, q.exception()


def _tables(out) -> dict[str, list[tuple]]:
    return {t: rows(pane_table(out / "panes" / t).drop_columns(["batch_time"])) for t in TABLE_NAMES}


def _two_runs(spark, out, route: str, settings: dict[str, str]) -> dict[str, list[tuple]]:
    """Two files, a run; two more files, a restart from the checkpoint under ``settings``."""
    (out / "events").mkdir(parents=True)
    _file(out / "events", 0)
    _file(out / "events", 1)
    _run(spark, out, route)
    before = len(_tables(out)["triggers"])
    _file(out / "events", 2)
    _file(out / "events", 3)
    saved = {k: spark.conf.get(k) for k in settings}
    try:
        for k, v in settings.items():
            spark.conf.set(k, v)
        _run(spark, out, route)
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)
    tables = _tables(out)
    assert len(tables["triggers"]) > before, "the restart fired panes of the new files"
    return tables


@pytest.mark.parametrize("route", ["source", "window_df"])
def test_a_restart_under_another_time_zone_and_shuffle_partitions_writes_the_same_tables(spark, tmp_path, route):
    kept = _two_runs(spark, tmp_path / "kept", route, {})
    assert kept["current"] and kept["retractions"]
    changed = _two_runs(spark, tmp_path / "changed", route, {"spark.sql.session.timeZone": "America/Los_Angeles",
                                                              "spark.sql.shuffle.partitions": "5"})
    assert changed == kept
