"""Grouped reductions over integer group labels, in NumPy.

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


def _top(dtype: np.dtype):
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _bottom(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
