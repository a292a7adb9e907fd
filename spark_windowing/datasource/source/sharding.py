"""Key sharding: which of a query's ``shards`` key shards a row belongs to (a leaf).

A row's shard is the stable hash of its key columns modulo the shard count, the same in every
process and run (``spark_windowing._hash``), so a key's state always lives in one shard's store.
Each shard reads a micro-batch's plan and keeps the rows of its keys (an upstream may instead give
each shard its own rows: ``Upstream.disjoint_shards``). ``window(df)`` lets Spark's shuffle route
rows instead: ``shard_labels`` are the partition labels that put shard i in partition i.
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


def _murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (what ``hash()`` and hash partitioning compute for an int)."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF
    k = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k = rotl(k, 15) * 0x1B873593 & 0xFFFFFFFF
    h = rotl(seed ^ k, 13)
    h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & 0xFFFFFFFF
    h ^= h >> 13
    h = h * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def shard_labels(shards: int) -> list[int]:
    """For each shard i, the smallest int that Spark's ``repartition(shards, col)`` sends to
    partition i (``pmod(murmur3(label, 42), shards)``): with these labels partition i holds
    exactly shard i, so no two shards share a task while a core idles."""
    labels: list[int | None] = [None] * shards
    found, value = 0, 0
    while found < shards:
        p = _murmur3_int(value) % shards
        if labels[p] is None:
            labels[p], found = value, found + 1
        value += 1
    return labels  # type: ignore[return-value]
