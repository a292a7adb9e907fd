"""``source=delta`` over tables that delta-spark wrote: partitioned, column mapping with a renamed
column, classic and v2 checkpoints, ``timestamp_ntz``, deletion vectors after DELETE / UPDATE /
MERGE, OPTIMIZE. Every event is read exactly once or the query fails naming the cause; commits
that are not appends follow Spark's Delta streaming source (fail by default, ``skipChangeCommits``,
``ignoreDeletes``), checked against Spark's own Delta stream over the same table."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampNTZType, TimestampType

from _helpers import run_panes

T0 = datetime(2026, 1, 1)
WINDOW = timedelta(seconds=10)


def events(first_id: int, n: int) -> list[tuple]:
    """``n`` events (k, ts, v, id) with ids from ``first_id``: 3 keys, one event per 1.7 s."""
    return [(f"k{i % 3}", T0 + timedelta(milliseconds=1700 * i), i * 10, i) for i in range(first_id, first_id + n)]


def schema(ts_type=TimestampType(), value: str = "v") -> StructType:
    return StructType([StructField("k", StringType()), StructField("ts", ts_type),
                       StructField(value, LongType()), StructField("id", LongType())])


def append(spark, path, rows, ts_type=TimestampType(), value: str = "v") -> None:
    spark.createDataFrame(rows, schema(ts_type, value)).write.format("delta").mode("append").save(str(path))


def windowed_ids(spark, path, tmp_path, **options: str) -> dict[tuple, list[int]]:
    """Run the windowed query over the delta upstream; the event ids of each key and window (from
    each window's last pane: accumulating, one pane per micro-batch that touched it)."""
    name = uuid.uuid4().hex[:8]
    panes = run_panes(spark, {"source": "delta", "path": str(path), "timestampColumn": "ts", "keyColumns": "k",
                              "window": "tumbling(10 seconds)", "trigger": "Repeatedly(AfterCount(1))",
                              "accumulationMode": "accumulating", "watermark": "bounded(1 hour)",
                              "aggregate": "collect_list(id) AS ids", "stateLocation": str(tmp_path / f"s{name}"),
                              **options}, str(tmp_path / f"c{name}"))
    last: dict[tuple, tuple[int, list[int]]] = {}
    for r in panes.to_pylist():
        key = (r["k"], r["window_start"].replace(tzinfo=None))
        if key not in last or r["pane_index"] > last[key][0]:
            last[key] = (r["pane_index"], sorted(r["ids"]))
    return {k: ids for k, (_, ids) in last.items()}


def by_window(rows) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for k, ts, _v, i in rows:
        start = T0 + (ts - T0) // WINDOW * WINDOW
        out.setdefault((k, start), []).append(i)
    return {key: sorted(ids) for key, ids in out.items()}


def spark_stream_ids(spark, path, tmp_path, **options: str) -> list[int]:
    """The event ids Spark's own Delta streaming source delivers (availableNow) reading commit by
    commit from version 0, as ``source=delta`` does (without ``startingVersion`` Spark would start
    from a snapshot of the latest version instead)."""
    name = "d" + uuid.uuid4().hex[:8]
    reader = spark.readStream.format("delta").option("startingVersion", "0")
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load(str(path)).select("id").writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return sorted(r["id"] for r in spark.table(name).collect())


@pytest.mark.spark
def test_partitioned_column_mapped_renamed_ntz_checkpointed_table(delta_spark, tmp_path):
    path = tmp_path / "events"
    delta_spark.sql(f"""CREATE TABLE delta.`{path}` (k STRING, ts TIMESTAMP_NTZ, amount BIGINT, id BIGINT)
        USING DELTA PARTITIONED BY (k) TBLPROPERTIES ('delta.columnMapping.mode' = 'name',
        'delta.checkpointInterval' = '2', 'delta.checkpointPolicy' = 'v2')""")
    delta_spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN amount TO v")            # version 1
    rows = []
    for b in range(3):                                                                  # versions 2..4
        batch = events(b * 7, 7)
        append(delta_spark, path, batch, TimestampNTZType())
        rows += batch
    log = path / "_delta_log"
    assert list(log.glob("*.checkpoint*.parquet")) or list((log / "_sidecars").glob("*.parquet"))

    got = windowed_ids(delta_spark, path, tmp_path, startingVersion="2")

    assert got == by_window(rows)
    assert sum(len(v) for v in got.values()) == 21
    with pytest.raises(Exception, match=r"another schema at version 0 \(columns \['k', 'ts', 'amount', 'id'\]\)"):
        windowed_ids(delta_spark, path, tmp_path, startingVersion="0")


def _table_with_changes(spark, path) -> list[tuple]:
    """A table with deletion vectors: appends, DELETE, UPDATE, MERGE, OPTIMIZE, more appends.
    Returns the appended events."""
    spark.sql(f"""CREATE TABLE delta.`{path}` (k STRING, ts TIMESTAMP, v BIGINT, id BIGINT) USING DELTA
        TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')""")
    appended = []
    for b in range(3):
        batch = events(b * 6, 6)
        append(spark, path, batch)
        appended += batch
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 4 = 1")
    spark.sql(f"UPDATE delta.`{path}` SET v = -v WHERE id % 4 = 2")
    spark.createDataFrame([("k0", T0, 0, 0), ("k9", T0, 0, 999)], schema()).createOrReplaceTempView("src")
    spark.sql(f"""MERGE INTO delta.`{path}` t USING src s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET v = 7 WHEN NOT MATCHED THEN INSERT *""")
    spark.sql(f"OPTIMIZE delta.`{path}`")
    batch = events(100, 6)
    append(spark, path, batch)
    return appended + batch


@pytest.mark.spark
@pytest.mark.slow  # about 100 s on 2 cores (delta-spark's DELETE, UPDATE, MERGE, OPTIMIZE); deletes run in CI below
def test_change_commits_fail_by_default_and_are_skipped_with_skip_change_commits(delta_spark, tmp_path):
    path = tmp_path / "dv"
    appended = _table_with_changes(delta_spark, path)
    history = {r["operation"] for r in delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()}
    assert {"DELETE", "UPDATE", "MERGE", "OPTIMIZE"} <= history

    with pytest.raises(Exception, match="data update .*DELETE.* at version 4.*skipChangeCommits"):
        windowed_ids(delta_spark, path, tmp_path)
    got = windowed_ids(delta_spark, path, tmp_path, skipChangeCommits="true")

    assert got == by_window(appended)
    assert sorted(i for ids in got.values() for i in ids) == \
        spark_stream_ids(delta_spark, path, tmp_path, skipChangeCommits="true")


@pytest.mark.spark
def test_delete_only_commits_fail_by_default_and_pass_with_ignore_deletes(delta_spark, tmp_path):
    path = tmp_path / "parts"
    delta_spark.sql(f"CREATE TABLE delta.`{path}` (k STRING, ts TIMESTAMP, v BIGINT, id BIGINT) USING DELTA "
                    "PARTITIONED BY (k)")
    rows = events(0, 12)
    append(delta_spark, path, rows)
    delta_spark.sql(f"DELETE FROM delta.`{path}` WHERE k = 'k1'")                       # removes files only
    later = events(50, 6)
    append(delta_spark, path, later)

    with pytest.raises(Exception, match="deleted data .* at version 2.*ignoreDeletes=true"):
        windowed_ids(delta_spark, path, tmp_path)
    got = windowed_ids(delta_spark, path, tmp_path, ignoreDeletes="true")

    assert got == by_window(rows + later)
    assert sorted(i for ids in got.values() for i in ids) == \
        spark_stream_ids(delta_spark, path, tmp_path, ignoreDeletes="true")
