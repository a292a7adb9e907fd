"""Operator snapshots: the whole operator state as bytes, restorable exactly.

Layout: ``MAGIC`` · 4-byte big-endian header length · header (JSON: format version, spec
fingerprint, SHA-256 and length of the body, scalar state) · body (Arrow IPC stream of the window
table: key columns, then every state column; Python-object columns — collect_list values, custom
accumulators, last fired values — are stored as pickled binary cells).

A snapshot restored under a different spec, of another format version, truncated or with a bad
checksum raises ``SnapshotError``: never a silent reset.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import struct

import numpy as np
import pyarrow as pa

from spark_windowing.errors import SnapshotError
from spark_windowing.operator import WindowedOperator
from spark_windowing.spec import OperatorSpec

MAGIC = b"SWSNAP\x00\x01"
FORMAT_VERSION = 2  # 2: row ids (``rid``, ``next_rid``)


def rows_to_table(op: WindowedOperator, rows: np.ndarray | None = None) -> pa.Table:
    """Windows of ``op`` (all, or those at ``rows``) as one Arrow table: the key columns, then
    ``s:<name>`` per state column; Python-object cells pickled, datetime64 as int64."""
    assert op.keys is not None
    keys = op.keys if rows is None else op.keys.take(pa.array(rows, pa.int64()))
    arrays, names = list(keys.columns), list(keys.column_names)
    for name, col in op.cols.items():
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
    return {name: ("pickle" if col.dtype == object else
                   f"dt:{col.dtype.str}" if np.issubdtype(col.dtype, np.datetime64) else "np")
            for name, col in op.cols.items()}


def table_to_cols(op: WindowedOperator, table: pa.Table, kinds: dict[str, str] | None = None
                  ) -> tuple[pa.Table, dict[str, np.ndarray]]:
    """Inverse of ``rows_to_table`` for an operator bound to the same input schema."""
    kinds = kinds or column_kinds(op)
    keys = table.select(list(op.keys.column_names)).combine_chunks() if op.keys is not None else None
    cols: dict[str, np.ndarray] = {}
    for name, kind in kinds.items():
        col = table.column("s:" + name)
        if kind == "pickle":
            arr = np.empty(len(col), dtype=object)
            arr[:] = [pickle.loads(v) for v in col.to_pylist()]
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
    op.key_counts = extra["key_counts"]
    if op.mixed is not None:
        op.mixed.restore(extra["mixed"])


def snapshot(op: WindowedOperator) -> bytes:
    """Serialize ``op`` (its spec is identified by fingerprint, not stored)."""
    header: dict[str, object] = {
        "version": FORMAT_VERSION, "fingerprint": op.spec.fingerprint(),
        "wm": op.wm, "proc": op.proc, "seq": op.seq, "bound": op.bound, "next_rid": op.next_rid,
    }
    body = b""
    if op.bound:
        assert op.keys is not None and op.input_schema is not None
        sink = io.BytesIO()
        schema_buf = op.input_schema.serialize().to_pybytes()
        table = rows_to_table(op)
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        extra = pickle.dumps(extra_state(op), protocol=5)
        ipc = sink.getvalue()
        body = schema_buf + ipc + extra
        header.update({"schema_len": len(schema_buf), "ipc_len": len(ipc), "keys": list(op.keys.column_names),
                       "kinds": column_kinds(op)})
    header["sha256"] = hashlib.sha256(body).hexdigest()
    header["body_len"] = len(body)
    h = json.dumps(header, sort_keys=True).encode()
    return MAGIC + struct.pack(">I", len(h)) + h + body


def restore(spec: OperatorSpec, blob: bytes, *, where: str = "snapshot") -> WindowedOperator:
    """Rebuild an operator from ``snapshot`` bytes; ``where`` names the source in errors."""
    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 4:
        raise SnapshotError(f"{where}: not a spark-windowing state snapshot (bad magic)")
    (hlen,) = struct.unpack(">I", blob[len(MAGIC):len(MAGIC) + 4])
    try:
        header = json.loads(blob[len(MAGIC) + 4:len(MAGIC) + 4 + hlen])
    except ValueError as e:
        raise SnapshotError(f"{where}: corrupt snapshot header ({e})") from None
    body = blob[len(MAGIC) + 4 + hlen:]
    if header.get("version") != FORMAT_VERSION:
        raise SnapshotError(f"{where}: snapshot format version {header.get('version')} is not supported "
                            f"(this build reads version {FORMAT_VERSION})")
    if len(body) != header.get("body_len") or hashlib.sha256(body).hexdigest() != header.get("sha256"):
        raise SnapshotError(f"{where}: corrupt snapshot (checksum mismatch or truncated)")
    if header["fingerprint"] != spec.fingerprint():
        raise SnapshotError(
            f"{where}: snapshot was written by a different windowing spec (fingerprint "
            f"{header['fingerprint']}, current {spec.fingerprint()}: {spec.describe()}); restoring it would "
            "produce wrong panes. Use a new stateLocation and checkpoint for the changed query.")
    op = WindowedOperator(spec)
    op.wm, op.proc, op.seq = int(header["wm"]), int(header["proc"]), int(header["seq"])
    if not header["bound"]:
        return op
    schema = pa.ipc.read_schema(pa.py_buffer(body[:header["schema_len"]]))
    op.bind(schema)
    ipc_end = header["schema_len"] + header["ipc_len"]
    table = pa.ipc.open_stream(body[header["schema_len"]:ipc_end]).read_all()
    restore_extra(op, pickle.loads(body[ipc_end:]))
    op.next_rid = int(header["next_rid"])
    op.keys, op.cols = table_to_cols(op, table, header["kinds"])
    return op
