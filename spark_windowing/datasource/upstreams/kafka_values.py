"""Kafka record values decoded into Arrow (``source=kafka``, ``valueFormat``): the row schema
(value fields, then the record's own columns as Spark's Kafka rows have them) and the decoders of
``json``, ``csv``, ``avro`` (Confluent header accepted) and ``raw``. A value that cannot be decoded
becomes a row whose value fields are all null and whose ``_corrupt_record`` holds the value's text,
so it reaches the late-data table as ``malformed`` (``upstreams.corrupt``)."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa

from spark_windowing.datasource.options.ddl import parse_ddl
from spark_windowing.datasource.upstreams.corrupt import parse_lines
from spark_windowing.errors import OptionError
from spark_windowing.panes import CORRUPT_RECORD

TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD_FIELDS = (
    pa.field("key", pa.binary()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()), pa.field("timestamp", TIMESTAMP), pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS), pa.field("value", pa.binary()), pa.field(CORRUPT_RECORD, pa.string()),
)


def value_schema(fmt: str, schema_text: str | None) -> pa.Schema:
    if fmt == "raw":
        return pa.schema([])
    if fmt == "avro":
        return avro_arrow_schema(schema_text or "")
    return parse_ddl(schema_text or "")


def row_schema(fmt: str, schema_text: str | None) -> pa.Schema:
    """The value's fields, then the record columns whose names the value does not use."""
    values = value_schema(fmt, schema_text)
    return pa.schema(list(values) + [f for f in RECORD_FIELDS if f.name not in values.names])


_AVRO_PRIMITIVES = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "double": pa.float64(),
                    "float": pa.float32(), "boolean": pa.bool_(), "bytes": pa.binary()}


def avro_arrow_schema(text: str) -> pa.Schema:
    """The Arrow schema of an Avro record schema (primitive fields, nullable unions,
    ``timestamp-millis``/``timestamp-micros``)."""
    forms = "an Avro record schema as JSON with primitive / [\"null\", T] / timestamp-millis|micros fields"
    try:
        import fastavro
        parsed = fastavro.parse_schema(json.loads(text))
    except Exception as e:  # json / fastavro SchemaParseException
        raise OptionError("schema", text, forms, why=str(e)) from None
    fields = []
    for f in parsed.get("fields", []):
        t = f["type"]
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            if len(rest) != 1:
                raise OptionError("schema", text, forms, why=f"field {f['name']}: only [\"null\", T] unions")
            t = rest[0]
        if isinstance(t, dict) and t.get("logicalType") in ("timestamp-millis", "timestamp-micros"):
            fields.append(pa.field(f["name"], TIMESTAMP))
        elif isinstance(t, str) and t in _AVRO_PRIMITIVES:
            fields.append(pa.field(f["name"], _AVRO_PRIMITIVES[t]))
        else:
            raise OptionError("schema", text, forms, why=f"field {f['name']}: type {t!r} not supported")
    return pa.schema(fields)


def records_table(messages: list, fmt: str, schema_text: str | None, schema: pa.Schema) -> pa.Table:
    """Arrow rows of Kafka messages: decoded value fields, then the record columns."""
    n = len(messages)
    values = [m.value() for m in messages]
    ts = [m.timestamp() for m in messages]
    cols: dict[str, pa.Array] = {
        "key": pa.array([m.key() for m in messages], pa.binary()),
        "topic": pa.array([m.topic() for m in messages], pa.string()),
        "partition": pa.array([m.partition() for m in messages], pa.int32()),
        "offset": pa.array([m.offset() for m in messages], pa.int64()),
        "timestamp": pa.array([x[1] * 1000 if x[0] else None for x in ts], pa.int64()).cast(TIMESTAMP),
        "timestampType": pa.array([x[0] for x in ts], pa.int32()),
        "headers": pa.array([[{"key": k, "value": v} for k, v in (m.headers() or [])] or None
                             for m in messages], HEADERS),
        "value": pa.array(values, pa.binary()),
    }
    decoded, bad = decode_values(values, fmt, schema_text)
    assert decoded.num_rows == n
    for name in decoded.column_names:
        cols[name] = decoded.column(name).combine_chunks()
    # a value that cannot be decoded: its raw text (its topic, partition and offset are columns)
    cols[CORRUPT_RECORD] = pa.array([values[i].decode("utf-8", errors="replace") if bad[i] else None
                                     for i in range(n)], pa.string())
    return pa.table([cols[f.name] for f in schema], schema=schema)


def decode_values(values: list[bytes | None], fmt: str, schema_text: str | None) -> tuple[pa.Table, np.ndarray]:
    """One row per value, and the mask of the values that cannot be decoded (their fields null)."""
    schema = value_schema(fmt, schema_text)
    if fmt == "raw":
        return pa.table({}), np.zeros(len(values), dtype=bool)  # no value fields: the raw ``value`` is the payload
    if fmt == "avro":
        return _decode_avro(values, schema_text or "", schema)
    return _decode_text(values, fmt, schema)


def _decode_text(values: list[bytes | None], fmt: str, schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    empty = b"{}" if fmt == "json" else b"," * (len(schema) - 1)
    lines = [empty if not v else v.replace(b"\n", b" ").replace(b"\r", b" ") for v in values]
    return parse_lines(lines, fmt, schema)


def _decode_avro(values: list[bytes | None], schema_text: str, schema: pa.Schema) -> tuple[pa.Table, np.ndarray]:
    """Avro binary values (schemaless), with or without the Confluent header (magic byte 0 and a
    4-byte schema id): a value starting with 0 that decodes exactly after 5 bytes is read so."""
    import fastavro
    parsed = fastavro.parse_schema(json.loads(schema_text))
    rows: list[dict | None] = []
    for v in values:
        rows.append(_avro_one(v, parsed, fastavro) if v else None)
    cols = {}
    for f in schema:
        data = [None if r is None else r.get(f.name) for r in rows]
        cols[f.name] = pa.array(data, f.type)  # timestamps: fastavro gives aware datetimes
    bad = np.array([r is None and bool(v) for r, v in zip(rows, values)], dtype=bool)
    return pa.table(cols, schema=schema), bad


def _avro_one(v: bytes, parsed, fastavro) -> dict | None:
    candidates = [5, 0] if len(v) > 5 and v[0] == 0 else [0]
    for skip in candidates:
        buf = io.BytesIO(v[skip:])
        try:
            rec = fastavro.schemaless_reader(buf, parsed)
        except Exception:  # any decoding error: try the other framing, else malformed
            continue
        if buf.tell() == len(v) - skip and isinstance(rec, dict):
            return rec
    return None
