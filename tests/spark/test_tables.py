"""Pane tables as batch DataFrames and SQL views: ``spark.read.format("windowed")`` and
``CREATE TEMPORARY VIEW ... USING windowed``, checked against ``deltalake``'s own reader; plus the
Arrow <-> Spark type mapping they rely on."""

from __future__ import annotations

import decimal
from datetime import date, datetime, timezone

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql.types import (ArrayType, DateType, DecimalType, LongType, MapType, StringType,
                               StructField, TimestampNTZType, TimestampType)

import pane_source
from spark_windowing.datasource._types import arrow_to_spark_schema, spark_to_arrow_schema
from spark_windowing.datasource.tables.table_reader import TOP_KEYS_PER_WINDOW_SQL, TableOptions
from sink_helpers import TABLE_NAMES, pane_table, run_pipeline
from spark_windowing.errors import OptionError


@pytest.fixture(scope="module")
def pane_tables(spark, tmp_path_factory):
    """The tables of one sink run: 7 micro-batches, 6 tumbling and 3 session keys."""
    pane_source.register(spark)
    root = tmp_path_factory.mktemp("tables")
    run_pipeline(spark, root / "panes", root / "chk", batches=7, keys=6)
    return root / "panes"


def deltalake_frame(spark, path, table, version=None):
    """The table as ``deltalake`` reads it, as a Spark DataFrame with the table's schema."""
    data = pane_table(path / table, version)
    schema = arrow_to_spark_schema(data.schema)
    return spark.createDataFrame([tuple(r.values()) for r in data.to_pylist()], schema)


def windowed_frame(spark, path, table, **options):
    reader = spark.read.format("windowed").option("path", str(path)).option("table", table)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.spark
@pytest.mark.parametrize("table", TABLE_NAMES)
def test_read_table_equals_deltalake_reader(spark, pane_tables, table):
    got = windowed_frame(spark, pane_tables, table)
    expected = deltalake_frame(spark, pane_tables, table)

    assert got.count() > 0
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.spark
def test_sql_view_over_current_equals_deltalake_reader(spark, pane_tables):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW clicks USING windowed "
              f"OPTIONS (path '{pane_tables}', table 'current')")

    got = spark.sql("SELECT * FROM clicks")

    assert_df_equality(got, deltalake_frame(spark, pane_tables, "current"),
                       ignore_row_order=True, ignore_nullable=True)


@pytest.mark.spark
def test_top_keys_per_window(spark, pane_tables):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW clicks USING windowed "
              f"OPTIONS (path '{pane_tables}', table 'current')")

    got = spark.sql(TOP_KEYS_PER_WINDOW_SQL)

    current = pane_table(pane_tables / "current").to_pylist()
    by_window: dict[tuple, list[dict]] = {}
    for r in current:
        by_window.setdefault((r["window_start"], r["window_end"]), []).append(r)
    expected = [(ws, we, r["user_id"], r["total"], rank)
                for (ws, we) in sorted(by_window)
                for rank, r in enumerate(sorted(by_window[(ws, we)], key=lambda r: (-r["total"], r["user_id"]))[:3], 1)]
    assert len({(ws, we) for ws, we, *_ in expected}) > 3
    assert any(rank == 3 for *_, rank in expected)
    assert_df_equality(got, spark.createDataFrame(expected, got.schema), ignore_nullable=True)


@pytest.mark.spark
def test_version_as_of_reads_an_older_snapshot(spark, pane_tables):
    got = windowed_frame(spark, pane_tables, "triggers", versionAsOf="2")

    assert got.count() < windowed_frame(spark, pane_tables, "triggers").count()
    assert_df_equality(got, deltalake_frame(spark, pane_tables, "triggers", version=2),
                       ignore_row_order=True, ignore_nullable=True)


@pytest.mark.spark
def test_bad_table_option_lists_accepted_tables(spark, pane_tables):
    with pytest.raises(Exception, match="invalid option 'table' = 'latest'.*Accepted: 'current', 'triggers', "
                                        "'retractions' \\(under the sink's path\\) or 'late'"):
        windowed_frame(spark, pane_tables, "latest").schema


@pytest.mark.spark
def test_missing_table_names_the_path(spark, tmp_path):
    with pytest.raises(Exception, match=f"no pane table at {tmp_path}/nothing/current"):
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW missing USING windowed "
                  f"OPTIONS (path '{tmp_path}/nothing', table 'current')")


def test_table_options_parse():
    opts = TableOptions.parse({"PATH": "/lake/panes/", "Table": "Current", "versionAsOf": "3"})

    assert (opts.root, opts.table, opts.version, opts.uri) == ("/lake/panes", "current", 3,
                                                              "/lake/panes/current")
    with pytest.raises(OptionError, match="'versionAsOf' = 'x'"):
        TableOptions.parse({"path": "/p", "table": "current", "versionasof": "x"})
    with pytest.raises(OptionError, match="'path' = None"):
        TableOptions.parse({"table": "triggers"})


# --------------------------------------------------------------------------- type mapping

ARROW = pa.schema([
    pa.field("k", pa.string(), nullable=False),
    pa.field("t", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("ntz", pa.timestamp("us")),
    pa.field("d", pa.date32()),
    pa.field("i", pa.int32()),
    pa.field("l", pa.int64()),
    pa.field("f", pa.float32()),
    pa.field("x", pa.float64()),
    pa.field("b", pa.bool_()),
    pa.field("dec", pa.decimal128(12, 3)),
    pa.field("bin", pa.binary()),
    pa.field("xs", pa.list_(pa.field("element", pa.int64(), nullable=False))),
    pa.field("st", pa.struct([pa.field("a", pa.string()), pa.field("ts", pa.timestamp("us", tz="UTC"))])),
    pa.field("m", pa.map_(pa.string(), pa.field("value", pa.float64()))),
])


def test_arrow_spark_round_trip_keeps_types_and_nullability():
    spark_schema = arrow_to_spark_schema(ARROW)

    assert spark_to_arrow_schema(spark_schema) == ARROW
    assert spark_schema["t"] == StructField("t", TimestampType(), nullable=False)
    assert spark_schema["ntz"].dataType == TimestampNTZType()
    assert spark_schema["dec"].dataType == DecimalType(12, 3)
    assert spark_schema["xs"].dataType == ArrayType(LongType(), containsNull=False)
    assert spark_schema["m"].dataType == MapType(StringType(), spark_schema["x"].dataType)


def test_arrow_variants_map_to_canonical_forms():
    variants = pa.schema([("t", pa.timestamp("ms", tz="Europe/Paris")), ("s", pa.large_string()),
                          ("d", pa.date64()), ("u", pa.uint32()),
                          ("e", pa.dictionary(pa.int32(), pa.string())), ("ll", pa.large_list(pa.int8()))])

    back = spark_to_arrow_schema(arrow_to_spark_schema(variants))

    assert back == pa.schema([("t", pa.timestamp("us", tz="UTC")), ("s", pa.string()), ("d", pa.date32()),
                              ("u", pa.int64()), ("e", pa.string()), ("ll", pa.list_(pa.int8()))])


def test_unsupported_types_name_the_column():
    with pytest.raises(TypeError, match="column 'big': Arrow type uint64"):
        arrow_to_spark_schema(pa.schema([("big", pa.uint64())]))
    with pytest.raises(TypeError, match="column 'st.dur'"):
        arrow_to_spark_schema(pa.schema([("st", pa.struct([("dur", pa.duration("s"))]))]))


@pytest.mark.spark
def test_spark_reads_values_of_every_mapped_type(spark, tmp_path):
    values = {"k": "a", "t": datetime(2024, 1, 1, 12, 30, 0, 123456, tzinfo=timezone.utc),
              "ntz": datetime(2024, 1, 1, 12, 30), "d": date(2024, 2, 29), "i": 7, "l": 2**40,
              "f": 1.5, "x": 2.25, "b": True, "dec": decimal.Decimal("123.456"), "bin": b"\x00\x01",
              "xs": [1, 2], "st": {"a": "z", "ts": datetime(2024, 1, 1, tzinfo=timezone.utc)},
              "m": [("p", 0.5)]}
    table = pa.Table.from_pylist([values], schema=ARROW)
    from deltalake import write_deltalake
    write_deltalake(str(tmp_path / "current"), table)

    got = windowed_frame(spark, tmp_path, "current").collect()[0].asDict(recursive=True)

    assert got["t"] == values["t"].replace(tzinfo=None)          # session time zone is UTC
    assert got["ntz"] == values["ntz"] and got["d"] == values["d"] and got["dec"] == values["dec"]
    assert (got["i"], got["l"], got["f"], got["x"], got["b"]) == (7, 2**40, 1.5, 2.25, True)
    assert bytes(got["bin"]) == b"\x00\x01" and got["xs"] == [1, 2] and got["m"] == {"p": 0.5}
    assert got["st"] == {"a": "z", "ts": datetime(2024, 1, 1)}
    assert isinstance(spark.read.format("windowed").option("path", str(tmp_path))
                      .option("table", "current").load().schema["d"].dataType, DateType)


@pytest.fixture(scope="module")
def late_table(spark, tmp_path_factory):
    """The late-data table of a generated stream with late and out-of-order events."""
    root = tmp_path_factory.mktemp("late")
    panes = (spark.readStream.format("windowed").option("source", "generator").option("totalEvents", "600")
             .option("eventsPerBatch", "200").option("keys", "4").option("lateFraction", "0.2")
             .option("timestampColumn", "event_time").option("keyColumns", "user_id")
             .option("window", "tumbling(10 seconds)").option("watermark", "bounded(1 second)")
             .option("aggregate", "count(*) AS n").option("stateLocation", str(root / "state"))
             .option("lateDataPath", str(root / "late")).load())
    (panes.writeStream.format("windowed").option("path", str(root / "panes"))
     .option("checkpointLocation", str(root / "chk")).trigger(availableNow=True).start().awaitTermination())
    return root / "late"


@pytest.mark.spark
def test_the_late_table_reads_through_the_plugin_and_sql(spark, late_table):
    got = windowed_frame(spark, late_table, "late")
    expected = pane_table(late_table)
    assert expected.num_rows > 0
    assert_df_equality(got, spark.createDataFrame([tuple(r.values()) for r in expected.to_pylist()],
                                                  arrow_to_spark_schema(expected.schema)),
                       ignore_row_order=True, ignore_nullable=True)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW late_clicks USING windowed OPTIONS (path '{late_table}', table 'late')")
    by_reason = dict(spark.sql("SELECT reason, count(*) FROM late_clicks GROUP BY reason").collect())
    assert sum(by_reason.values()) == expected.num_rows and "too_late" in by_reason


@pytest.mark.spark
def test_the_late_table_read_names_the_missing_table(spark, tmp_path):
    with pytest.raises(Exception, match="no late-data table at .*lateDataPath"):
        windowed_frame(spark, tmp_path / "nothing", "late").schema


@pytest.mark.spark
def test_a_query_that_dropped_nothing_has_an_empty_late_table(spark, tmp_path):
    """The source creates its late-data table when the query starts, not at the first late row."""
    panes = (spark.readStream.format("windowed").option("source", "generator").option("totalEvents", "50")
             .option("eventsPerBatch", "50").option("keys", "2").option("timestampColumn", "event_time")
             .option("keyColumns", "user_id").option("window", "tumbling(1 minute)")
             .option("aggregate", "count(*) AS n").option("stateLocation", str(tmp_path / "state"))
             .option("lateDataPath", str(tmp_path / "late")).load())
    (panes.writeStream.format("windowed").option("path", str(tmp_path / "panes"))
     .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start().awaitTermination())
    late = windowed_frame(spark, tmp_path / "late", "late")
    assert late.count() == 0
    assert {"user_id", "event_time", "amount", "reason", "window_start", "batch_seq"} <= set(late.columns)
