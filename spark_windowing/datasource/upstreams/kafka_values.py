"""Kafka record values decoded into Arrow (``source=kafka``, ``valueFormat``): the row schema
(value fields, then the record's own columns as Spark's Kafka rows have them) and the decoders of
``json``, ``csv``, ``avro`` (Confluent header accepted) and ``raw``. A value that cannot be decoded
becomes a row whose value fields are all null, so it reaches the late-data table as ``malformed``."""

from __future__ import annotations

import io
import json

import pyarrow as pa

from spark_windowing.datasource.options.ddl import parse_ddl
from spark_windowing.errors import OptionError


TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
RECORD_FIELDS = (
    pa.field("key", pa.binary()), pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()), pa.field("timestamp", TIMESTAMP), pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS), pa.field("value", pa.binary()),
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
    decoded = decode_values(values, fmt, schema_text)
    assert decoded.num_rows == n
    for name in decoded.column_names:
        cols[name] = decoded.column(name).combine_chunks()
    return pa.table([cols[f.name] for f in schema], schema=schema)


def decode_values(values: list[bytes | None], fmt: str, schema_text: str | None) -> pa.Table:
    """One row per value (all-null fields where a value cannot be decoded)."""
    schema = value_schema(fmt, schema_text)
    if fmt == "raw":
        return pa.table({})  # no value fields: the raw ``value`` column is the payload
    if fmt == "avro":
        return _decode_avro(values, schema_text or "", schema)
    return _decode_text(values, fmt, schema)


def _parse_block(lines: list[bytes], fmt: str, schema: pa.Schema) -> pa.Table | None:
    """Parse newline-joined values in one vectorized call; None if it fails or the row count differs."""
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    buf = b"\n".join(lines) + b"\n"
    try:
        if fmt == "json":
            t = pajson.read_json(io.BytesIO(buf), parse_options=pajson.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"))
        else:
            t = pacsv.read_csv(io.BytesIO(buf), read_options=pacsv.ReadOptions(column_names=schema.names),
                               convert_options=pacsv.ConvertOptions(column_types=schema, strings_can_be_null=True),
                               parse_options=pacsv.ParseOptions(ignore_empty_lines=False))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if t.num_rows != len(lines):
        return None
    return t.select(schema.names).cast(schema)


def _decode_text(values: list[bytes | None], fmt: str, schema: pa.Schema) -> pa.Table:
    empty = b"{}" if fmt == "json" else b"," * (len(schema) - 1)
    lines = [empty if not v else v.replace(b"\n", b" ").replace(b"\r", b" ") for v in values]
    return pa.concat_tables(_parse_or_split(lines, fmt, schema)) if lines else schema.empty_table()


def _parse_or_split(lines: list[bytes], fmt: str, schema: pa.Schema) -> list[pa.Table]:
    """Parse a block; when it fails, bisect: only a single undecodable value becomes a null row."""
    t = _parse_block(lines, fmt, schema)
    if t is not None:
        return [t]
    if len(lines) == 1:
        return [pa.table({f.name: pa.nulls(1, f.type) for f in schema}, schema=schema)]
    mid = len(lines) // 2
    return _parse_or_split(lines[:mid], fmt, schema) + _parse_or_split(lines[mid:], fmt, schema)


def _decode_avro(values: list[bytes | None], schema_text: str, schema: pa.Schema) -> pa.Table:
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
    return pa.table(cols, schema=schema)


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
