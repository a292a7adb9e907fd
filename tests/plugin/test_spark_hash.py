"""``datasource.spark_hash`` without Spark: values Spark 4's ``xxhash64`` gives (taken from
``SELECT xxhash64(...)``; ``tests/spark/test_window_df_rescale.py`` compares with Spark itself),
nulls, and the shard rule ``window(df)`` routes keys by."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_windowing.datasource.spark_hash import SEED, spark_shard_of, supported, xxhash64


@pytest.mark.parametrize("array, spark", [
    (pa.array([1], pa.int32()), -6698625589789238999),
    (pa.array([1], pa.int64()), -7001672635703045582),
    (pa.array(["a"]), -8582455328737087284),
    (pa.array([True]), -6698625589789238999),          # a boolean hashes as the int 1
])
def test_sparks_values(array, spark):
    assert int(xxhash64([array])[0]) == spark


def test_a_null_leaves_the_hash_and_columns_chain():
    assert int(xxhash64([pa.array([None], pa.string())])[0]) == SEED
    a, b = pa.array(["a"]), pa.array([1], pa.int32())
    chained = int(xxhash64([a, b])[0])
    assert chained != int(xxhash64([b])[0]) and chained != int(xxhash64([a])[0])


def test_long_strings_take_every_branch_and_equal_values_hash_equal():
    values = ["x" * n for n in (0, 3, 4, 7, 8, 31, 32, 33, 64, 70)]
    once = xxhash64([pa.array(values)])
    assert len(set(once.tolist())) == len(values)
    assert np.array_equal(once, xxhash64([pa.array(values, pa.large_string())]))


def test_the_shard_is_the_hash_modulo_the_count_never_negative():
    shards = spark_shard_of([pa.array([f"k{i}" for i in range(200)])], 7)
    assert shards.min() >= 0 and shards.max() <= 6 and len(set(shards.tolist())) == 7


def test_supported_types():
    assert supported(pa.string()) and supported(pa.timestamp("us", tz="UTC")) and supported(pa.date32())
    assert not supported(pa.list_(pa.int64())) and not supported(pa.decimal128(10, 2))
