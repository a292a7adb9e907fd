"""Orders: revenue per customer per minute from a directory of JSON files.

The example first writes order files (JSON lines, one file per 30 s of orders, a few seconds out
of order) to ``<output>/input``; then a ``format("windowed")`` stream reads them
(``source=json``, one file per micro-batch) -> per-customer tumbling 1-minute windows with an
EARLY pane for every 20 new orders and the ON_TIME pane at the end of the minute, accumulating
(each pane holds the minute's totals so far) -> the windowed sink -> Spark SQL: the top
customers per minute and how their totals grew from pane to pane.

Big customers order often enough to get EARLY panes; small ones get only their ON_TIME pane.
The last minute keeps only EARLY panes: no later order moves the watermark past its end (the run
stops when the files are read; a running stream would close it with the next files).

Every windowing setting comes from ``conf/orders_tumbling.conf`` (``spark.windowed.*``)::

    spark-submit --properties-file conf/orders_tumbling.conf examples/orders_tumbling.py
    python examples/orders_tumbling.py [--output DIR] [--conf spark.windowed.maxFilesPerTrigger=2 ...]

Outputs go to ``./out/orders_tumbling/`` (emptied first).
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Sequence

import numpy as np

import _common

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

NAME = "orders_tumbling"
START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
#: Customers and their share of the orders.
CUSTOMERS = {"acme": 0.35, "globex": 0.25, "initech": 0.2, "umbrella": 0.12, "hooli": 0.08}

#: The 3 customers with the highest revenue in each minute (current table: final totals).
TOP_CUSTOMERS_SQL = """\
SELECT window_start, window_end, customer_id, revenue, orders, rank
FROM (
  SELECT window_start, window_end, customer_id, round(revenue, 2) AS revenue, orders,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end
                            ORDER BY revenue DESC, customer_id) AS rank
  FROM orders
)
WHERE rank <= 3
ORDER BY window_start, rank
LIMIT 12"""

#: How one customer's minute totals grew, pane by pane (accumulating: each pane holds all so far).
PANE_HISTORY_SQL = """\
SELECT window_start, pane_index, pane_timing, orders, round(revenue, 2) AS revenue, batch_seq
FROM orders_triggers
WHERE customer_id = 'acme'
ORDER BY window_start, pane_index
LIMIT 12"""


def write_orders(directory: str, *, files: int = 8, orders_per_file: int = 150, seed: int = 3) -> int:
    """Write ``files`` JSON-lines files of orders, each covering the next 30 s; return the count.

    Within a file, order times are shuffled by up to 5 s (out of order, but never behind the
    10 s watermark delay of the conf); the first order is at ``START`` or later.
    """
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    names, weights = list(CUSTOMERS), np.array(list(CUSTOMERS.values()))
    order_id = 0
    for f in range(files):
        offsets = np.sort(rng.uniform(5, 35, orders_per_file)) + 30 * f
        offsets = offsets - rng.uniform(0, 5, orders_per_file)
        customers = rng.choice(names, size=orders_per_file, p=weights / weights.sum())
        amounts = np.round(rng.gamma(2.0, 20.0, orders_per_file), 2)
        items = rng.integers(1, 6, orders_per_file)
        with open(os.path.join(directory, f"orders-{f:04d}.json"), "w", encoding="utf-8") as out:
            for i in range(orders_per_file):
                order_time = START + timedelta(seconds=float(offsets[i]))
                out.write(json.dumps({
                    "order_id": order_id, "customer_id": str(customers[i]),
                    "order_time": order_time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                    "amount": float(amounts[i]), "items": int(items[i])}) + "\n")
                order_id += 1
    return order_id


def main(argv: Sequence[str] | None = None, *, spark: "SparkSession | None" = None) -> _common.Outputs:
    """Run the example; return where its outputs are. ``spark``: use this session (tests)."""
    args = _common.Args.parse(NAME, __doc__, argv)
    out = _common.Outputs.fresh(args.output)
    count = write_orders(out.input)
    print(f"wrote {count} orders to {out.input}")
    with _common.windowed_session(args, spark) as session:
        _common.print_banner("Orders per customer and minute", session, args)
        panes = (session.readStream.format("windowed")          # the rest: spark.windowed.*
                 .option("path", out.input)
                 .option("stateLocation", out.state)
                 .load())
        seconds = _common.run_to_end(panes, out, query_name="orders", spark=session)

        _common.create_views(session, out, "orders")
        _common.show_sql(session, "Panes by kind and timing",
                         _common.PANE_COUNTS_SQL.format(name="orders"))
        _common.show_sql(session, "Top 3 customers per minute (current table)", TOP_CUSTOMERS_SQL)
        _common.show_sql(session, "How acme's minutes grew, pane by pane (triggers table)",
                         PANE_HISTORY_SQL)
        _common.plot_timeline(out, title="Orders: revenue per customer and minute", max_keys=5)
    _common.print_outputs("Orders", out, seconds, with_input=True, with_late=False)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
