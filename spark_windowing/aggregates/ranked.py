"""Ranked rows: the built-in aggregates ``top(n, value, col, ...)``, ``bottom(n, value, col, ...)``,
``max_rows(value, col, ...)`` (``top(1, ...)``) and ``min_rows(value, col, ...)`` (``bottom(1, ...)``);
and ranked values, ``most_frequent(n, x)`` (``frequent`` below).

Semantics are SQL's ``RANK() <= n``, ties kept: a row of the window is in the result when fewer
than ``n`` of the window's rows have a strictly better ``value`` (larger for ``top`` and
``max_rows``, smaller for ``bottom`` and ``min_rows``). Rows whose value is null never are. The
result is one pane column, a list of structs ``{value, col, ...}`` with the input columns' names
and types: best value first, rows of equal value ordered by their columns (nulls first),
duplicate rows kept. Over the values 9, 9, 8, 7: ``top(2, v)`` gives 9, 9 (two rows beat 8),
``top(3, v)`` gives 9, 9, 8, ``max_rows(v)`` gives 9, 9, ``min_rows(v)`` gives 7.

This is NEXMark's "the auctions with the most bids" (q5) and "the bids at the highest price" (q7),
the argmax that Beam's and Flink's NEXMark queries write as a second aggregation and a join.

State per (key, window) is a multiset of row tuples (value first). Without retractions only the
rows that can still be in the result are kept: top-``n`` of a union lies within the union of the
parts' top-``n``, so each micro-batch first keeps, per window, its own candidates (one vectorized
sort) and the state keeps the candidates of everything so far. Over ``window=inherit`` input, whose
RETRACTION rows can take a winner back and expose a row beneath it, every row is kept.
"""

from __future__ import annotations

import heapq
from collections import Counter
from operator import itemgetter
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

FUNCS = ("top", "bottom", "max_rows", "min_rows")
_VALUE = itemgetter(0)   # a row tuple's ranked value


def best_first(func: str) -> bool:
    """Whether larger values rank first (``top``, ``max_rows``)."""
    return func in ("top", "max_rows")


def candidates(g: np.ndarray, values: pa.Array | pa.ChunkedArray, n: int, desc: bool) -> np.ndarray:
    """Indices of the pairs that can be in their group's result: per group ``g``, the rows whose
    non-null value is at least as good as the group's ``n``-th best (all of a group with fewer
    than ``n`` such rows). Ascending by group, best first."""
    valid = np.flatnonzero(np.asarray(values.is_valid()))
    if len(valid) == 0:
        return valid
    v, gv = values.take(pa.array(valid)), g[valid]
    if n == 1 and (pa.types.is_integer(v.type) or pa.types.is_floating(v.type)):
        best = _at_best(gv, v, desc)
        if best is not None:
            return valid[best[np.argsort(gv[best], kind="stable")]]
    order = pc.sort_indices(pa.table({"g": gv, "v": v}),
                            sort_keys=[("g", "ascending"), ("v", "descending" if desc else "ascending")]).to_numpy()
    sg, sv = gv[order], v.take(pa.array(order))
    new = np.r_[True, sg[1:] != sg[:-1]]
    starts = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    sizes = np.diff(np.r_[starts, len(sg)])
    nth = sv.take(pa.array(starts + np.minimum(sizes, n) - 1)).take(pa.array(gid))
    keep = np.asarray((pc.greater_equal if desc else pc.less_equal)(sv, nth).fill_null(False))
    return valid[order[keep]]


def _at_best(g: np.ndarray, v: pa.Array | pa.ChunkedArray, desc: bool) -> np.ndarray | None:
    """``candidates`` for ``n = 1`` without a sort: the positions whose value equals their group's
    best (one ``ufunc.at`` pass); None for floats with NaN (NumPy and Arrow order NaN apart)."""
    values = (v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v).to_numpy(zero_copy_only=False)
    if values.dtype.kind == "f" and np.isnan(values).any():
        return None
    fill = (np.iinfo(values.dtype).min if desc else np.iinfo(values.dtype).max) if values.dtype.kind in "iu" \
        else (-np.inf if desc else np.inf)
    best = np.full(int(g.max()) + 1, fill, dtype=values.dtype)
    (np.maximum if desc else np.minimum).at(best, g, values)
    return np.flatnonzero(values == best[g])


def row_tuples(table: pa.Table, columns: Iterable[str], idx: np.ndarray) -> list[tuple]:
    """Rows ``idx`` of ``table``'s ``columns`` as tuples (Python values)."""
    taken = table.select(list(columns)).take(pa.array(idx, pa.int64()))
    return list(zip(*(c.to_pylist() for c in taken.columns))) if taken.num_columns else []


def _key(v: Any) -> tuple:
    """Total order of a tuple's cell for ties: nulls first; lists and structs by their text."""
    if v is None:
        return (0, 0)
    return (1, repr(v) if isinstance(v, (list, dict)) else v)


def _threshold(acc: Counter, n: int, desc: bool) -> Any:
    """The value of the ``n``-th best row of ``acc`` counting duplicates (its worst value when it
    holds fewer): a row is in the result exactly when its value is at least as good. Found among
    the ``n`` best distinct rows, with C-level comparisons only (``itemgetter``, ``heapq``)."""
    best = (heapq.nlargest if desc else heapq.nsmallest)(n, acc, key=_VALUE)
    seen = 0
    for r in best:
        seen += acc[r]
        if seen >= n:
            return r[0]
    return (min if desc else max)(acc, key=_VALUE)[0]


def ranked(acc: Counter, n: int, desc: bool) -> list[tuple]:
    """The result rows of a multiset of row tuples (value first), best first, ties by columns.

    One pass over ``acc`` finds the ``n``-th best value (``_threshold``); only the rows at least
    as good are sorted (a window's rows over ``window=inherit`` are all kept, thousands of them,
    of which a handful make its result)."""
    if not acc:
        return []
    if n == 1:
        v = (max if desc else min)(acc, key=_VALUE)[0]
        top = [r for r in acc if r[0] == v]
    else:
        v = _threshold(acc, n, desc)
        top = [r for r in acc if (r[0] >= v if desc else r[0] <= v)]
    top.sort(key=lambda r: tuple(_key(x) for x in r[1:]))
    top.sort(key=_VALUE, reverse=desc)   # stable: ties stay ordered by their columns
    return [r for r in top for _ in range(acc[r])]   # duplicate rows kept


def prune(acc: Counter, n: int, desc: bool) -> Counter:
    """``acc`` without the rows that can no longer be in the result (no retractions coming)."""
    if sum(acc.values()) <= n:
        return acc
    keep = {r for r in ranked(acc, n, desc)}
    return Counter({r: c for r, c in acc.items() if r in keep})


def add(acc: Counter, rows: list[tuple], n: int, desc: bool, keep_all: bool) -> Counter:
    acc.update(rows)
    return acc if keep_all else prune(acc, n, desc)


def retract(acc: Counter, rows: list[tuple]) -> Counter:
    acc.subtract(rows)
    return +acc   # drop rows whose count reached 0


def merge(a: Counter, b: Counter, n: int, desc: bool, keep_all: bool) -> Counter:
    out = a + b
    return out if keep_all else prune(out, n, desc)


def output(acc: Counter, n: int, desc: bool, names: tuple[str, ...]) -> list[dict]:
    return [dict(zip(names, r)) for r in ranked(acc, n, desc)]


# ---- most_frequent(n, x): the values ranked by how many rows have them -----------------------

FREQUENT = "most_frequent"
#: The aggregates whose state per (key, window) is a Counter of Python values (their rows or values).
PYTHON_STATE = (*FUNCS, FREQUENT)


def frequent(acc: Counter, n: int) -> list[tuple]:
    """``most_frequent(n, x)``'s result over ``acc`` (value -> rows with it): ``(value, count)``
    of the values fewer than ``n`` values beat by count (SQL ``RANK() <= n`` over the counts, ties
    kept), most frequent first, equal counts by value. Over 4 a, 4 b, 2 c, 1 d: ``n=1`` gives a, b;
    ``n=2`` a, b (two values beat c); ``n=3`` a, b, c."""
    if not acc:
        return []
    counts = acc.values()
    least = max(counts) if n == 1 else heapq.nlargest(n, counts)[-1]
    top = [v for v, c in acc.items() if c >= least]
    top.sort(key=_key)
    top.sort(key=acc.__getitem__, reverse=True)   # stable: equal counts stay ordered by value
    return [(v, acc[v]) for v in top]


def frequent_output(acc: Counter, n: int, names: tuple[str, ...]) -> list[dict]:
    return [dict(zip(names, r)) for r in frequent(acc, n)]


def frequent_retract(acc: Counter, counts: dict) -> Counter:
    """``acc`` less the RETRACTION rows' values (``window=inherit``); values down to 0 dropped."""
    acc.subtract(counts)
    return +acc
