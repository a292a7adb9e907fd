"""Rows an upstream cannot read (``upstreams.corrupt``), without Spark: JSON-lines, CSV and Parquet
files read permissively, block by block, bisected only where a line fails; the operator sends a
row whose ``_corrupt_record`` is set to the late output as ``malformed``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing import OperatorSpec, WindowedOperator
from spark_windowing.datasource.options.ddl import parse_ddl
from spark_windowing.datasource.upstreams.corrupt import cast_rows, parse_lines
from spark_windowing.datasource.upstreams.files import read_permissive, row_count

SCHEMA = parse_ddl("k string, ts timestamp, v double")
GOOD = b'{"k": "a", "ts": "2026-03-02T12:01:00Z", "v": 1.5}'


def test_a_clean_file_has_no_corrupt_rows(tmp_path):
    (tmp_path / "a.json").write_bytes(GOOD + b"\n\n" + GOOD.replace(b'"a"', b'"b"') + b"\n")
    t = read_permissive("json", str(tmp_path / "a.json"), SCHEMA)
    assert t.column("k").to_pylist() == ["a", "b"] and t.column("_corrupt_record").null_count == 2
    assert row_count(str(tmp_path / "a.json"), "json") == 2


@pytest.mark.parametrize("fmt, content, rows", [
    ("json", b"", 0), ("csv", b"", 0), ("csv", b"k,ts,v\n", 0), ("json", b"\n\n", 0)])
def test_an_empty_file_is_no_error(tmp_path, fmt, content, rows):
    path = tmp_path / f"e.{fmt}"
    path.write_bytes(content)
    assert read_permissive(fmt, str(path), SCHEMA).num_rows == rows == row_count(str(path), fmt)


def test_csv_header_rules(tmp_path):
    """A header column the schema lacks is ignored; a schema column the header lacks is null; a
    line with more or fewer fields than the header is malformed."""
    path = tmp_path / "h.csv"
    path.write_bytes(b"ts,k,other\n2026-03-02T12:01:00Z,a,x\n2026-03-02T12:01:00Z,b\n")
    t = read_permissive("csv", str(path), SCHEMA).to_pylist()
    assert [(r["k"], r["v"], r["_corrupt_record"], r["_origin"]) for r in t] == \
        [("a", None, None, None), (None, None, "2026-03-02T12:01:00Z,b", f"{path}:3")]


def test_a_parquet_value_that_does_not_cast_is_one_malformed_row(tmp_path):
    pq.write_table(pa.table({"k": ["a", "b"], "ts": ["2026-03-02T12:01:00Z", "2026-03-02T12:02:00Z"],
                             "v": ["1.5", "abc"]}), tmp_path / "p.parquet")
    t = read_permissive("parquet", str(tmp_path / "p.parquet"), SCHEMA).to_pylist()
    assert t[0]["v"] == 1.5 and t[0]["_corrupt_record"] is None
    assert t[1]["k"] is None and '"abc"' in t[1]["_corrupt_record"] and t[1]["_origin"].endswith("p.parquet:row 1")


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.lists(st.booleans(), max_size=40))
def test_bisection_finds_exactly_the_bad_lines(good):
    """Whatever the mix, the bad lines are found exactly and the good ones keep their values, in order."""
    lines = [GOOD.replace(b'"a"', f'"{i}"'.encode()) if ok else b'{"k": "%d", "ts": "x"}' % i
             for i, ok in enumerate(good)]
    table, bad = parse_lines(lines, "json", SCHEMA)
    assert bad.tolist() == [not ok for ok in good]
    assert table.column("k").to_pylist() == [str(i) if ok else None for i, ok in enumerate(good)]


def test_cast_rows_nulls_only_the_rows_that_do_not_cast():
    table, bad = cast_rows(pa.table({"k": ["a", "b", "c"], "v": ["1", "x", "3"]}), SCHEMA)
    assert bad.tolist() == [False, True, False]
    assert table.to_pylist() == [{"k": "a", "ts": None, "v": 1.0}, {"k": None, "ts": None, "v": None},
                                 {"k": "c", "ts": None, "v": 3.0}]


def test_the_operator_sends_a_corrupt_row_to_the_late_output_as_malformed():
    """Even under processing-time windows with no key, where nothing else would mark it."""
    spec = OperatorSpec.from_options(window="tumbling(1 minute)", aggregate="count(*) AS n", timestamp_column="ts")
    op = WindowedOperator(spec)
    events = pa.table({"ts": pa.array([1, 2], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                       "_corrupt_record": [None, "{oops"]})
    r = op.step(events, watermark=0, processing_time=0)
    assert r.late.column("reason").to_pylist() == ["malformed"]
    assert r.late.column("_corrupt_record").to_pylist() == ["{oops"] and op.num_windows == 1
