"""Operator throughput without Spark, next to pyarrow's plain group_by on the same data.

    python benchmarks/operator_alone.py                     # 10 M events, 100 k keys, 10 bundles
    python benchmarks/operator_alone.py --events 1000000    # quicker

For each window kind (tumbling 1 min, sliding 5 min / 1 min, session 30 s) and trigger
(Default, AfterWatermark(early=AfterCount(100))) it feeds the events as bundles (micro-batches)
with a bounded(10 s) watermark, and prints events/second. The baseline is the practical ceiling:
``pyarrow.Table.group_by([key, window_start]).aggregate([("v", "sum")])`` over all events at once
(tumbling windows computed with vectorized arithmetic), in the same run.

    python benchmarks/operator_alone.py --events 1000000 --keys 1000 --process

``--process`` instead times ``process=`` functions (one Python call per pane: their cost follows
the number of panes, so fewer keys = more events per pane) next to the same sums as aggregates.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing import OperatorSpec, WindowedOperator

SEC = 1_000_000
MIN = 60 * SEC


def make_events(n: int, keys: int, seed: int = 1, span_s: int = 3600, disorder_s: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    base = np.sort(rng.integers(0, span_s * SEC, n))
    ts = base - rng.integers(0, disorder_s * SEC, n)
    return pa.table({"k": rng.integers(0, keys, n), "ts": ts + 1_767_225_600 * SEC,
                     "v": rng.integers(0, 1000, n)})


def sum_v(elements: pa.Table, ctx) -> dict:
    """A process function doing what ``sum(v) AS s, count(*) AS n`` does."""
    return {"s": pc.sum(elements.column("v")).as_py(), "n": elements.num_rows}


sum_v.output_fields = [pa.field("s", pa.int64()), pa.field("n", pa.int64())]
sum_v.input_columns = ["v"]


def run_operator(events: pa.Table, window: str, trigger: str, bundles: int,
                 how: dict | None = None) -> tuple[float, int]:
    how = how or dict(aggregate="sum(v) AS s, count(*) AS n")
    spec = OperatorSpec.from_options(window=window, trigger=trigger, **how, key_columns="k", timestamp_unit="us")
    op = WindowedOperator(spec, events.schema)
    size = -(-events.num_rows // bundles)
    wm = None
    panes = 0
    t0 = time.perf_counter()
    for b in range(bundles):
        chunk = events.slice(b * size, size)
        r = op.step(chunk, watermark=wm, processing_time=b * SEC)
        panes += r.panes.num_rows
        wm = int(pc.max(chunk.column("ts")).as_py()) - 10 * SEC
    r = op.step(None, watermark=2 ** 62, processing_time=bundles * SEC)  # flush: every window closes
    panes += r.panes.num_rows
    return time.perf_counter() - t0, panes


def run_pyarrow(events: pa.Table) -> float:
    t0 = time.perf_counter()
    ts = events.column("ts").to_numpy()
    t = events.append_column("ws", pa.array(ts // MIN * MIN))
    t.group_by(["k", "ws"]).aggregate([("v", "sum"), ("v", "count")])
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--bundles", type=int, default=10)
    ap.add_argument("--only", default=None, help="run only cases whose label contains this text")
    ap.add_argument("--curves", action="store_true",
                    help="instead: cost curves as keys grow (10 k -> 1 M) and as size/slide grows (1 -> 60)")
    ap.add_argument("--process", action="store_true", help="instead: process functions vs. aggregates")
    args = ap.parse_args(argv)
    if args.curves:
        return curves(args.events, args.bundles)
    if args.process:
        return process(args.events, args.keys, args.bundles)
    events = make_events(args.events, args.keys)
    print(f"events={args.events:,} keys={args.keys:,} bundles={args.bundles} (python operator, 1 thread)")
    base = min(run_pyarrow(events) for _ in range(2))
    print(f"{'pyarrow group_by tumbling sum (ceiling)':58s} {base:8.2f} s {args.events / base / 1e6:8.2f} M ev/s")
    cases = [
        ("tumbling(1 minute)", "Default()"),
        ("tumbling(1 minute)", "AfterWatermark(early=AfterCount(100))"),
        ("sliding(5 minutes, 1 minute)", "Default()"),
        ("sliding(5 minutes, 1 minute)", "AfterWatermark(early=AfterCount(100))"),
        ("session(30 seconds)", "Default()"),
        ("session(30 seconds)", "AfterWatermark(early=AfterCount(100))"),
    ]
    for window, trigger in cases:
        label = f"{window} {trigger}"
        if args.only and args.only not in label:
            continue
        secs, panes = run_operator(events, window, trigger, args.bundles)
        rate = args.events / secs
        print(f"{label:58s} {secs:8.2f} s {rate / 1e6:8.2f} M ev/s  {100 * base / secs:5.1f}% of pyarrow  "
              f"panes={panes:,}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def process(n: int, keys: int, bundles: int) -> None:
    """Events/second of a process function (with and without an evictor) next to aggregates."""
    events = make_events(n, keys)
    print(f"process functions, events={n:,} keys={keys:,} bundles={bundles}")
    fn = "__main__:sum_v" if __name__ == "__main__" else "benchmarks.operator_alone:sum_v"
    for window, trigger in (("tumbling(1 minute)", "Default()"),
                            ("tumbling(1 minute)", "AfterWatermark(early=AfterCount(100))"),
                            ("session(30 seconds)", "Default()")):
        for label, how in (("aggregate sum, count", None), ("process sum_v", dict(process=fn)),
                           ("process sum_v, evictor count(10)", dict(process=fn, evictor="count(10)"))):
            secs, panes = run_operator(events, window, trigger, bundles, how)
            print(f"  {window} {trigger:40s} {label:34s} {n / secs / 1e6:6.2f} M ev/s  panes={panes:,}")


def curves(n: int, bundles: int) -> None:
    """Events/second of the Default trigger as the key count and the windows per element grow."""
    print(f"cost curves, events={n:,} bundles={bundles}")
    for keys in (10_000, 100_000, 1_000_000):
        secs, panes = run_operator(make_events(n, keys), "tumbling(1 minute)", "Default()", bundles)
        print(f"  tumbling(1 minute) keys={keys:>9,}: {n / secs / 1e6:6.2f} M ev/s  panes={panes:,}")
    events = make_events(n, 10_000)
    for ratio in (1, 5, 15, 60):
        secs, panes = run_operator(events, f"sliding({ratio} minutes, 1 minute)", "Default()", bundles)
        print(f"  sliding size/slide={ratio:>2} keys=10,000: {n / secs / 1e6:6.2f} M ev/s  "
              f"({n * ratio / secs / 1e6:6.2f} M (event, window) pairs/s)  panes={panes:,}")


if __name__ == "__main__":
    main()
