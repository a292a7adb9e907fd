"""Key hashes (spark_windowing._hash) against a plain-Python splitmix64: shards and state buckets
are chosen by these hashes, so state written by an earlier run routes keys the same way only if
they never change. The NumPy code works in place on cache-sized blocks; the reference works one
value at a time."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing._hash import _BLOCK, hash_columns, mix

M64 = (1 << 64) - 1


def splitmix64(i: int, seed: int) -> int:
    z = (i + seed * 0x9E3779B97F4A7C15 + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def reference(columns: list[list], seed: int = 0x5EED) -> list[int]:
    """Per row: acc * 1_000_003 + h(value) over the columns; ints by splitmix64 of their int64 bits
    (None as 0), anything else by the CRC-32 of its repr."""
    out = []
    for row in zip(*columns):
        acc = 0
        for v in row:
            h = splitmix64((0 if v is None else v) & M64, seed) if isinstance(v, int) or v is None and \
                all(isinstance(x, int) or x is None for x in row) else zlib.crc32(repr(v).encode())
            acc = (acc * 1_000_003 + h) & M64
        out.append(acc)
    return out


ints = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(ints, st.none()), max_size=50), st.lists(ints, min_size=1, max_size=50),
       st.integers(1, 4))
def test_integer_keys_hash_like_the_reference(values, other, chunks):
    n = min(len(values), len(other))
    values, other = values[:n], other[:n]
    cut = [n * i // chunks for i in range(chunks + 1)]
    chunked = pa.chunked_array([pa.array(values[a:b], pa.int64()) for a, b in zip(cut, cut[1:])], pa.int64())
    got = hash_columns([chunked, pa.array(other, pa.int64())], n)
    assert got.tolist() == reference([values, other])


def test_narrow_and_unsigned_integers_hash_by_their_int64_value():
    small = [-128, -1, 0, 7, 127]
    assert hash_columns([pa.array(small, pa.int8())], 5).tolist() == reference([small])
    big = [0, 1, (1 << 64) - 1, 1 << 63]
    assert hash_columns([pa.array(big, pa.uint64())], 4).tolist() == \
        [splitmix64(v, 0x5EED) for v in big]


def test_string_keys_hash_by_the_crc_of_their_repr():
    keys = ["a", None, "b", "a"]
    assert hash_columns([pa.array(keys)], 4).tolist() == [zlib.crc32(repr(k).encode()) for k in keys]


def test_mix_over_several_blocks_equals_the_reference():
    i = np.arange(2 * _BLOCK + 5, dtype=np.int64) * 7919 - 10_000
    got = mix(i, 0xB0C4E7)
    assert got.tolist() == [splitmix64(int(v) & M64, 0xB0C4E7) for v in i]
    assert i[0] == -10_000  # the input is not overwritten
