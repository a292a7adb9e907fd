"""The pane and late-data tables read by delta-spark, the JVM Delta Lake: ``format("delta")``,
``delta.`path``` SQL, time travel, ``DESCRIBE HISTORY``, catalog tables in a later session, and
tables whose log ends in a checkpoint written by ``deltalake``. Every read is compared with
``deltalake``'s reader of the same table version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from sink_helpers import rows

HERE = Path(__file__).resolve().parent
TABLES = ("triggers", "retractions", "current", "late")

#: A windowed query with early firings, retractions (accumulating_and_retracting, growing
#: sessions) and late events, over the deterministic generator.
PIPELINE = {"source": "generator", "totalEvents": "1200", "eventsPerBatch": "300", "keys": "6",
            "eventInterval": "200 milliseconds", "disorder": "2 seconds", "lateFraction": "0.05",
            "timestampColumn": "event_time", "keyColumns": "user_id", "window": "session(2 seconds)",
            "trigger": "AfterWatermark(early=AfterCount(3))",
            "accumulationMode": "accumulating_and_retracting",
            "aggregate": "sum(amount) AS total, count(*) AS n", "watermark": "bounded(3 seconds)"}


def run_windowed_to_sink(spark, root: Path, options: dict[str, str]) -> None:
    """Run a windowed query with availableNow into the pane sink at ``root/panes``, late rows to
    ``root/panes/late``."""
    reader = spark.readStream.format("windowed")
    for k, v in {**options, "stateLocation": str(root / "state"),
                 "lateDataPath": str(root / "panes" / "late")}.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("windowed").option("path", str(root / "panes"))
         .option("checkpointLocation", str(root / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    assert not q.isActive and q.exception() is None, q.exception()


@pytest.fixture(scope="module")
def panes(delta_spark, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("delta_panes")
    run_windowed_to_sink(delta_spark, root, PIPELINE)
    return root / "panes"


def deltalake_rows(path: Path, version: int | None = None) -> list[tuple]:
    return rows(DeltaTable(str(path), version=version).to_pyarrow_table())


def spark_rows(frame) -> list[tuple]:
    return rows(frame.toArrow())


@pytest.mark.spark
@pytest.mark.parametrize("table", TABLES)
def test_format_delta_reads_what_deltalake_reads(delta_spark, panes, catalog_job, table):
    got = delta_spark.read.format("delta").load(str(panes / table))

    expected = deltalake_rows(panes / table)
    assert len(expected) > 0
    assert spark_rows(got) == expected
    assert got.columns == DeltaTable(str(panes / table)).schema().to_arrow().names


@pytest.mark.spark
def test_tables_hold_retractions_and_late_rows(panes):
    kinds = set(DeltaTable(str(panes / "retractions")).to_pyarrow_table()["kind"].to_pylist())
    reasons = set(DeltaTable(str(panes / "late")).to_pyarrow_table()["reason"].to_pylist())

    assert kinds == {"RETRACTION"}
    assert "too_late" in reasons or "closed" in reasons


@pytest.mark.spark
def test_sql_over_delta_paths_equals_the_windowed_reader(delta_spark, panes):
    sql = ("SELECT window_start, window_end, user_id, total, n FROM delta.`{}` "
           "WHERE n >= 2 ORDER BY window_start, user_id")
    got = delta_spark.sql(sql.format(panes / "current"))
    delta_spark.read.format("windowed").option("path", str(panes)).option("table", "current") \
        .load().createOrReplaceTempView("current_windowed")
    expected = delta_spark.sql("SELECT window_start, window_end, user_id, total, n FROM current_windowed "
                               "WHERE n >= 2 ORDER BY window_start, user_id")

    assert got.count() > 0
    assert got.collect() == expected.collect()


@pytest.mark.spark
@pytest.mark.slow  # about 1 minute on 2 cores (delta-spark's time travel); format("delta") reads run in CI
def test_time_travel_reads_every_version_as_deltalake_does(delta_spark, panes):
    for table in ("triggers", "current"):
        latest = DeltaTable(str(panes / table)).version()
        assert latest >= 3
        for version in (1, latest):
            got = delta_spark.read.format("delta").option("versionAsOf", version).load(str(panes / table))
            assert spark_rows(got) == deltalake_rows(panes / table, version), (table, version)
        sql = f"SELECT count(*) FROM delta.`{panes / table}` VERSION AS OF 1"
        assert delta_spark.sql(sql).first()[0] == len(deltalake_rows(panes / table, 1))


@pytest.mark.spark
def test_describe_history_names_the_sink_app_id_and_batch_id(delta_spark, panes):
    for table in ("triggers", "retractions", "current"):
        history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{panes / table}`").collect()
        commits = [h for h in history if h["version"] > 0]          # version 0 creates the table
        assert commits, table
        meta = [json.loads(h["userMetadata"]) for h in commits]
        app_ids = {m["appId"] for m in meta}
        assert len(app_ids) == 1 and app_ids.pop().startswith("spark-windowing-sink-")
        batches = [m["batchId"] for m in sorted(meta, key=lambda m: m["batchId"])]
        assert batches == sorted(set(batches)) and batches[0] >= 0     # one commit per batch
        txn = DeltaTable(str(panes / table)).transaction_version(meta[0]["appId"])
        assert txn == max(batches)
        assert {h["operation"] for h in commits} <= {"WRITE", "MERGE"}
    late = [h for h in delta_spark.sql(f"DESCRIBE HISTORY delta.`{panes / 'late'}`").collect()
            if h["version"] > 0]                                        # version 0: created empty at start
    late_ids = [json.loads(h["userMetadata"]) for h in late]
    assert late_ids and all(m["appId"].startswith("spark-windowing-late:") for m in late_ids)
    assert len({(m["appId"], m["batchId"]) for m in late_ids}) == len(late)   # once per shard and batch


@pytest.fixture(scope="module")
def catalog_job(panes, tmp_path_factory):
    """A separate Spark application with a Hive catalog kept in a Derby database: its first
    SparkSession registers the pane tables (CREATE TABLE ... USING DELTA LOCATION) and stops; a
    later SparkSession queries them by name (see _catalog_job.py). Started when the pane tables
    exist, in the background, so it overlaps the tests of this session."""
    metastore = tmp_path_factory.mktemp("metastore")
    with open(metastore / "out.txt", "w") as out, open(metastore / "err.txt", "w") as err:
        job = subprocess.Popen([sys.executable, str(HERE / "_catalog_job.py"), str(metastore), str(panes)],
                               stdout=out, stderr=err)
    yield job, metastore
    if job.poll() is None:
        job.kill()
        job.wait()


@pytest.mark.spark
def test_catalog_tables_are_queried_by_name_in_a_later_session(panes, catalog_job):
    job, metastore = catalog_job
    job.wait(timeout=400)
    assert job.returncode == 0, (metastore / "err.txt").read_text()[-3000:]

    result = json.loads((metastore / "out.txt").read_text().strip().splitlines()[-1])
    assert result["created_in"] != result["queried_in"]          # two SparkSessions, one after the other
    for table in TABLES:
        assert result["counts"][table] == len(deltalake_rows(panes / table)), table
    current = DeltaTable(str(panes / "current")).to_pyarrow_table()
    assert result["total_by_user"] == {
        u: round(sum(t for uu, t in zip(current["user_id"].to_pylist(), current["total"].to_pylist()) if uu == u), 6)
        for u in set(current["user_id"].to_pylist())}
    assert result["tables"] == sorted(f"panes_{t}" for t in TABLES)


@pytest.mark.spark
def test_tables_checkpointed_by_deltalake_read_by_delta_spark(delta_spark, panes, tmp_path):
    for table in ("current", "late"):       # written by MERGE / by write_deltalake
        copy = tmp_path / table
        shutil.copytree(panes / table, copy)
        DeltaTable(str(copy)).create_checkpoint()
        checkpoint = DeltaTable(str(copy)).version()
        # as Delta's log cleanup leaves it: commits before the checkpoint gone, so only the
        # checkpoint describes the table up to its version
        for commit in (copy / "_delta_log").glob("*.json"):
            if int(commit.name.split(".")[0]) < checkpoint:
                commit.unlink()
        assert (copy / "_delta_log" / f"{checkpoint:020d}.checkpoint.parquet").exists()

        got = delta_spark.read.format("delta").load(str(copy))

        assert spark_rows(got) == deltalake_rows(panes / table), table


def duckdb_with_delta_extension():
    """A DuckDB connection with the Delta extension loaded from the duckdb-extension-delta wheel
    (DuckDB's own extension binary, packaged on PyPI: no download from DuckDB's servers)."""
    import duckdb
    import duckdb_extension_delta

    binary = (Path(duckdb_extension_delta.__file__).parent / "extensions" / f"v{duckdb.__version__}"
              / "delta.duckdb_extension")
    con = duckdb.connect()
    con.load_extension(str(binary))
    return con


@pytest.mark.spark
@pytest.mark.parametrize("table", TABLES)
def test_duckdb_delta_extension_reads_what_deltalake_reads(panes, table):
    con = duckdb_with_delta_extension()

    got = con.execute(f"SELECT * FROM delta_scan('{panes / table}')").to_arrow_table()

    assert con.execute("SELECT count(*) FROM duckdb_extensions() WHERE extension_name = 'delta' "
                       "AND loaded").fetchone()[0] == 1
    assert got.column_names == DeltaTable(str(panes / table)).schema().to_arrow().names
    assert rows(got) == deltalake_rows(panes / table)


@pytest.mark.spark
def test_current_appended_for_one_pane_per_window_reads_alike(delta_spark, tmp_path):
    """A one-shot spec (the Default trigger, no allowed lateness, here on the driver): ``current``
    takes each batch's panes as a blind append with ``window_end_bucket`` partition values in the
    log (no MERGE); delta-spark reads it, partition column included, as deltalake does."""
    options = {**{k: v for k, v in PIPELINE.items() if k not in ("trigger", "accumulationMode")},
               "window": "tumbling(2 seconds)", "execution": "driver"}
    run_windowed_to_sink(delta_spark, tmp_path, options)
    current = tmp_path / "panes" / "current"
    operations = delta_spark.sql(f"DESCRIBE HISTORY delta.`{current}`").select("operation").toArrow()
    assert "WRITE" in operations.column(0).to_pylist() and "MERGE" not in operations.column(0).to_pylist()
    got = delta_spark.read.format("delta").load(str(current))
    expected = deltalake_rows(current)
    assert len(expected) > 5
    assert spark_rows(got) == expected
    # one pane per window: current holds exactly the pane log's rows
    triggers = delta_spark.read.format("delta").load(str(tmp_path / "panes" / "triggers"))
    assert spark_rows(got.drop("window_end_bucket")) == spark_rows(triggers.select(*got.drop("window_end_bucket").columns))
