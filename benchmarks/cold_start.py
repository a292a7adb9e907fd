"""The cold start: one windowed query as a fresh ``spark-submit`` job, ours against Spark native.

    python benchmarks/cold_start.py                     # 400 k events, 10 batches, 3 runs of each
    python benchmarks/cold_start.py --runs 1 --kind session

What a batch-like job pays: ``spark-submit --master local[2] benchmarks/_cold_job.py`` starts a
new JVM and Python, runs one query over 400 k events (``--events``, 10 k keys, 40 Parquet files
read 4 per micro-batch: 10 batches) with ``trigger(availableNow=True)``, and exits. Per engine,
each run a fresh process:

* ``ours``: ``readStream.format("windowed")`` with the README's defaults (no ``execution``,
  ``shards`` or serializer set; ``--ours-options`` adds options) into
  ``writeStream.format("windowed")`` (Delta tables);
* ``native``: ``withWatermark(...).groupBy(window(...) | session_window(...), k).agg(...)`` in
  ``append`` mode into Parquet files, Spark's own streaming file sink.

Prints, per run: the wall time from the process's start to its exit, the time from the start to
the first committed panes (the first micro-batch whose sink wrote rows: its progress, which Spark
posts after the sink's commit, polled every 20 ms), and the job's own phases (the SparkSession's
start, ``start()`` to the end of the query, the rest: imports and exit). Then min / median / max
per engine and the ratio ours / native of the medians. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from spark_vs_native import CASES, generate  # noqa: E402

ENGINES = ("native", "ours")


def run_job(engine: str, kind: str, events_dir: str, work: str, ours_options: str = "{}") -> dict:
    """One fresh ``spark-submit`` of the job: its wall time, first committed panes and phases."""
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.time()
    done = subprocess.run([submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                           "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.sql.session.timeZone=UTC",
                           os.path.join(HERE, "_cold_job.py"), engine, kind, events_dir, work, ours_options],
                          env=env, capture_output=True, text=True)
    wall = time.time() - t0
    if done.returncode != 0:
        raise SystemExit(f"{engine}: the job failed\n{done.stderr[-3000:]}")
    out = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    return {"wall_s": wall, "first_pane_s": out["first_pane_epoch"] - t0,
            "session_s": out["session_s"], "query_s": out["query_s"], "rows": out["rows"],
            "before_session_s": out["started_epoch"] - t0, "first_batches": out["first_batches"]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--kind", default="tumbling", choices=sorted(CASES))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--batches", action="store_true", help="print the first batches' phases (Spark's durationMs)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "spark-windowing-cold-start"))
    ap.add_argument("--ours-options", default="{}", help='more options of ours, JSON: \'{"execution": "executors"}\'')
    args = ap.parse_args(argv)
    events_dir = os.path.join(args.dir, f"events-{args.events}-{args.keys}-{args.files}")
    generate(events_dir, args.events, args.keys, args.files, disorder_s=10)
    results: dict[str, list[dict]] = {}
    for run in range(args.runs):
        for engine in args.engines.split(","):
            r = run_job(engine, args.kind, events_dir, os.path.join(args.dir, f"work-{engine}"), args.ours_options)
            results.setdefault(engine, []).append(r)
            print(f"run {run + 1} {engine:6s} wall {r['wall_s']:6.2f} s | first committed panes {r['first_pane_s']:6.2f} s"
                  f" | before the session {r['before_session_s']:5.2f} s, session {r['session_s']:5.2f} s,"
                  f" query {r['query_s']:6.2f} s | sink rows {r['rows']:,}", flush=True)
            if args.batches:
                for b in r["first_batches"]:
                    print(f"    batch {b['batch']}: {json.dumps(b['ms'])}")
    medians = {}
    for engine, rs in results.items():
        walls = sorted(r["wall_s"] for r in rs)
        firsts = sorted(r["first_pane_s"] for r in rs)
        medians[engine] = (statistics.median(walls), statistics.median(firsts))
        print(f"{engine:6s} wall min / median / max {walls[0]:.2f} / {medians[engine][0]:.2f} / {walls[-1]:.2f} s;"
              f" first committed panes {firsts[0]:.2f} / {medians[engine][1]:.2f} / {firsts[-1]:.2f} s")
    if {"ours", "native"} <= set(medians):
        print(f"ours / native, medians: wall {medians['ours'][0] / medians['native'][0]:.2f}x,"
              f" first committed panes {medians['ours'][1] / medians['native'][1]:.2f}x (target: wall <= 1.0x)")


if __name__ == "__main__":
    main()
