"""Key sharding: which of a query's ``shards`` key shards a row belongs to (a leaf).

A row's shard is the stable hash of its key columns modulo the shard count, the same in every
process and run (``spark_windowing._hash``), so a key's state always lives in one shard's store.
Each shard reads a micro-batch's plan and keeps the rows of its keys (an upstream may instead give
each shard its own rows: ``Upstream.disjoint_shards``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import get_column
from spark_windowing._hash import hash_columns


def key_hash(table: pa.Table, key_columns: tuple[str, ...]) -> np.ndarray:
    """A stable uint64 hash of the key columns per row (per distinct key, not per row)."""
    return hash_columns([get_column(table, name) for name in key_columns], table.num_rows)


def shard_of(table: pa.Table, key_columns: tuple[str, ...], shards: int) -> np.ndarray:
    """Shard number per row: the key hash modulo the shard count."""
    if shards == 1 or not key_columns or table.num_rows == 0:
        return np.zeros(table.num_rows, dtype=np.int64)
    return (key_hash(table, key_columns) % np.uint64(shards)).astype(np.int64)
