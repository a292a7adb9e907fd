"""The examples run to completion and their outputs hold what they promise.

Each example runs in-process on the test session (``main(argv, spark=spark)``) with a small
``--conf spark.windowed.*`` override; the demo runs once more through ``spark-submit
--properties-file`` to prove that ``spark.windowed.*`` properties reach ``format("windowed")``.
The tables are checked with ``deltalake`` directly, independently of the Spark table reader.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from spark_windowing.datasource.progress import read_batch_report
from sink_helpers import pane_table

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KEY_WINDOW = ("window_start", "window_end")


@pytest.fixture
def example(monkeypatch):
    """Import an example module by name (examples/ is a directory of scripts, not a package)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module


def _table(path: Path) -> pa.Table:
    return pane_table(path)


def _pane_tables(out) -> dict[str, pa.Table]:
    return {name: _table(Path(out.table(name))) for name in ("triggers", "retractions", "current")}


def _sorted_rows(table: pa.Table, keys: list[str]) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(r[k]) for k in keys))


def _expected_current(triggers: pa.Table, retractions: pa.Table, keys: list[str]) -> list[dict]:
    """The sink's contract: per key and window the last TRIGGER (by batch, then pane index),
    unless a later micro-batch only retracted it (a session merged away)."""
    last: dict[tuple, dict] = {}
    for row in triggers.to_pylist():
        kw = tuple(row[k] for k in keys)
        order = (row["batch_seq"], row["pane_index"])
        if kw not in last or order > (last[kw]["batch_seq"], last[kw]["pane_index"]):
            last[kw] = row
    retracted_in: dict[tuple, int] = {}
    for row in retractions.to_pylist():
        kw = tuple(row[k] for k in keys)
        retracted_in[kw] = max(retracted_in.get(kw, -1), row["batch_seq"])
    live = [row for kw, row in last.items() if retracted_in.get(kw, -1) <= row["batch_seq"]]
    return sorted(live, key=lambda r: tuple(str(r[k]) for k in keys))


def _assert_current_is_latest_trigger(tables: dict[str, pa.Table], key: str) -> int:
    """``current`` == the latest TRIGGER per key and window, except ``is_final``, which ``current``
    also sets for a window the watermark closed (end + allowedLateness at or before the latest
    watermark of the panes; no pane fires for that); returns how many windows were withdrawn
    (triggered, then only retracted)."""
    keys = [key, *KEY_WINDOW]
    current = tables["current"].select(tables["triggers"].column_names)
    expected = _expected_current(tables["triggers"], tables["retractions"], keys)
    assert current.num_rows == len(expected)
    got = _sorted_rows(current, keys)
    assert [{**r, "is_final": None} for r in got] == [{**r, "is_final": None} for r in expected]
    assert all(g["is_final"] or not e["is_final"] for g, e in zip(got, expected))   # final stays final
    fired = {tuple(r[k] for k in keys) for r in tables["triggers"].select(keys).to_pylist()}
    return len(fired) - len(expected)


def _timings(table: pa.Table) -> Counter:
    return Counter(table.column("pane_timing").to_pylist())


def test_demo_clickstream_sessions(spark, example, tmp_path, capsys):
    demo = example("clickstream_sessions")
    out = demo.main(["--output", str(tmp_path / "demo"),
                     "--conf", "spark.windowed.totalEvents=600"], spark=spark)
    printed = capsys.readouterr().out

    tables = _pane_tables(out)
    triggers, retractions = tables["triggers"], tables["retractions"]
    assert {"EARLY", "ON_TIME"} <= set(_timings(triggers))
    assert retractions.num_rows > 0
    assert set(retractions.column("kind").to_pylist()) == {"RETRACTION"}
    assert set(triggers.column("kind").to_pylist()) == {"TRIGGER"}
    merged_away = _assert_current_is_latest_trigger(tables, "user_id")
    assert merged_away > 0, "no session merged into another one"
    late = _table(Path(out.late))
    assert late.num_rows > 0 and late.column("reason").null_count == 0
    assert os.path.getsize(out.timeline) > 10_000
    assert "[clicks] batch 0 | events 200 |" in printed            # the progress listener's lines
    assert "Sessions merged into a later, larger one" in printed and out.timeline in printed
    assert not [k for k in spark.conf.getAll if k.startswith("spark.windowed.")], \
        "the example left spark.windowed.* properties in the session"


def test_iot_sensors_sliding_windows_and_late_table(spark, example, tmp_path, capsys):
    iot = example("iot_sensors")
    out = iot.main(["--output", str(tmp_path / "iot"),
                    "--conf", "spark.windowed.totalEvents=600"], spark=spark)
    printed = capsys.readouterr().out

    tables = _pane_tables(out)
    triggers = tables["triggers"]
    assert triggers.num_rows > 0 and tables["retractions"].num_rows == 0   # accumulating
    starts = pc.cast(triggers.column("window_start"), pa.int64()).to_numpy()
    ends = pc.cast(triggers.column("window_end"), pa.int64()).to_numpy()
    assert set(ends - starts) == {60_000_000} and set(starts % 20_000_000) == {0}
    assert {"avg_temperature", "max_temperature", "min_temperature", "readings"} <= set(triggers.column_names)
    _assert_current_is_latest_trigger(tables, "user_id")
    late = _table(Path(out.late))
    reasons = Counter(late.column("reason").to_pylist())
    assert reasons["too_late"] > 0 and set(reasons) <= {"too_late", "closed", "malformed"}
    assert "Dropped late and malformed events by reason" in printed and "too_late" in printed
    assert os.path.exists(out.timeline)


def test_orders_from_json_files_match_a_batch_aggregation(spark, example, tmp_path):
    orders = example("orders_tumbling")
    out = orders.main(["--output", str(tmp_path / "orders"),
                       "--conf", "spark.windowed.maxFilesPerTrigger=4"], spark=spark)

    tables = _pane_tables(out)
    assert {"EARLY", "ON_TIME"} <= set(_timings(tables["triggers"]))
    assert tables["retractions"].num_rows == 0
    _assert_current_is_latest_trigger(tables, "customer_id")
    # Every ON_TIME pane holds all orders of its customer and minute (no order is behind the
    # watermark): compare with a plain aggregation of the input files.
    lines = [json.loads(line) for f in sorted(Path(out.input).glob("*.json")) for line in f.open()]
    expected: dict[tuple, tuple[int, float]] = {}
    for o in lines:
        minute = o["order_time"][:16]                                   # 2026-03-02T09:01
        n, total = expected.get((o["customer_id"], minute), (0, 0.0))
        expected[(o["customer_id"], minute)] = (n + 1, total + o["amount"])
    on_time = [r for r in tables["current"].to_pylist() if r["pane_timing"] == "ON_TIME"]
    assert len(on_time) >= 10
    for r in on_time:
        n, total = expected[(r["customer_id"], r["window_start"].strftime("%Y-%m-%dT%H:%M"))]
        assert r["orders"] == n and r["revenue"] == pytest.approx(total)


def test_chained_queries_top_users_equal_a_batch_computation(spark, example, tmp_path, capsys):
    """Stage 1 (per-user sums, retracting) -> its pane tables -> stage 2 (window=inherit, top 3
    per window): stage 2's current table equals the top 3 computed from the raw input."""
    import pyarrow.parquet as pq
    chained = example("chained_top_keys")
    out = chained.main(["--output", str(tmp_path / "chain")], spark=spark)
    stage1 = _pane_tables(out)
    stage2 = {name: _table(Path(out.root) / "downstream" / "panes" / name)
              for name in ("triggers", "retractions", "current")}
    assert stage1["retractions"].num_rows > 0          # stage 2 had retractions to subtract
    assert stage2["retractions"].num_rows > 0          # and its own panes were updated in place
    _assert_current_is_latest_trigger(stage1, "user_id")

    sales = pq.read_table(out.input).to_pylist()
    totals: dict[tuple, float] = {}
    for s in sales:
        minute = s["sale_time"].replace(second=0, microsecond=0)
        totals[(minute, s["user_id"])] = totals.get((minute, s["user_id"]), 0.0) + s["amount"]
    expected: dict = {}
    for (minute, user), total in totals.items():
        expected.setdefault(minute, []).append((-round(total, 6), user))
    expected = {m: [(u, -t) for t, u in sorted(v)[:3]] for m, v in expected.items()}
    got = {r["window_start"]: [(t["label"], round(t["value"], 6)) for t in r["top"]]
           for r in stage2["current"].to_pylist()}
    assert len(expected) >= 4
    assert got == expected
    assert "stage 2 vs batch: 15 rows over 5 minutes, equal" in capsys.readouterr().out


def test_orders_payments_join_equals_a_batch_left_join(spark, example, tmp_path, capsys):
    """Two parquet streams joined per customer and minute (join=left): the current table holds,
    for every customer and minute with orders, the orders' and the payments' totals computed
    directly from the raw files; minutes with payments but no orders are absent (left)."""
    import pyarrow.parquet as pq
    joined = example("orders_payments_join")
    out = joined.main(["--output", str(tmp_path / "join")], spark=spark)
    tables = _pane_tables(out)
    _assert_current_is_latest_trigger(tables, "customer_id")
    assert _table(out.late).num_rows == 0   # nothing late: the table exists from the start, empty

    def per_minute(rows, key, ts, value):
        acc: dict[tuple, list] = {}
        for r in rows:
            k = (r[ts].replace(second=0, microsecond=0), r[key])
            acc.setdefault(k, []).append(r[value])
        return acc
    orders = per_minute(pq.read_table(out.input).to_pylist(), "customer_id", "ordered_at", "amount")
    paid = per_minute(pq.read_table(os.path.join(out.root, "input2")).to_pylist(), "customer", "paid_at", "paid")
    expected = {k: (len(v), round(sum(v), 6), len(paid.get(k, [])),
                    round(sum(paid[k]), 6) if k in paid else None) for k, v in orders.items()}
    got = {(r["window_start"], r["customer_id"]):
           (r["orders"], round(r["ordered"], 6), r["payments"], None if r["paid"] is None else round(r["paid"], 6))
           for r in tables["current"].to_pylist()}
    assert len(expected) >= 16 and any(k not in orders for k in paid)   # left: payment-only minutes dropped
    assert got == expected
    assert "stream vs batch: 24 rows over 3 minutes, equal" in capsys.readouterr().out


def test_spark_submit_with_properties_file(tmp_path):
    """spark-submit --properties-file <conf> (+ --conf): the spark.windowed.* entries become the
    reader's defaults. The file is the demo's conf with keys=3 and totalEvents=300; the command
    line sets eventsPerBatch=100 — all three show in the run's panes and batch reports."""
    conf = (ROOT / "conf" / "clickstream_sessions.conf").read_text()
    lines = [line for line in conf.splitlines()
             if not line.startswith(("spark.windowed.keys ", "spark.windowed.totalEvents "))]
    props = tmp_path / "tiny.conf"
    props.write_text("\n".join(lines + ["spark.windowed.keys 3", "spark.windowed.totalEvents 300"]) + "\n")
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    output = tmp_path / "out"
    proc = subprocess.run(
        [str(spark_submit), "--properties-file", str(props),
         "--conf", "spark.windowed.eventsPerBatch=100", "--conf", "spark.driver.memory=1g",
         str(EXAMPLES / "clickstream_sessions.py"), "--output", str(output)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    users = set(_table(output / "panes" / "triggers").column("user_id").to_pylist())
    assert users and users <= {"user-0", "user-1", "user-2"}
    reports = []
    seq = 1
    while (report := read_batch_report(str(output / "state"), seq)) is not None:
        reports.append(report)
        seq += 1
    assert sum(r.events_in for r in reports) == 300
    assert [r.events_in for r in reports if r.events_in] == [100, 100, 100]
    assert "spark.windowed.keys                 3" in proc.stdout
    assert "[clicks] batch 2 | events 100 |" in proc.stdout
