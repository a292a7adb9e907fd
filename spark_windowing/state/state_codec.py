"""The encoding of operator state that every snapshot shares (``state.snapshot`` for
TestStream and tests, ``store.StateStore`` for Spark): window rows as one Arrow table, the
operator's scalar state, the extras kept outside the window rows, and the spec fingerprint check.

Window rows: the key columns, then ``s:<name>`` per state column; Python-object cells (collect_list
values, custom accumulators, last fired values) pickled into binary cells, datetime64 as int64.
``column_kinds`` records how each state column was encoded, so a reader decodes exactly that.
"""

from __future__ import annotations

import io
import pickle
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from spark_windowing._old_paths import current_module
from spark_windowing.errors import SnapshotError

if TYPE_CHECKING:  # the operator is passed in, never imported: this module sits below it
    from spark_windowing.operator.windowed import WindowedOperator
    from spark_windowing.operator.spec import OperatorSpec

class _Unpickler(pickle.Unpickler):
    """Reads classes by their module path now when a snapshot names an earlier release's path
    (``_old_paths``: ``spark_windowing.process.PaneBuffer`` is
    ``spark_windowing.aggregates.process.PaneBuffer``)."""

    def find_class(self, module: str, name: str):
        return super().find_class(current_module(module), name)


def loads(data: bytes):
    """``pickle.loads`` for state: Python-object cells and operator extras of any release."""
    return _Unpickler(io.BytesIO(data)).load()


#: The operator's scalar state, stored by every snapshot next to the window rows.
SCALARS = ("wm", "proc", "seq", "next_rid")


def scalars(op: "WindowedOperator") -> dict[str, int]:
    """The watermark, processing time, batch sequence and next row id of ``op``."""
    return {name: int(getattr(op, name)) for name in SCALARS}


def restore_scalars(op: "WindowedOperator", doc: dict) -> None:
    for name in SCALARS:
        setattr(op, name, int(doc[name]))


def check_fingerprint(found: str, spec: "OperatorSpec", where: str) -> None:
    """Raise ``SnapshotError`` unless state written under fingerprint ``found`` belongs to ``spec``."""
    if found != spec.fingerprint():
        raise SnapshotError(
            f"{where}: snapshot was written by a different windowing spec (fingerprint "
            f"{found}, current {spec.fingerprint()}: {spec.describe()}); restoring it would "
            "produce wrong panes. Use a new stateLocation and checkpoint for the changed query.")


def rows_to_table(op: WindowedOperator, rows: np.ndarray | None = None, omit: frozenset[str] = frozenset()
                  ) -> pa.Table:
    """Windows of ``op`` (all, or those at ``rows``) as one Arrow table: the key columns, then
    ``s:<name>`` per state column but those in ``omit``; Python-object cells pickled, datetime64
    as int64."""
    assert op.table is not None
    keys = op.table.keys if rows is None else op.table.key_rows(rows)
    arrays, names = list(keys.columns), list(keys.column_names)
    for name, col in op.table.cols.items():
        if name in omit:
            continue
        col = col if rows is None else col[rows]
        if col.dtype == object:
            arrays.append(pa.array([pickle.dumps(v, protocol=5) for v in col.tolist()], pa.binary()))
        elif np.issubdtype(col.dtype, np.datetime64):
            arrays.append(pa.array(col.astype("int64"), pa.int64()))
        else:
            arrays.append(pa.array(col))
        names.append("s:" + name)
    return pa.Table.from_arrays(arrays, names=names)


def column_kinds(op: WindowedOperator) -> dict[str, str]:
    """How each state column of ``op`` is encoded: ``pickle``, ``dt:<numpy dtype>`` or ``np``."""
    return {name: ("pickle" if col.dtype == object else
                   f"dt:{col.dtype.str}" if np.issubdtype(col.dtype, np.datetime64) else "np")
            for name, col in op.table.cols.items()}


def constant_columns(op: WindowedOperator) -> frozenset[str]:
    """State columns whose every row holds the column's default (numeric and boolean columns with
    a default): a snapshot may leave them out, ``table_to_cols`` puts the default back. Fresh
    windows have most of their bookkeeping at its default (no pane yet, no hold, not closed)."""
    assert op.table is not None
    out = set()
    for name, (dtype, default) in op.table.layout.items():
        col = op.table.cols.get(name)
        if col is None or default is None or col.dtype.kind not in "iub":
            continue
        if not len(col) or bool((col == default).all()):
            out.add(name)
    return frozenset(out)


def table_to_cols(op: WindowedOperator, table: pa.Table, kinds: dict[str, str] | None = None
                  ) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """Inverse of ``rows_to_table`` for an operator bound to the same input schema; a state
    column missing from ``table`` (left out as constant) gets its default in every row."""
    kinds = kinds or column_kinds(op)
    keys = table.select(list(op.table.keys.column_names)).combine_chunks() if op.table is not None else None
    cols: dict[str, np.ndarray] = {}
    for name, kind in kinds.items():
        if "s:" + name not in table.column_names:
            dtype, default = op.table.layout[name]
            cols[name] = np.full(table.num_rows, default, dtype=dtype)
            continue
        col = table.column("s:" + name)
        if kind == "pickle":
            arr = np.empty(len(col), dtype=object)
            arr[:] = [loads(v) for v in col.to_pylist()]
        elif kind.startswith("dt:"):
            arr = col.to_numpy().astype(np.dtype(kind[3:]))
        else:
            arr = col.to_numpy().copy() if col.num_chunks == 1 else col.combine_chunks().to_numpy(zero_copy_only=False).copy()
        cols[name] = arr
    return keys, cols


def extra_state(op: WindowedOperator) -> dict:
    """Operator state kept outside the window rows (per-key element counts, element buffers)."""
    return {"key_counts": op.key_counts, "mixed": op.mixed.snapshot() if op.mixed is not None else None}


def restore_extra(op: WindowedOperator, extra: dict) -> None:
    """Inverse of ``extra_state``."""
    op.key_counts = extra["key_counts"]
    if op.mixed is not None:
        op.mixed.restore(extra["mixed"])
