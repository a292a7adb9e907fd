"""Open windows beyond memory: the state store spills key buckets to the state location.

    python benchmarks/state_spill.py                       # 10 M open windows, 1 M in memory
    python benchmarks/state_spill.py --windows 1000000 --memory-rows 100000

Builds ``--windows`` open windows (one tumbling hour per key, ``--batches`` micro-batches of new
keys, the watermark held before the hour ends), snapshotting after every batch, then advances the
watermark past the hour so every window fires, in parts of at most ``--memory-rows`` windows.
Each run is a fresh process so peak RSS (``ru_maxrss``) is its own; it prints seconds per phase,
panes, snapshot bytes and the peak RSS, with spilling (``stateMemoryRows`` = ``--memory-rows``)
and, with ``--compare``, everything in memory. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

SEC = 1_000_000
HOUR = 3600 * SEC


def run(windows: int, batches: int, memory_rows: int, directory: str) -> None:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from spark_windowing.datasource import storage
    from spark_windowing.operator.spec import OperatorSpec
    from spark_windowing.state.store import StateStore
    from spark_windowing.state.segments import collect_garbage

    schema = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.float64())])
    spec = OperatorSpec.from_options(window="tumbling(1 hour)", aggregate="sum(v) AS total, count(*) AS n",
                                     key_columns="k", timestamp_column="ts")
    store = StateStore(spec, storage, directory, schema, buckets=256, max_rows=memory_rows)
    per = -(-windows // batches)
    rng = np.random.default_rng(7)
    t_build = time.perf_counter()
    written = 0
    for b in range(batches):
        n = min(per, windows - b * per)
        keys = np.arange(b * per, b * per + n, dtype=np.int64)
        ts = rng.integers(0, HOUR // 2, n) + b * (HOUR // 2 // batches)
        events = pa.table({"k": keys, "ts": pa.array(ts).cast(pa.timestamp("us", tz="UTC")),
                           "v": rng.random(n)}, schema=schema)
        store.step(events, watermark=0, processing_time=0, batch_seq=b + 1)
        written += store.persist(b + 1)
        store.evict()
        collect_garbage(storage, directory, b + 1)
    t_build = time.perf_counter() - t_build
    open_windows = store.num_windows
    resident = store.op.num_windows
    t_fire = time.perf_counter()
    panes = 0
    for part in store.step_parts(None, watermark=HOUR, processing_time=0, batch_seq=batches + 1):
        panes += part.panes.num_rows
    store.persist(batches + 1)
    t_fire = time.perf_counter() - t_fire
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  memory rows {memory_rows:>11,}: built {open_windows:,} open windows in {t_build:6.1f} s "
          f"({windows / t_build / 1e6:.2f} M windows/s, {written / 1e6:,.0f} MB of snapshots, "
          f"{resident:,} resident after the last batch); fired {panes:,} panes in {t_fire:6.1f} s; "
          f"peak RSS {rss:,.0f} MB")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=10_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--memory-rows", type=int, default=1_000_000)
    ap.add_argument("--compare", action="store_true", help="also run with everything in memory")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args(argv)
    if args.child:
        run(args.windows, args.batches, args.memory_rows, args.dir)
        return
    print(f"{args.windows:,} open windows (tumbling 1 hour, one per key), {args.batches} batches, "
          f"{os.cpu_count()} cores")
    for rows in [args.memory_rows] + ([args.windows * 2] if args.compare else []):
        d = tempfile.mkdtemp(prefix="bench-spill-")
        try:
            subprocess.run([sys.executable, __file__, "--child", "--windows", str(args.windows), "--batches",
                            str(args.batches), "--memory-rows", str(rows), "--dir", d], check=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
