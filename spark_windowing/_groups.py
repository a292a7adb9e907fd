"""Grouped reductions over integer group labels (``Groups``) or over ranges of elements
(``Ranges``), in NumPy.

The operator groups (element, window) pairs by their target window row many times per batch. Those
labels are row ids — dense, non-negative integers — so the groups need no hashing: ``bincount``
counts them and the ``ufunc.at`` kernels (``np.add.at``, ``np.minimum.at``, ...) reduce values into
them in one pass over the pairs, in the pairs' order. That is 5-10x faster than a hash group-by
on the same labels (``pyarrow``'s ``Table.group_by``) at a million pairs.

>>> import numpy as np
>>> grp = Groups(np.array([4, 1, 4, 4]))
>>> grp.rows.tolist(), grp.sizes.tolist()
([1, 4], [1, 3])
>>> grp.sum(np.array([1.0, 2.0, 3.0, 4.0])).tolist()
[2.0, 8.0]
>>> grp.min(np.array([5, 6, 7, 2]), fill=0).tolist()
[6, 2]
"""

from __future__ import annotations

import numpy as np


class Groups:
    """The groups of ``labels`` (non-negative integers): ``rows`` the distinct labels ascending,
    ``ids`` each element's group number (an index into ``rows``), ``sizes`` elements per group.
    Reductions take per-element ``values`` and an optional ``valid`` mask (elements left out,
    as nulls are); a group with no valid element gets ``fill``. ``Groups.known`` takes a grouping
    already found (its ``rows`` in any order)."""

    def __init__(self, labels: np.ndarray) -> None:
        labels = np.asarray(labels, dtype=np.int64)
        top = int(labels.max()) + 1 if len(labels) else 0
        if top <= 2 * len(labels) + 1024:  # dense enough: a counting pass, no sort
            counts = np.bincount(labels, minlength=top)
            self.rows = np.flatnonzero(counts)
            position = np.empty(top, dtype=np.int64)
            position[self.rows] = np.arange(len(self.rows), dtype=np.int64)
            self.ids = position[labels]
            self.sizes = counts[self.rows]
        else:
            self.rows, self.ids = np.unique(labels, return_inverse=True)
            self.sizes = np.bincount(self.ids, minlength=len(self.rows))

    @classmethod
    def known(cls, ids: np.ndarray, rows: np.ndarray, sizes: np.ndarray) -> "Groups":
        """The grouping where element ``i`` has label ``rows[ids[i]]`` — every group non-empty
        (``sizes > 0``), ``rows`` distinct, in any order — without counting the labels again."""
        grp = cls.__new__(cls)
        grp.ids, grp.rows, grp.sizes = ids, rows, sizes
        return grp

    def __len__(self) -> int:
        return len(self.rows)

    def count(self, valid: np.ndarray | None = None) -> np.ndarray:
        if valid is None:
            return self.sizes
        return np.bincount(self.ids[valid], minlength=len(self.rows))

    def sum(self, values: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
        """Per-group sum, accumulated in element order: int64 for integers, float64 otherwise."""
        dtype = np.int64 if values.dtype.kind in "iub" else np.float64
        out = np.zeros(len(self.rows), dtype=dtype)
        ids, vals = self._select(values, valid)
        np.add.at(out, ids, vals.astype(dtype, copy=False))
        return out

    def min(self, values: np.ndarray, valid: np.ndarray | None = None, *, fill) -> np.ndarray:
        return self._reduce(np.minimum, _top(values.dtype), values, valid, fill)

    def max(self, values: np.ndarray, valid: np.ndarray | None = None, *, fill) -> np.ndarray:
        return self._reduce(np.maximum, _bottom(values.dtype), values, valid, fill)

    def _reduce(self, ufunc, identity, values, valid, fill) -> np.ndarray:
        out = np.full(len(self.rows), identity, dtype=values.dtype)
        ids, vals = self._select(values, valid)
        ufunc.at(out, ids, vals)
        if valid is not None:
            out[self.count(valid) == 0] = fill
        return out

    def _select(self, values: np.ndarray, valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        return (self.ids, values) if valid is None else (self.ids[valid], values[valid])


class Ranges:
    """The groups ``[lo[w], hi[w])`` (``lo < hi``) of consecutive elements, one per range ``w``
    (``rows`` = ``0..m-1``), with ``Groups``' reductions: ``ufunc.reduceat`` over the ranges, without
    expanding them, so memory follows the ranges, not their total length (the buffered window kinds'
    windows overlap heavily). Floats' minimum and maximum skip NaN unless all are NaN
    (``np.fmin`` / ``np.fmax``, as Arrow's min / max do); a left-out (null) float counts as NaN.

    >>> r = Ranges(np.array([0, 1]), np.array([3, 4]))
    >>> r.sum(np.array([1, 2, 3, 4])).tolist(), r.max(np.array([1.0, np.nan, 3.0, 0.5]), fill=0).tolist()
    ([6, 9], [3.0, 3.0])
    """

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.idx = ranges(lo, hi)
        self.sizes = (hi - lo).astype(np.int64)
        self.rows = np.arange(len(lo), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.rows)

    def count(self, valid: np.ndarray | None = None) -> np.ndarray:
        if valid is None:
            return self.sizes
        return reduce_ranges(np.add, np.asarray(valid, dtype=np.int64), self.idx)

    def sum(self, values: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
        """Per-range sum: int64 for integers, float64 otherwise."""
        dtype = np.int64 if values.dtype.kind in "iub" else np.float64
        if valid is not None:
            values = np.where(valid, values, values.dtype.type(0))
        return reduce_ranges(np.add, values.astype(dtype), self.idx)

    def min(self, values: np.ndarray, valid: np.ndarray | None = None, *, fill) -> np.ndarray:
        return self._reduce(np.fmin if values.dtype.kind == "f" else np.minimum, _top(values.dtype), values, valid, fill)

    def max(self, values: np.ndarray, valid: np.ndarray | None = None, *, fill) -> np.ndarray:
        return self._reduce(np.fmax if values.dtype.kind == "f" else np.maximum, _bottom(values.dtype), values, valid, fill)

    def _reduce(self, ufunc, identity, values, valid, fill) -> np.ndarray:
        if valid is not None:
            left_out = np.nan if values.dtype.kind == "f" else identity
            values = np.where(valid, values, values.dtype.type(left_out))
        out = reduce_ranges(ufunc, values, self.idx)
        if valid is not None:
            out[self.count(valid) == 0] = fill
        return out


def ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``ufunc.reduceat`` indices for the ranges ``[lo[w], hi[w])`` (``lo < hi``), interleaved;
    see ``reduce_ranges``."""
    idx = np.empty(2 * len(lo), dtype=np.int64)
    idx[0::2], idx[1::2] = lo, hi
    return idx


def reduce_ranges(ufunc: np.ufunc, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``ufunc`` over each range of ``ranges``: reduceat of ``idx[2w] < idx[2w+1]`` reduces exactly
    ``x[lo:hi]`` (the odd results, from ``hi`` to the next ``lo``, are dropped); one sentinel element
    makes ``hi == len(x)`` a valid index."""
    if len(idx) == 0:
        return x[:0].copy()
    return ufunc.reduceat(np.append(x, x[-1:]), idx)[0::2]


def _top(dtype: np.dtype):
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _bottom(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
