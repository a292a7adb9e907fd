"""Kafka value decoding (no broker, no Spark): one row per record, all-null fields for a value
that cannot be decoded (so it reaches the late table as malformed), the Confluent wire header."""

from __future__ import annotations

import io
import json
import struct
from datetime import datetime, timezone

import fastavro

from spark_windowing.datasource.upstreams.kafka_values import decode_values

AVRO = json.dumps({"type": "record", "name": "click", "fields": [
    {"name": "k", "type": "string"}, {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "v", "type": ["null", "long"]}]})
NULLS = {"k": None, "ts": None, "v": None}


def _avro(record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(AVRO)), record)
    return buf.getvalue()


def test_avro_with_and_without_the_confluent_header():
    rec = {"k": "a", "ts": datetime(2026, 1, 1, tzinfo=timezone.utc), "v": 3}
    confluent = b"\x00" + struct.pack(">I", 7) + _avro(rec)
    table, bad = decode_values([_avro(rec), confluent, b"\x07garbage", None], "avro", AVRO)
    got = table.to_pylist()
    assert got[:2] == [rec, rec] and got[2:] == [NULLS, NULLS]
    assert bad.tolist() == [False, False, True, False]   # a missing value is no corrupt record


def test_json_bad_values_are_isolated_and_nulled():
    vals = [b'{"k": "a", "ts": 1, "v": 2}', b"{oops", b'{"k": "b", "ts": "x", "v": 1}', b"", None,
            b'{"k": "c",\n "ts": 5, "v": 6}', b"[1]", b'{"k": "d", "ts": 7} {"k": "e", "ts": 8}']
    table, bad = decode_values(vals, "json", "k string, ts long, v long")
    got = table.to_pylist()
    assert got == [{"k": "a", "ts": 1, "v": 2}, NULLS, NULLS, NULLS, NULLS, {"k": "c", "ts": 5, "v": 6}, NULLS, NULLS]
    assert bad.tolist() == [False, True, True, False, False, False, True, True]


def test_csv_values():
    table, bad = decode_values([b"a,5,1.5", b"b,x,2", b"", b"c,7,3"], "csv", "k string, n long, f double")
    nulls = {"k": None, "n": None, "f": None}
    assert table.to_pylist() == [{"k": "a", "n": 5, "f": 1.5}, nulls, nulls, {"k": "c", "n": 7, "f": 3.0}]
    assert bad.tolist() == [False, True, False, False]
