"""Two streams merged per key and window (Flink's window join, Apex's WindowedMergeOperator):
what each customer ordered and paid, per minute.

1. The example writes order files (parquet, one per 20 s of orders) to ``<output>/input`` and
   payment files (one per 20 s of payments, a customer paying some orders a few seconds after
   ordering, some not at all) to ``<output>/input2``.
2. One ``format("windowed")`` query reads both: ``source``/``path`` the orders, ``source2``/
   ``path2`` the payments, keyed by ``customer_id`` (stream 1) = ``customer`` (``keyColumns2``),
   tumbling 1-minute windows of each stream's own event time, ``join=left``: a pane for every
   customer and minute with orders, with ``aggregate`` over the orders and ``aggregate2`` over the
   payments (null sum and 0 count when nothing was paid). An EARLY pane every micro-batch,
   ``accumulating_and_retracting``: the ``current`` table always holds the latest totals. The
   watermark is the earlier of the two streams' watermarks.
3. The outstanding amount per customer and minute (``current``) is compared with a Spark batch
   query over the raw files: orders grouped by minute and customer, LEFT JOIN payments grouped
   the same way.

    python examples/orders_payments_join.py [--output DIR]
    spark-submit --properties-file conf/orders_payments_join.conf examples/orders_payments_join.py

Outputs go to ``./out/orders_payments_join/`` (emptied first).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Sequence

import numpy as np

import _common

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

NAME = "orders_payments_join"
START = datetime(2026, 3, 2, 15, 0, tzinfo=timezone.utc)
CUSTOMERS = [f"cust-{i:02d}" for i in range(8)]

#: Orders (stream 1) left-joined with payments (stream 2) per customer and minute.
QUERY = {"source": "parquet", "timestampColumn": "ordered_at", "keyColumns": "customer_id",
         "source2": "parquet", "timestampColumn2": "paid_at", "keyColumns2": "customer",
         "join": "left", "window": "tumbling(1 minute)",
         "aggregate": "sum(amount) AS ordered, count(*) AS orders",
         "aggregate2": "sum(paid) AS paid, count(*) AS payments",
         "trigger": "AfterWatermark(early=AfterCount(1))", "accumulationMode": "accumulating_and_retracting",
         "watermark": "bounded(10 seconds)", "maxFilesPerTrigger": "1", "maxFilesPerTrigger2": "1"}

#: What is still unpaid per customer and minute, from the stream's current table.
OUTSTANDING_SQL = """\
SELECT window_start, customer_id, orders, payments, round(ordered, 2) AS ordered,
       round(coalesce(paid, 0), 2) AS paid, round(ordered - coalesce(paid, 0), 2) AS outstanding
FROM orders_payments
ORDER BY window_start, customer_id"""

#: The same from the raw files, as one Spark batch query.
BATCH_SQL = """\
SELECT o.window_start, o.customer_id, o.orders, coalesce(p.payments, 0) AS payments,
       round(o.ordered, 2) AS ordered, round(coalesce(p.paid, 0), 2) AS paid,
       round(o.ordered - coalesce(p.paid, 0), 2) AS outstanding
FROM (SELECT window.start AS window_start, customer_id, sum(amount) AS ordered, count(*) AS orders
      FROM orders GROUP BY window(ordered_at, '1 minute'), customer_id) o
LEFT JOIN (SELECT window.start AS window_start, customer, sum(paid) AS paid, count(*) AS payments
           FROM payments GROUP BY window(paid_at, '1 minute'), customer) p
  ON o.window_start = p.window_start AND o.customer_id = p.customer
ORDER BY window_start, customer_id"""


def write_streams(orders_dir: str, payments_dir: str, *, files: int = 9, per_file: int = 40,
                  seed: int = 5) -> tuple[int, int]:
    """``files`` parquet files per stream, each covering the next 20 s, up to 4 s out of order
    (never behind the 10 s watermark delay: nothing is late). About 70% of the orders are paid,
    1–6 s after they were placed (possibly in the next minute, or the next file). Returns the
    numbers of orders and payments."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    os.makedirs(orders_dir, exist_ok=True)
    os.makedirs(payments_dir, exist_ok=True)
    t0 = int(START.timestamp() * 1_000_000)
    ts = pa.timestamp("us", tz="UTC")
    n_orders = n_payments = 0
    carry: list[tuple[int, str, float]] = []   # payments due in a later file
    for f in range(files):
        sec = np.sort(rng.uniform(4, 20, per_file)) + 20 * f - rng.uniform(0, 4, per_file)
        at = (t0 + sec * 1e6).astype(np.int64)
        cust = rng.choice(CUSTOMERS, per_file).tolist()
        amount = np.round(rng.gamma(2.0, 25.0, per_file), 2)
        pq.write_table(pa.table({
            "order_id": pa.array(np.arange(n_orders, n_orders + per_file), pa.int64()),
            "customer_id": pa.array(cust, pa.string()),
            "ordered_at": pa.array(at, pa.int64()).cast(ts),
            "amount": pa.array(amount)}), os.path.join(orders_dir, f"orders-{f:04d}.parquet"))
        n_orders += per_file
        paid = rng.random(per_file) < 0.7
        due = carry + [(int(a + rng.uniform(1, 6) * 1e6), c, float(x))
                       for a, c, x, p in zip(at, cust, amount, paid) if p]
        end = t0 + (20 * (f + 1)) * 1_000_000
        now = [d for d in due if d[0] < end or f == files - 1]
        carry = [d for d in due if not (d[0] < end or f == files - 1)]
        pq.write_table(pa.table({
            "payment_id": pa.array(np.arange(n_payments, n_payments + len(now)), pa.int64()),
            "customer": pa.array([c for _, c, _ in now], pa.string()),
            "paid_at": pa.array(np.array([t for t, _, _ in now], dtype=np.int64), pa.int64()).cast(ts),
            "paid": pa.array([x for _, _, x in now], pa.float64())}),
            os.path.join(payments_dir, f"payments-{f:04d}.parquet"))
        n_payments += len(now)
        for d, name in ((orders_dir, "orders"), (payments_dir, "payments")):
            os.utime(os.path.join(d, f"{name}-{f:04d}.parquet"), (f, f))  # file order = time order
    return n_orders, n_payments


def main(argv: Sequence[str] | None = None, *, spark: "SparkSession | None" = None) -> _common.Outputs:
    args = _common.Args.parse(NAME, __doc__, argv)
    out = _common.Outputs.fresh(args.output)
    payments_dir = os.path.join(out.root, "input2")
    n_orders, n_payments = write_streams(out.input, payments_dir)
    print(f"wrote {n_orders} orders to {out.input} and {n_payments} payments to {payments_dir}")
    with _common.windowed_session(args, spark) as session:
        _common.print_banner("Orders left-joined with payments per customer and minute", session, args)
        panes = session.readStream.format("windowed").options(**QUERY) \
            .option("path", out.input).option("path2", payments_dir) \
            .option("stateLocation", out.state).option("lateDataPath", out.late).load()
        seconds = _common.run_to_end(panes, out, query_name="orders_payments", spark=session)
        _common.create_views(session, out, "orders_payments")
        session.read.parquet(out.input).createOrReplaceTempView("orders")
        session.read.parquet(payments_dir).createOrReplaceTempView("payments")
        _common.show_sql(session, "Outstanding per customer and minute: the join's current table",
                         OUTSTANDING_SQL, rows=12)
        streamed = [tuple(r) for r in session.sql(OUTSTANDING_SQL).collect()]
        batch = [tuple(r) for r in session.sql(BATCH_SQL).collect()]
        verdict = "equal" if streamed == batch else "DIFFERENT"
        print(f"\n-- stream vs batch: {len(streamed)} rows over {len({r[0] for r in streamed})} minutes, {verdict}")
    _common.print_outputs("Orders and payments", out, seconds, with_input=True, with_timeline=False)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
