"""Bytes of state per window and per key, in memory and in a snapshot (the capacity guide, issue #29).

    python benchmarks/state_size.py                 # 100 k keys
    python benchmarks/state_size.py --keys 1000000

For a few window kinds and aggregates: one batch of ``--keys`` keys with ``--per-key`` events
each (one open window per key and window instance), held before the watermark; prints the open
windows, the in-memory bytes of the window table (state columns and key column) per window, and
the bytes of the full LZ4-compressed snapshot (``StateStore.persist``) per window and per key.
Not part of the test suite.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "benchmarks")]  # operator.py

import argparse  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

CASES = [("tumbling(1 minute)", "sum(v) AS s, count(*) AS n"),
         ("sliding(5 minutes, 1 minute)", "sum(v) AS s, count(*) AS n"),
         ("session(30 seconds)", "sum(v) AS s, count(*) AS n"),
         ("tumbling(1 minute)", "sum(v) AS s, count(*) AS n, max(v) AS m, avg(v) AS a"),
         ("tumbling(1 minute)", "collect_list(v) AS l")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--per-key", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    from spark_windowing.datasource import storage
    from spark_windowing.operator.spec import OperatorSpec
    from spark_windowing.state.store import StateStore

    n = args.keys * args.per_key
    rng = np.random.default_rng(1)
    keys = pa.array([f"user-{i:07d}" for i in rng.integers(0, args.keys, n)])
    events = pa.table({"k": keys, "ts": pa.array(rng.integers(0, 50_000_000, n), pa.timestamp("us", tz="UTC")),
                       "v": pa.array(rng.random(n))})
    print(f"{'window':<30} {'aggregate':<45} {'windows':>9} {'memory B/window':>16} {'snapshot B/window':>18} "
          f"{'snapshot B/key':>15}")
    for window, aggregate in CASES:
        spec = OperatorSpec.from_options(window=window, aggregate=aggregate, key_columns="k", timestamp_column="ts")
        with tempfile.TemporaryDirectory() as d:
            store = StateStore(spec, storage, d, events.schema, buckets=64, max_rows=10 ** 9)
            store.step(events, watermark=0, processing_time=0, batch_seq=1)
            written = store.persist(1)
            op = store.op
            windows = op.num_windows
            memory = sum(c[:windows].nbytes for c in op.table.cols.values()) + op.table.keys.nbytes
            print(f"{window:<30} {aggregate:<45} {windows:>9} {memory / windows:>16.1f} {written / windows:>18.1f} "
                  f"{written / args.keys:>15.1f}", flush=True)


if __name__ == "__main__":
    main()
