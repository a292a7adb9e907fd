"""Hostile input, nothing lost: every input row ends up in exactly one place — a pane, or the
late-data table with its reason — and no bad row stops the stream or spoils the good rows.

Through real Spark, files on disk, the late table on Delta:

* every kind of bad JSON and CSV row a producer can write (one file each, next to good rows):
  the query goes on, the row is in the late table as ``malformed`` with its raw text and
  ``file:line``, and the file's good rows are windowed;
* a Parquet file cut in half is one malformed row naming the file;
* one event dated 2099 closes nothing (``maxEventTimeAhead``);
* the conservation law, as a property (hypothesis, bounded examples, no example database):
  ``sum(n over every pane) + rows in the late table == rows the upstream handed over``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.spark._helpers import offsets, run_panes

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 2, 0, 18, tzinfo=timezone.utc)
SCHEMA = "k string, ts timestamp, v double"
GOOD = {"json": '{{"k": "{k}", "ts": "{ts}", "v": 1.0}}', "csv": "{k},{ts},1.0"}

#: (kind, format, the bad line) — the kinds that stopped the stream before (issue #43)
BAD_ROWS = [
    ("nan_string_in_double", "json", '{"k": "a", "ts": "2026-03-02T00:18:05Z", "v": "NaN"}'),
    ("number_as_key", "json", '{"k": 5, "ts": "2026-03-02T00:18:05Z", "v": 1.0}'),
    ("unparsable_time", "json", '{"k": "a", "ts": "not a time", "v": 1.0}'),
    ("truncated_line", "json", '{"k": "a", "ts": "2026-03-02T00:1'),
    ("text_in_double", "json", '{"k": "a", "ts": "2026-03-02T00:18:05Z", "v": "abc"}'),
    ("epoch_number_time", "json", '{"k": "a", "ts": 1772410685000, "v": 1.0}'),
    ("unparsable_time", "csv", "a,not a time,1.0"),
    ("truncated_line", "csv", "a,2026-03-02T00:18:05Z"),
    ("text_in_double", "csv", "a,2026-03-02T00:18:05Z,abc"),
    ("epoch_number_time", "csv", "a,1772410685000,1.0"),
    ("extra_field", "csv", "a,2026-03-02T00:18:05Z,1.0,9"),
]


def _ts(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write_text(path: Path, fmt: str, lines: list[str]) -> None:
    header = "k,ts,v\n" if fmt == "csv" and lines else ""   # an empty file is empty
    path.write_text(header + "".join(line + "\n" for line in lines))


def _options(fmt: str, root: Path, **extra) -> dict[str, str]:
    return {"source": fmt, "path": str(root / "in"), "schema": SCHEMA, "timestampColumn": "ts", "keyColumns": "k",
            "window": "tumbling(1 minute)", "aggregate": "count(*) AS n", "allowedLateness": "30 seconds",
            "trigger": "AfterWatermark(early=AfterCount(1), late=AfterCount(1))", "maxFilesPerTrigger": "1",
            "stateLocation": str(root / "state"), "lateDataPath": str(root / "late"), **extra}


def _late(root: Path) -> list[dict]:
    return DeltaTable(str(root / "late")).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def hostile_runs(spark, tmp_path_factory):
    """One query per format (run on first use) over files that each hold good rows around one bad
    row of a kind, plus an empty file (and, in JSON, a line with a field the schema lacks), with
    the default malformedEvents."""
    runs: dict[str, dict] = {}

    def run(fmt: str) -> dict:
        if fmt not in runs:
            root = tmp_path_factory.mktemp(f"hostile_{fmt}")
            (root / "in").mkdir()
            kinds = [(kind, line) for kind, f, line in BAD_ROWS if f == fmt]
            for i, (kind, line) in enumerate(kinds):
                good = [GOOD[fmt].format(k=f"good{i}", ts=_ts(i + j)) for j in range(2)]
                _write_text(root / "in" / f"{i:02d}_{kind}.{fmt}", fmt, [good[0], line, good[1]])
            _write_text(root / "in" / f"{len(kinds):02d}_empty.{fmt}", fmt, [])
            if fmt == "json":   # a field the schema does not have: ignored, the row is good (Spark's rule)
                _write_text(root / "in" / f"{len(kinds) + 1:02d}_extra.json", fmt,
                            ['{"k": "extra", "ts": "%s", "v": 2.0, "extra": 1}' % _ts(1)])
            panes = run_panes(spark, _options(fmt, root), str(root / "chk"))
            runs[fmt] = {"fmt": fmt, "root": root, "kinds": kinds, "panes": panes.to_pylist(), "late": _late(root)}
        return runs[fmt]
    return run


@pytest.mark.parametrize("kind, fmt, line", BAD_ROWS, ids=[f"{f}-{k}" for k, f, _ in BAD_ROWS])
def test_each_bad_row_goes_to_the_late_table_with_its_text_and_origin(hostile_runs, kind, fmt, line):
    run = hostile_runs(fmt)
    i = [k for k, _ in run["kinds"]].index(kind)
    mine = [r for r in run["late"] if r["_corrupt_record"] == line]
    assert len(mine) == 1, run["late"]
    line_no = 3 if fmt == "csv" else 2   # after the CSV header and the good row before it
    assert mine[0]["reason"] == "malformed"
    assert mine[0]["_origin"] == f"{run['root'] / 'in'}/{i:02d}_{kind}.{fmt}:{line_no}"
    # the good rows around it were windowed
    assert sum(r["n"] for r in run["panes"] if r["k"] == f"good{i}") == 2


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_nothing_else_is_late_and_the_good_rows_all_count(hostile_runs, fmt):
    run = hostile_runs(fmt)
    assert sorted(r["_corrupt_record"] for r in run["late"]) == sorted(line for _, line in run["kinds"])
    extra = 1 if fmt == "json" else 0
    assert sum(r["n"] for r in run["panes"]) == 2 * len(run["kinds"]) + extra


def test_a_parquet_file_cut_in_half_is_one_malformed_row(spark, tmp_path):
    (tmp_path / "in").mkdir()
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.float64())])
    table = pa.table({"k": ["a", "b"], "ts": [T0, T0 + timedelta(seconds=1)], "v": [1.0, 2.0]}, schema=schema)
    pq.write_table(table, tmp_path / "in" / "0_good.parquet")
    pq.write_table(table, tmp_path / "in" / "1_cut.parquet")
    data = (tmp_path / "in" / "1_cut.parquet").read_bytes()
    (tmp_path / "in" / "1_cut.parquet").write_bytes(data[:len(data) // 2])
    panes = run_panes(spark, _options("parquet", tmp_path), str(tmp_path / "chk"))
    late = _late(tmp_path)
    assert [(r["reason"], r["_origin"]) for r in late] == [("malformed", str(tmp_path / "in" / "1_cut.parquet"))]
    assert late[0]["_corrupt_record"].startswith("unreadable Parquet file")
    assert sum(r["n"] for r in panes.to_pylist()) == 2


def test_malformed_events_fail_stops_at_a_row_that_cannot_be_read(spark, tmp_path):
    (tmp_path / "in").mkdir()
    _write_text(tmp_path / "in" / "0.json", "json", ['{"k": "a", "ts": "%s", "v": 1.0}' % _ts(0), "{oops"])
    with pytest.raises(Exception, match="malformedEvents.*could not be read"):
        run_panes(spark, _options("json", tmp_path, malformedEvents="fail"), str(tmp_path / "chk"))


def test_one_event_from_2099_closes_nothing(spark, tmp_path):
    """The example of docs/semantics.md: file 5 of 10 holds one row dated 2099. With the default
    ``maxEventTimeAhead`` it is the late table's one ``future`` row; the watermark never leaves
    March 2026, so no later row — all within allowedLateness of their windows — is too late."""
    (tmp_path / "in").mkdir()
    for f in range(10):
        lines = [GOOD["json"].format(k=f"k{j % 3}", ts=_ts(6 * f + j)) for j in range(5)]
        if f == 4:
            lines.append('{"k": "phone", "ts": "2099-06-01T11:59:00Z", "v": 1.0}')
        _write_text(tmp_path / "in" / f"{f:02d}.json", "json", lines)
    panes = run_panes(spark, _options("json", tmp_path), str(tmp_path / "chk"))
    late = _late(tmp_path)
    assert [(r["k"], r["reason"]) for r in late] == [("phone", "future")]
    assert sum(r["n"] for r in panes.to_pylist()) == 50
    year_2100 = int(datetime(2100, 1, 1, tzinfo=timezone.utc).timestamp() * 1_000_000)
    assert all(end["wm"] < year_2100 for _, end in offsets(str(tmp_path / "chk")))


# ---------------------------------------------------------------------- conservation (property)
_ROW = st.one_of(
    st.tuples(st.sampled_from("abc"), st.integers(-90, 120)).map(lambda t: ("good", t)),   # ±late/too late
    st.sampled_from(["{oops", '{"k": "a", "ts": "never", "v": 1}', '{"k": null, "ts": "%s", "v": 1}' % _ts(0),
                     '{"k": "a", "ts": null, "v": 1}', '{"k": "a", "ts": "2099-01-01T00:00:00Z", "v": 1}',
                     '{"k": "a", "ts": "%s", "v": "x"}' % _ts(0)]).map(lambda s: ("raw", s)),
)


def _line(row) -> str:
    what, value = row
    if what == "raw":
        return value
    k, seconds = value
    return json.dumps({"k": k, "ts": _ts(seconds), "v": 1.0})


@settings(max_examples=4, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(files=st.lists(st.lists(_ROW, max_size=6), min_size=1, max_size=4))
def test_every_row_is_in_a_pane_or_the_late_table(spark, tmp_path_factory, files):
    root = tmp_path_factory.mktemp("conserve")
    (root / "in").mkdir()
    for f, rows_ in enumerate(files):
        _write_text(root / "in" / f"{f:02d}.json", "json", [_line(r) for r in rows_])
    handed_over = sum(len(r) for r in files)
    panes = run_panes(spark, _options("json", root, malformedEvents="late"), str(root / "chk"))
    windowed = sum(r["n"] for r in panes.to_pylist())   # discarding: each pane counts its new elements
    late = _late(root)
    assert windowed + len(late) == handed_over, (windowed, [r["reason"] for r in late], files)
