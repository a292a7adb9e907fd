"""Spark's ``xxhash64(col, ...)`` in Python, over Arrow columns: which key shard ``window(df)``
routes a key to (``pmod(xxhash64(keys), shards)``), for the state a rescale moves between shards.

Spark's ``XxHash64`` (``catalyst.expressions.XxHash64``, ``XXH64.java``) starts from the seed 42 and
folds each column in: a null leaves the hash as it is; a boolean, byte, short, int or date hashes
as an int (``hashInt``), a long or timestamp (µs) as a long (``hashLong``), a float by its int bits
and a double by its long bits (``-0.0`` as ``0``), a string by its UTF-8 bytes and a binary by its
bytes (``hashUnsafeBytes``: the standard XXH64). The result is a signed long.

Ints and longs are hashed vectorized (NumPy's uint64 arithmetic wraps as Java's longs do); strings
and binaries per distinct value, in Python: a rescale hashes each key of the state once.

>>> int(xxhash64([pa.array([1], pa.int32())])[0]), int(xxhash64([pa.array(["a"])])[0])
(-6698625589789238999, -8582455328737087284)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["xxhash64", "spark_shard_of", "SEED", "supported"]

SEED = 42
_M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                      0x27D4EB2F165667C5)
_U = np.uint64


def supported(arrow_type: pa.DataType) -> bool:
    """Whether Spark's hash of this key type is computed here."""
    t = arrow_type
    return (pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t)
            or pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_binary(t) or pa.types.is_large_binary(t))


def xxhash64(columns: list, seed: int = SEED) -> np.ndarray:
    """Spark's ``xxhash64(c1, c2, ...)`` of each row of the Arrow arrays ``columns`` (int64)."""
    n = len(columns[0]) if columns else 0
    h = np.full(n, seed & _M, dtype=_U)
    for column in columns:
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        h = _fold(column, h)
    return h.view(np.int64)


def spark_shard_of(columns: list, shards: int) -> np.ndarray:
    """``pmod(xxhash64(columns), shards)``: the shard ``window(df)`` sends each row to."""
    return np.mod(xxhash64(columns), shards).astype(np.int64)


def _fold(column: pa.Array, h: np.ndarray) -> np.ndarray:
    """The hash after folding ``column`` in (rows where it is null keep theirs)."""
    t = column.type
    valid = np.ones(len(column), dtype=bool) if column.null_count == 0 else \
        column.is_valid().to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(t) or pa.types.is_date32(t) or (pa.types.is_integer(t) and t.bit_width <= 32):
        ints = column.view(pa.int32()) if pa.types.is_date32(t) else pc.cast(column, pa.int32())
        out = _hash_int(_numbers(ints), h)
    elif pa.types.is_integer(t):
        out = _hash_long(_numbers(pc.cast(column, pa.int64())), h)
    elif pa.types.is_timestamp(t):
        out = _hash_long(_numbers(column.cast(pa.timestamp("us", tz=t.tz)).view(pa.int64())), h)
    elif pa.types.is_float32(t):
        values = _numbers(column).astype(np.float32)
        values = np.where(values == 0.0, np.float32(0.0), values)            # -0.0 hashes as 0.0
        values = np.where(np.isnan(values), np.float32(np.nan), values)      # Java's one NaN
        out = _hash_int(values.view(np.int32), h)
    elif pa.types.is_floating(t):
        values = _numbers(pc.cast(column, pa.float64()))
        bits = np.where(values == 0.0, 0.0, values)
        bits = np.where(np.isnan(bits), np.float64(np.nan), bits).view(np.int64)
        out = _hash_long(bits, h)
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        out = _hash_bytes_column(column, h)
    else:
        raise TypeError(f"Spark's xxhash64 of a {t} column is not computed here")
    return np.where(valid, out, h)


def _numbers(array: pa.Array) -> np.ndarray:
    """A numeric array's values (its nulls as 0: ``_fold`` keeps the hash there)."""
    return array.fill_null(0).to_numpy(zero_copy_only=False)


def _hash_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """``XXH64.hashInt`` of each value (as its unsigned 32 bits) with each row's seed."""
    with np.errstate(over="ignore"):
        x = values.astype(np.int64).astype(_U) & _U(0xFFFFFFFF)
        h = seed + _U(P5) + _U(4)
        h ^= x * _U(P1)
        h = _rotl(h, 23) * _U(P2) + _U(P3)
        return _fmix(h)


def _hash_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """``XXH64.hashLong`` of each value with each row's seed."""
    with np.errstate(over="ignore"):
        x = values.astype(np.int64).view(_U)
        h = seed + _U(P5) + _U(8)
        h ^= _rotl(x * _U(P2), 31) * _U(P1)
        h = _rotl(h, 27) * _U(P1) + _U(P4)
        return _fmix(h)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U(r)) | (x >> _U(64 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = h ^ (h >> _U(33))
        h = h * _U(P2)
        h = h ^ (h >> _U(29))
        h = h * _U(P3)
        return h ^ (h >> _U(32))


def _hash_bytes_column(column: pa.Array, seed: np.ndarray) -> np.ndarray:
    """``hashUnsafeBytes`` of each value (UTF-8 for strings), once per distinct (value, seed)."""
    values = column.to_pylist()
    out = np.empty(len(values), dtype=_U)
    memo: dict[tuple, int] = {}
    for i, (v, s) in enumerate(zip(values, seed.tolist())):
        if v is None:
            out[i] = s
            continue
        data = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        key = (data, s)
        if key not in memo:
            memo[key] = _xxh64_bytes(data, s)
        out[i] = memo[key]
    return out


def _rotl_int(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * P2) & _M
    return (_rotl_int(acc, 31) * P1) & _M


def _xxh64_bytes(data: bytes, seed: int) -> int:
    """The standard XXH64 of ``data`` (little-endian lanes), as Spark's ``hashUnsafeBytes``."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & _M, (seed + P2) & _M, seed & _M, (seed - P1) & _M]
        while i <= n - 32:
            for lane in range(4):
                v[lane] = _round(v[lane], int.from_bytes(data[i + 8 * lane:i + 8 * lane + 8], "little"))
            i += 32
        h = (_rotl_int(v[0], 1) + _rotl_int(v[1], 7) + _rotl_int(v[2], 12) + _rotl_int(v[3], 18)) & _M
        for lane in range(4):
            h ^= _round(0, v[lane])
            h = (h * P1 + P4) & _M
    else:
        h = (seed + P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl_int(h, 27) * P1 + P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * P1) & _M
        h = (_rotl_int(h, 23) * P2 + P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * P5) & _M
        h = (_rotl_int(h, 11) * P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * P2) & _M
    h ^= h >> 29
    h = (h * P3) & _M
    return h ^ (h >> 32)
