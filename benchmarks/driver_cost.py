"""The driver's per-batch cost against the shard count (issue #29).

    python benchmarks/driver_cost.py                          # local state, 2/16/64/256 shards
    python benchmarks/driver_cost.py --store s3               # state on an S3-API server (moto)
    python benchmarks/driver_cost.py --shards 2 16 --batches 30

Runs the source's driver side as Spark calls it per micro-batch, without Spark and with small
data (the ``generator`` upstream, 1000 events per batch): ``latestOffset`` (reads every shard's
reports of the previous batch: one listing), ``partitions`` (plans the batch, one partition per shard) and
``commit`` (garbage collection every ``GC_EVERY`` batches: one listing per shard). The shards'
work is not run; each batch writes one report per shard, as the shards would, outside the timed
part. Prints, per shard count, the median and 90th percentile per batch of offsets+reports,
planning and commit, the mean of commit (garbage collection every ``GC_EVERY`` batches lands in it), and (with ``--store s3``) the object-store requests the driver sent per
batch, counted by the test proxy in front of the server. Spark's own per-task scheduling cost is
not included. Not part of the test suite.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# run as a script, this directory comes first on sys.path, and its operator.py would shadow the standard library's
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "benchmarks")]

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402


def _report(seq: int) -> dict:
    """A shard report of the size a real one has (``reader._shard_report``)."""
    return {"events_in": 500, "panes_trigger": 10, "panes_retraction": 0, "late_dropped": 0, "malformed": 0,
            "watermark_us": 1_700_000_000_000_000 + seq, "state_rows": 1000, "state_bytes": 4096,
            "duration_ms": 12.5, "max_event_us": 1_700_000_000_000_000 + seq * 1000, "max_col_us": None,
            "max_event2_us": None, "next_event_timer": 1_800_000_000_000_000,
            "next_proc_timer": 9_223_372_036_854_775_807, "time_malformed": 0, "time_sample": None,
            "read_ms": 1.0, "step_ms": 5.0, "snapshot_ms": 3.0, "state_reloads": 0}


def measure(shards: int, batches: int, state: str, counter=None) -> dict:
    """Per-batch driver times (ms) and, with ``counter`` (a callable returning the request count
    so far), requests per batch."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark_windowing.datasource.source import shard_reports
    from spark_windowing.datasource.source.reader import WindowedStreamReader

    options = {"source": "generator", "eventsPerBatch": "1000", "keys": "100", "window": "tumbling(1 minute)",
               "aggregate": "count(*) AS n", "timestampColumn": "event_time", "keyColumns": "user_id",
               "shards": str(shards), "stateLocation": state}
    reader = WindowedStreamReader(options, None)
    start = reader.initialOffset()
    offsets, planning, commits, requests = [], [], [], []
    for _ in range(batches):
        before = counter() if counter else 0
        t0 = time.perf_counter()
        end = reader.latestOffset(start, ReadAllAvailable())
        t1 = time.perf_counter()
        reader.partitions(start, end)
        t2 = time.perf_counter()
        for shard in range(shards):  # the shards' reports (executor work, not timed)
            shard_reports.write_report(state, int(end["seq"]), shard, _report(int(end["seq"])))
        between = counter() if counter else 0
        t3 = time.perf_counter()
        reader.commit(end)
        t4 = time.perf_counter()
        after = counter() if counter else 0
        offsets.append((t1 - t0) * 1000)
        planning.append((t2 - t1) * 1000)
        commits.append((t4 - t3) * 1000)
        requests.append((between - before - shards) + (after - between))
        start = end
    warm = slice(2, None)  # the first batches open clients and write spec.json
    return {"shards": shards, "offsets_ms": _stats(offsets[warm]), "planning_ms": _stats(planning[warm]),
            "commit_ms": _stats(commits[warm]), "commit_mean_ms": round(statistics.mean(commits[warm]), 2), "requests": statistics.mean(requests[warm]) if counter else None}


def _stats(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return round(statistics.median(ordered), 2), round(ordered[int(0.9 * (len(ordered) - 1))], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", type=int, nargs="+", default=[2, 16, 64, 256])
    ap.add_argument("--batches", type=int, default=22)
    ap.add_argument("--store", choices=["local", "s3"], default="local")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    tmp = tempfile.mkdtemp(prefix="driver-cost-")
    store = None
    try:
        counter = None
        if args.store == "s3":
            from tests.objectstore import ObjectStore
            store = ObjectStore(os.path.join(tmp, "s3"))
            os.environ.update(store.env)
            counter = store.proxy.mark
        print(f"{'shards':>6} {'offsets+reports ms (p50/p90)':>30} {'planning ms':>14} {'commit ms':>14} {'mean':>6}"
              + (f" {'requests/batch':>15}" if counter else ""))
        for n in args.shards:
            state = store.uri(f"bench-{n}") if store else os.path.join(tmp, f"state-{n}")
            r = measure(n, args.batches, state, counter)
            line = (f"{n:>6} {r['offsets_ms'][0]:>20} / {r['offsets_ms'][1]:<7} {r['planning_ms'][0]:>6} / "
                    f"{r['planning_ms'][1]:<6} {r['commit_ms'][0]:>6} / {r['commit_ms'][1]:<6} {r['commit_mean_ms']:>6}")
            if counter:
                line += f" {r['requests']:>15.1f}"
            print(line, flush=True)
    finally:
        if store:
            store.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
