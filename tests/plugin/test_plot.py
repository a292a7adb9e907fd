"""The pane timeline (``spark_windowing.tools.plot``): load pane tables, draw them, count what was drawn.

No Spark: pane tables are written by hand with ``deltalake.write_deltalake``. The scenario
(event time in seconds after 2026-11-21T12:00:00Z; ``@wm`` is the watermark the pane fired at)::

    alice  tumbling 10 s, accumulating_and_retracting, early=AfterCount(2), late=AfterCount(1)
           [0,10)   E0@2  (R0 E1)@6  (R1 O2)@11  (R2 L3)@14  (R3 L4 final)@21
           [10,20)  E0@11 (R0 O1)@21  (R1 L2 final)@26
           [20,30)  O0 final@31
    bob    session(5 s): [3,8) and [12,17) merge into [3,17) (both retracted)
           [3,8)    E0@1   R0@9          -> withdrawn
           [12,17)  E0@6   R0@9          -> withdrawn
           [3,17)   E0@9   (R0 O1 final)@18
    carol  sliding(10 s, 5 s), discarding: four overlapping windows, one ON_TIME final pane each
           [-5,5) O0@6   [0,10) O0@11   [5,15) O0@16   [10,20) O0@21
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from spark_windowing.panes import pane_schema
from spark_windowing.tools.plot import INSTALL_HINT, load_panes, main, plot_panes

pytest.importorskip("matplotlib")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASE = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)
KEY = [pa.field("user_id", pa.string(), nullable=False)]
AGG = [pa.field("total", pa.int64())]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def t(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def pane(key, start, end, kind, timing, index, wm, seq, *, final=False, total=1) -> dict:
    row = {"window_start": t(start), "window_end": t(end), "total": total, "kind": kind,
           "pane_timing": timing, "pane_index": index, "is_final": final,
           "pane_timestamp": t(end) - timedelta(microseconds=1),
           "watermark": None if wm is None else t(wm), "batch_time": t(wm or 0) + timedelta(hours=1),
           "batch_seq": seq}
    if key is not None:
        row["user_id"] = key
    return row


def T(*a, **kw):  # noqa: N802 - reads like the scenario above
    return pane(*a[:3], "TRIGGER", *a[3:], **kw)


def R(*a, **kw):  # noqa: N802
    return pane(*a[:3], "RETRACTION", *a[3:], **kw)


TRIGGERS = [
    T("alice", 0, 10, "EARLY", 0, 2, 1), T("alice", 0, 10, "EARLY", 1, 6, 2),
    T("alice", 0, 10, "ON_TIME", 2, 11, 3), T("alice", 0, 10, "LATE", 3, 14, 4),
    T("alice", 0, 10, "LATE", 4, 21, 5, final=True),
    T("alice", 10, 20, "EARLY", 0, 11, 3), T("alice", 10, 20, "ON_TIME", 1, 21, 5),
    T("alice", 10, 20, "LATE", 2, 26, 6, final=True),
    T("alice", 20, 30, "ON_TIME", 0, 31, 7, final=True),
    T("bob", 3, 8, "EARLY", 0, 1, 1), T("bob", 12, 17, "EARLY", 0, 6, 2),
    T("bob", 3, 17, "EARLY", 0, 9, 3), T("bob", 3, 17, "ON_TIME", 1, 18, 5, final=True),
    T("carol", -5, 5, "ON_TIME", 0, 6, 2, final=True), T("carol", 0, 10, "ON_TIME", 0, 11, 3, final=True),
    T("carol", 5, 15, "ON_TIME", 0, 16, 4, final=True), T("carol", 10, 20, "ON_TIME", 0, 21, 5, final=True),
]
RETRACTIONS = [
    R("alice", 0, 10, "EARLY", 0, 6, 2), R("alice", 0, 10, "EARLY", 1, 11, 3),
    R("alice", 0, 10, "ON_TIME", 2, 14, 4), R("alice", 0, 10, "LATE", 3, 21, 5),
    R("alice", 10, 20, "EARLY", 0, 21, 5), R("alice", 10, 20, "ON_TIME", 1, 26, 6),
    R("bob", 3, 8, "EARLY", 0, 9, 3), R("bob", 12, 17, "EARLY", 0, 9, 3),
    R("bob", 3, 17, "EARLY", 0, 18, 5),
]


def table(rows: list[dict], key_fields=KEY) -> pa.Table:
    schema = pane_schema(key_fields, AGG)
    return pa.Table.from_pylist(rows, schema=schema)


def expected_markers(rows: list[dict]) -> Counter:
    return Counter("RETRACTION" if r["kind"] == "RETRACTION" else r["pane_timing"] for r in rows)


@pytest.fixture
def sink(tmp_path) -> str:
    """A pane sink directory P with Delta tables P/triggers and P/retractions."""
    path = str(tmp_path / "panes")
    write_deltalake(f"{path}/triggers", table(TRIGGERS[:9]))
    write_deltalake(f"{path}/triggers", table(TRIGGERS[9:]), mode="append")
    write_deltalake(f"{path}/retractions", table(RETRACTIONS))
    return path


def png_size(path: str) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG_MAGIC, "not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def assert_png(path: str) -> tuple[int, int]:
    assert os.path.getsize(path) > 20_000, "suspiciously small image"
    width, height = png_size(path)
    assert 1000 <= width <= 2000 and 300 <= height <= 3000, (width, height)
    return width, height


# ------------------------------------------------------------------------------- loading

def test_load_sink_directory_concatenates_triggers_and_retractions(sink):
    panes = load_panes(sink)
    assert panes.num_rows == len(TRIGGERS) + len(RETRACTIONS)
    assert Counter(panes.column("kind").to_pylist()) == {"TRIGGER": len(TRIGGERS),
                                                        "RETRACTION": len(RETRACTIONS)}
    assert panes.schema.names[0] == "user_id"


def test_load_single_delta_table(sink):
    assert load_panes(f"{sink}/retractions").num_rows == len(RETRACTIONS)


def test_load_parquet_file_and_directory(tmp_path):
    pq.write_table(table(TRIGGERS), tmp_path / "one.parquet")
    os.makedirs(tmp_path / "dir")
    pq.write_table(table(TRIGGERS[:5]), tmp_path / "dir" / "a.parquet")
    pq.write_table(table(TRIGGERS[5:]), tmp_path / "dir" / "b.parquet")
    assert load_panes(str(tmp_path / "one.parquet")).num_rows == len(TRIGGERS)
    assert load_panes(str(tmp_path / "dir")).num_rows == len(TRIGGERS)


def test_load_rejects_missing_path_and_non_pane_table(tmp_path):
    with pytest.raises(FileNotFoundError, match="no pane table"):
        load_panes(str(tmp_path / "nope"))
    write_deltalake(str(tmp_path / "events"), pa.table({"ts": [1, 2], "v": ["a", "b"]}))
    with pytest.raises(ValueError, match="not a pane schema"):
        load_panes(str(tmp_path / "events"))


# ------------------------------------------------------------------------------- drawing

def test_plot_draws_one_marker_per_pane_row(sink, tmp_path):
    out = str(tmp_path / "panes.png")
    result = plot_panes(load_panes(sink), out)
    assert result == out and os.path.exists(out)
    assert_png(out)
    s = result.summary
    assert dict(s.markers) == expected_markers(TRIGGERS + RETRACTIONS)
    assert s.final == sum(r["is_final"] for r in TRIGGERS)
    assert s.crossed_out == len(RETRACTIONS)          # every retraction found its pane
    assert s.windows == len({(r["user_id"], r["window_start"], r["window_end"]) for r in TRIGGERS})
    assert s.total_keys == 3
    # keys by number of pane rows, most first: alice 15, bob 7, carol 4
    assert s.keys == ("user_id=alice", "user_id=bob", "user_id=carol")


def test_retraction_without_its_pane_is_drawn_on_its_own(tmp_path):
    # only the retractions table: nothing to cross out, each x sits at its own watermark
    result = plot_panes(table(RETRACTIONS), str(tmp_path / "r.png"))
    assert result.summary.markers == {"EARLY": 0, "ON_TIME": 0, "LATE": 0,
                                      "RETRACTION": len(RETRACTIONS)}
    assert result.summary.crossed_out == 0


def test_rejects_unknown_pane_kind(tmp_path):
    with pytest.raises(ValueError, match="not a pane row: kind='UPDATE'"):
        plot_panes(table([pane("x", 0, 10, "UPDATE", "EARLY", 0, 1, 1)]), str(tmp_path / "u.png"))


def test_overlapping_windows_are_stacked_in_sub_lanes(sink, tmp_path):
    result = plot_panes(load_panes(sink), str(tmp_path / "carol.png"), keys=["carol"])
    # [-5,5) [0,10) [5,15) [10,20): each overlaps the next, so at least two sub-lanes
    assert result.summary.sub_lanes >= 2
    assert result.summary.markers["ON_TIME"] == 4


def test_main_writes_png_and_limits_keys(sink, tmp_path, capsys):
    out = str(tmp_path / "top2.png")
    assert main([sink, "-o", out, "--keys", "2"]) == 0
    assert_png(out)
    line = capsys.readouterr().out
    assert line.startswith(f"wrote {out}: 2 of 3 keys")
    bob_rows = [r for r in TRIGGERS + RETRACTIONS if r["user_id"] == "bob"]
    out_bob = str(tmp_path / "bob.png")
    assert main([sink, "-o", out_bob, "--key", "bob", "--title", "bob only"]) == 0
    assert_png(out_bob)
    text = capsys.readouterr().out
    expected = expected_markers(bob_rows)
    assert f"EARLY {expected['EARLY']}, ON_TIME {expected['ON_TIME']}, LATE 0" in text
    assert f"RETRACTION {expected['RETRACTION']}" in text


def test_main_reports_unknown_key_and_missing_table(sink, tmp_path, capsys):
    assert main([sink, "-o", str(tmp_path / "x.png"), "--key", "mallory"]) == 2
    err = capsys.readouterr().err
    assert "key 'mallory' is not in the pane table" in err and "'alice'" in err
    assert main([str(tmp_path / "nope"), "-o", str(tmp_path / "y.png")]) == 2
    assert not os.path.exists(tmp_path / "x.png")


def test_non_keyed_and_global_windows(tmp_path):
    glob_start = datetime(1, 1, 1, tzinfo=timezone.utc)
    glob_end = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)
    rows = [pane(None, 0, 10, "TRIGGER", "ON_TIME", 0, 11, 1, final=True)]
    for i, wm in enumerate([None, 5, 12]):
        r = pane(None, 0, 1, "TRIGGER", "EARLY", i, wm, i + 1)
        r.update(window_start=glob_start, window_end=glob_end, pane_timestamp=glob_end)
        rows.append(r)
    result = plot_panes(table(rows, key_fields=[]), str(tmp_path / "global.png"))
    assert result.summary.keys == ("(no key)",)
    assert result.summary.markers == {"EARLY": 3, "ON_TIME": 1, "LATE": 0, "RETRACTION": 0}
    assert_png(result)


def test_empty_table_still_writes_an_image(tmp_path):
    result = plot_panes(table([]), str(tmp_path / "empty.png"))
    assert result.summary.windows == 0 and result.summary.keys == ()
    assert png_size(result)[0] > 0


def test_module_cli_in_subprocess_without_pyspark(sink, tmp_path):
    out = str(tmp_path / "cli.png")
    code = ("import runpy, sys; sys.argv = ['plot', %r, '-o', %r]\n"
            "try:\n    runpy.run_module('spark_windowing.tools.plot', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "assert 'pyspark' not in sys.modules, 'spark_windowing imported pyspark'\n") % (sink, out)
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "spark_windowing.tools.plot", sink, "-o", out,
                           "--keys", "1"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: 1 of 3 keys")
    assert_png(out)


def test_missing_matplotlib_names_the_extra(sink, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from spark_windowing.tools.plot import main\n"
            "sys.exit(main([%r, '-o', %r]))\n") % (sink, str(tmp_path / "m.png"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert INSTALL_HINT in proc.stderr
    assert not os.path.exists(tmp_path / "m.png")
