"""Stable hashes of key columns: the same value gives the same hash in every process and run
(no Python ``hash()``), vectorized for integer keys, once per distinct value otherwise."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def mix(i: np.ndarray, seed: int) -> np.ndarray:
    """A stateless 64-bit hash (splitmix64) of index and seed: reproducible anywhere."""
    with np.errstate(over="ignore"):
        z = i.astype(np.uint64)  # a new array: the steps below work in place
        z += np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x9E3779B97F4A7C15)
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def hash_columns(columns: list[pa.Array | pa.ChunkedArray], n: int, seed: int = 0x5EED) -> np.ndarray:
    """One uint64 per row over ``columns`` (nulls hash like 0 / ``None``)."""
    acc = np.zeros(n, dtype=np.uint64)
    for col in columns:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_integer(col.type):
            ints = col if col.null_count == 0 else col.fill_null(0)
            hashed = mix(ints.to_numpy(zero_copy_only=False), seed)
        else:
            enc = pc.dictionary_encode(col)
            codes = np.array([zlib.crc32(repr(v).encode()) for v in enc.dictionary.to_pylist()], dtype=np.uint64)
            hashed = codes[enc.indices.fill_null(0).to_numpy(zero_copy_only=False)] if len(codes) else \
                np.zeros(len(col), dtype=np.uint64)
        with np.errstate(over="ignore"):
            acc *= np.uint64(1_000_003)
            acc += hashed
    return acc
