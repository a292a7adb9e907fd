"""``window(df, schema=...)``: the DataFrame's schema declared, so ``window`` does not analyze it
(a declarative pipeline's query function refuses analysis; ``tests/spark/test_window_df_pipeline.py``
runs that form with ``spark-pipelines``). Here, without Spark: the option's forms, its errors, and
the step's check of each batch against the declared columns."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType, TimestampType

from spark_windowing.datasource.window_df import BT_COLUMN, PART_COLUMN, WM_COLUMN, _ShardStep
from spark_windowing.datasource.window_options import declared_schema, parse_window_options
from spark_windowing.errors import OptionError

OPTIONS = {"window": "tumbling(10 seconds)", "aggregate": "count(*) AS n", "timestampColumn": "ts",
           "keyColumns": "k", "shards": "1"}
T0 = 1_700_000_000_000_000


def test_no_schema_option_means_none():
    assert declared_schema(OPTIONS) is None


def test_a_ddl_string_and_a_struct_type_declare_the_same_columns():
    struct = StructType([StructField("k", StringType()), StructField("ts", TimestampType())])
    assert declared_schema({**OPTIONS, "Schema": "k string, ts timestamp"}) == struct
    assert declared_schema({**OPTIONS, "schema": struct}) is struct


def test_the_schema_option_is_not_one_of_the_operators_string_options():
    cfg = parse_window_options({**OPTIONS, "schema": StructType([StructField("k", StringType())])})
    assert list(cfg["spec"].key_columns) == ["k"]


@pytest.mark.parametrize("value, why", [("", "the schema of the DataFrame"), (42, "the schema of the DataFrame")])
def test_a_schema_that_is_no_schema_fails_naming_the_option(value, why):
    with pytest.raises(OptionError, match="schema") as err:
        declared_schema({**OPTIONS, "schema": value})
    assert why in str(err.value) and "DDL string" in str(err.value)


def _step(tmp_path, in_schema: pa.Schema) -> _ShardStep:
    cfg = parse_window_options({**OPTIONS, "stateLocation": str(tmp_path / "state")})
    return _ShardStep(cfg["spec"], in_schema, cfg, "spark-windowing-late:window-df:test", str(tmp_path / "unused"))


def _staged(columns: dict, wm: list[int] | None = None) -> pa.Table:
    """The batch as ``window``'s plan gives it to the step: the internal columns added (``wm``:
    each row's watermark time, µs)."""
    n = len(next(iter(columns.values())))
    return pa.table({**columns, WM_COLUMN: pa.array(wm or [T0] * n, pa.int64()), BT_COLUMN: pa.array([T0] * n, pa.int64()),
                     PART_COLUMN: pa.array([0] * n, pa.int32())})


DECLARED = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])


def test_a_batch_without_a_declared_column_fails_naming_the_option_and_the_columns(tmp_path):
    batch = _staged({"key": ["a"], "ts": pa.array([T0], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(OptionError, match="schema") as err:
        list(_step(tmp_path, DECLARED).run(iter(batch.to_batches()), shard=0, batch_id=0, query_id="q"))
    assert "no column(s) k" in str(err.value) and "key string" in str(err.value)


def test_a_batch_whose_values_are_not_the_declared_type_fails_naming_the_option(tmp_path):
    batch = _staged({"k": ["a"], "ts": ["not a time"]})
    with pytest.raises(OptionError, match="schema") as err:
        list(_step(tmp_path, DECLARED).run(iter(batch.to_batches()), shard=0, batch_id=0, query_id="q"))
    assert "cannot be read as the declared type" in str(err.value)


def test_a_batch_of_the_declared_columns_is_windowed(tmp_path):
    step = _step(tmp_path, DECLARED)
    times = pa.array([T0, T0 + 11_000_000], pa.timestamp("us", tz="UTC"))
    first = _staged({"k": ["a", "a"], "ts": times}, wm=[T0, T0 + 11_000_000])
    assert not list(step.run(iter(first.to_batches()), shard=0, batch_id=0, query_id="q"))   # fires next batch
    fired = pa.Table.from_batches(list(step.run(iter([]), shard=0, batch_id=1, query_id="q")))
    assert fired.column("k").to_pylist() == ["a"] and fired.column("n").to_pylist() == [1]


def test_a_declared_struct_type_with_nested_types_is_accepted():
    struct = declared_schema({**OPTIONS, "schema": StructType([StructField("k", StringType()),
                                                               StructField("tags", ArrayType(LongType()))])})
    assert struct.fieldNames() == ["k", "tags"]
