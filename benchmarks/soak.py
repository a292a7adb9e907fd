"""Soak benchmark: one windowed query for a long time; does anything grow with the stream's age?

    python benchmarks/soak.py --minutes 60                    # the configuration below, 1 hour
    python benchmarks/soak.py --minutes 5 --dir /tmp/soak5   # a quick look

Configuration (the one of the "runs for days" issue): generator source, 5,000 keys, 6,000 events
per micro-batch (10 ms of event time apart, up to 5 s out of order, 0.1 % far too late),
``session(30 seconds)``, ``AfterWatermark(early=AfterCount(10), late=AfterCount(1))``,
``accumulating_and_retracting``, allowed lateness 1 minute, late-data table on,
``trigger(processingTime="2 seconds")``, pane sink (``--sink-option k=v`` adds sink options,
e.g. the maintenance schedule). local[2], one SparkSession.

Every ``--every`` seconds (default 60) one line: batches so far, mean batch time of the batches
since the last line, bytes added to each table per batch (from the tables' Delta logs: the add
actions of the commits since the last line), each table's size on disk and file count (all
files under the table directory, and the live ones), the size of the state location, and the
resident memory (RSS) of the driver JVM, the driver's Python process, and the Python workers
(every other Python process under the JVM). A summary compares each minute with minute 5.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from _procs import jvm_and_python_workers, pss, rss

TABLES = ("triggers", "retractions", "current")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--every", type=float, default=60.0, help="seconds between report lines")
    p.add_argument("--dir", default="/tmp/spark-windowing-soak")
    p.add_argument("--keys", type=int, default=5000)
    p.add_argument("--events-per-batch", type=int, default=6000)
    p.add_argument("--trigger", default="2 seconds")
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", help="also write the report rows as JSON lines here")
    return p.parse_args(argv)


# --------------------------------------------------------------------------- measurements

def memory() -> dict[str, int]:
    """RSS of this (driver Python) process, the JVM it started, and the Python processes below it
    (RSS summed, and PSS summed: RSS counts the pages forked workers share once per process)."""
    jvms, workers = jvm_and_python_workers()
    return {"driver_python": rss(os.getpid()), "jvm": sum(rss(j) for j in jvms),
            "python_workers": sum(rss(w) for w in workers), "python_workers_pss": sum(pss(w) for w in workers),
            "python_worker_count": len(workers),
            "python_worker_max": max((rss(w) for w in workers), default=0)}


def dir_size(path: Path) -> tuple[int, int]:
    """(bytes, data files) under ``path`` (data files: ``*.parquet``)."""
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
            files += name.endswith(".parquet")
    return total, files


def log_adds(table: Path, after_version: int) -> tuple[int, int, int]:
    """(latest version, bytes added by data-changing commits after ``after_version``, commits)."""
    log = table / "_delta_log"
    latest, added, commits = after_version, 0, 0
    for entry in os.listdir(log) if log.exists() else []:
        if not (entry.endswith(".json") and entry[:-5].isdigit()):
            continue
        version = int(entry[:-5])
        if version <= after_version:
            continue
        latest = max(latest, version)
        try:
            lines = (log / entry).read_text().splitlines()
        except OSError:
            continue
        actions = [json.loads(line) for line in lines if line.strip()]
        if any(a.get("commitInfo", {}).get("operation") in ("OPTIMIZE", "VACUUM START", "VACUUM END")
               for a in actions):
            continue  # maintenance, reported separately by the sink
        commits += 1
        added += sum(a["add"].get("size", 0) for a in actions if "add" in a)
    return latest, added, commits


def live_files(table: Path) -> int:
    from deltalake import DeltaTable
    try:
        return len(DeltaTable(str(table)).file_uris())
    except Exception:
        return -1


# --------------------------------------------------------------------------- the query

def build_query(spark, args: argparse.Namespace, base: Path):
    source = {
        "source": "generator", "keys": str(args.keys), "eventsPerBatch": str(args.events_per_batch),
        "eventInterval": "10 milliseconds", "disorder": "5 seconds", "lateFraction": "0.001",
        "timestampColumn": "event_time", "keyColumns": "user_id",
        "window": "session(30 seconds)",
        "trigger": "AfterWatermark(early=AfterCount(10), late=AfterCount(1))",
        "accumulationMode": "accumulating_and_retracting",
        "watermark": "bounded(5 seconds)", "allowedLateness": "1 minute",
        "aggregate": "count(*) AS clicks, sum(amount) AS revenue",
        "lateDataPath": str(base / "late"), "stateLocation": str(base / "state"),
    }
    source.update(dict(kv.split("=", 1) for kv in args.source_option))
    reader = spark.readStream.format("windowed")
    for k, v in source.items():
        reader = reader.option(k, v)
    writer = (reader.load().writeStream.format("windowed").queryName("soak")
              .option("path", str(base / "panes")).option("checkpointLocation", str(base / "chk"))
              .trigger(processingTime=args.trigger))
    for kv in args.sink_option:
        k, v = kv.split("=", 1)
        writer = writer.option(k, v)
    return writer.start()


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_windowing

    base = Path(args.dir)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    spark = (SparkSession.builder.master("local[2]").appName("spark-windowing-soak")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "2g")
             .config("spark.python.worker.reuse", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    query = build_query(spark, args, base)
    out = open(args.json, "w") if args.json else None
    print(f"soak: {args.minutes} min into {base}, sink options {args.sink_option}", flush=True)
    header = ("min  batches  batch_s  | bytes/batch trig retr curr late | size MB trig retr curr late state"
              " | files(live) trig retr curr late | RSS MB jvm driver workers(n) max-worker workers-PSS")
    print(header, flush=True)
    seen_versions = {t: -1 for t in (*TABLES, "late")}
    seen_batch, started, rows = -1, time.monotonic(), []
    try:
        tick = 1
        while time.monotonic() - started < args.minutes * 60:
            time.sleep(max(0.0, started + tick * args.every - time.monotonic()))
            tick += 1
            if query.exception():
                raise query.exception()
            progress = [p for p in query.recentProgress if p["batchId"] > seen_batch
                        and p.get("numInputRows") is not None]
            durations = [p["batchDuration"] / 1000 for p in progress]
            if progress:
                if seen_batch < 0:
                    print("sink:", progress[-1].get("sink"), flush=True)
                seen_batch = max(p["batchId"] for p in progress)
            row = {"minute": round((time.monotonic() - started) / 60, 2), "batches": seen_batch + 1,
                   "batch_s": sum(durations) / len(durations) if durations else None}
            for name in (*TABLES, "late"):
                path = base / "panes" / name if name != "late" else base / "late"
                seen_versions[name], added, commits = log_adds(path, seen_versions[name])
                per = max(len(progress), 1)
                row[f"bytes_per_batch_{name}"] = added / per
                row[f"size_{name}"], row[f"files_{name}"] = dir_size(path)
                row[f"live_files_{name}"] = live_files(path)
            row["size_state"] = dir_size(base / "state")[0]
            row["size_checkpoint"] = dir_size(base / "chk")[0]
            row.update(memory())
            rows.append(row)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            print(format_row(row), flush=True)
    finally:
        query.stop()
        spark.stop()
        if out:
            out.close()
    print(summary(rows), flush=True)
    return 0


def format_row(r: dict) -> str:
    mb = lambda v: f"{v / 1e6:7.1f}"
    kb = lambda v: f"{v / 1e3:7.0f}k"
    t = "   n/a" if r["batch_s"] is None else f"{r['batch_s']:6.2f}"
    return (f"{r['minute']:5.1f} {r['batches']:7d} {t}  |"
            + "".join(kb(r[f"bytes_per_batch_{n}"]) for n in (*TABLES, "late")) + " |"
            + "".join(mb(r[f"size_{n}"]) for n in (*TABLES, "late", "state", "checkpoint")) + " |"
            + "".join(f" {r[f'files_{n}']:5d}({r[f'live_files_{n}']})" for n in (*TABLES, "late")) + " |"
            + f"{mb(r['jvm'])}{mb(r['driver_python'])}{mb(r['python_workers'])}({r['python_worker_count']})"
            + f"{mb(r['python_worker_max'])}{mb(r['python_workers_pss'])}")


def summary(rows: list[dict]) -> str:
    """Each later row relative to the row at minute 5 (batch time, RSS, bytes per batch)."""
    ref = next((r for r in rows if r["minute"] >= 5), None)
    if ref is None or ref["batch_s"] is None:
        return "summary: run shorter than 5 minutes"
    lines = ["summary vs minute 5 (ratio): minute batch_s workers_rss jvm_rss current_bytes/batch"]
    for r in rows:
        if r["minute"] < 5 or r["batch_s"] is None:
            continue
        cur = ref["bytes_per_batch_current"] or 1
        lines.append(f"  {r['minute']:5.1f} {r['batch_s'] / ref['batch_s']:5.2f} "
                     f"{r['python_workers'] / max(ref['python_workers'], 1):5.2f} "
                     f"{r['jvm'] / max(ref['jvm'], 1):5.2f} {r['bytes_per_batch_current'] / cur:5.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
