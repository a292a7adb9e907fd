"""Operator snapshots: the whole operator state as bytes, restorable exactly.

One blob per snapshot; the window rows, scalar state, extras and fingerprint check are encoded as
``state_codec`` encodes them for the Spark state store, which splits the same rows into key buckets.

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

import pyarrow as pa

from spark_windowing.errors import SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.windowed import WindowedOperator
from spark_windowing.state.state_codec import (check_fingerprint, column_kinds, extra_state, loads, restore_extra,
                                         restore_scalars, rows_to_table, scalars, table_to_cols)

MAGIC = b"SWSNAP\x00\x01"
FORMAT_VERSION = 2  # 2: row ids (``rid``, ``next_rid``)


def snapshot(op: WindowedOperator) -> bytes:
    """Serialize ``op`` (its spec is identified by fingerprint, not stored)."""
    header: dict[str, object] = {
        "version": FORMAT_VERSION, "fingerprint": op.spec.fingerprint(), "bound": op.bound, **scalars(op),
    }
    body = b""
    if op.bound:
        assert op.table is not None and op.input_schema is not None
        sink = io.BytesIO()
        schema_buf = op.input_schema.serialize().to_pybytes()
        table = rows_to_table(op)
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        extra = pickle.dumps(extra_state(op), protocol=5)
        ipc = sink.getvalue()
        body = schema_buf + ipc + extra
        header.update({"schema_len": len(schema_buf), "ipc_len": len(ipc), "keys": list(op.table.keys.column_names),
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
    check_fingerprint(header["fingerprint"], spec, where)
    op = WindowedOperator(spec)
    restore_scalars(op, header)
    if not header["bound"]:
        return op
    schema = pa.ipc.read_schema(pa.py_buffer(body[:header["schema_len"]]))
    op.bind(schema)
    ipc_end = header["schema_len"] + header["ipc_len"]
    table = pa.ipc.open_stream(body[header["schema_len"]:ipc_end]).read_all()
    restore_extra(op, loads(body[ipc_end:]))
    op.table.replace(*table_to_cols(op, table, header["kinds"]))
    return op
