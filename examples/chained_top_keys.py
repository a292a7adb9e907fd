"""Chained windowed queries (Apex window propagation): revenue per user and minute, then the
top 3 users of every minute — the second query keeps the first one's windows.

1. The example writes sales files (parquet, one per 20 s of sales) to ``<output>/input``.
2. Stage 1, ``format("windowed")`` over them: per ``user_id``, tumbling 1-minute windows,
   ``sum(amount) AS total``, an EARLY pane every micro-batch (``AfterWatermark(early=
   AfterCount(1))``), ``accumulating_and_retracting``: each new total of a user's minute comes
   with a RETRACTION of the previous one. Pane tables -> ``<output>/panes``.
3. Stage 2 reads stage 1's pane tables as its upstream (``source=panes``) with
   ``window=inherit``: every pane row already names its window, RETRACTION rows are subtracted.
   No key, so one window per minute; ``spark_windowing.aggregates.accumulations:TopN(3, total, user_id)``
   keeps the minute's (user, total) pairs as a multiset and outputs the 3 largest. Its time and
   watermark come from the pane rows (``pane_timestamp``, ``column(watermark)``: the defaults with
   ``window=inherit``). Pane tables -> ``<output>/downstream/panes``.
4. The top 3 of every minute (stage 2's ``current`` table) is compared with a Spark batch
   query over the raw sales files: group by user and minute, rank, keep 3.

    python examples/chained_top_keys.py [--output DIR]
    spark-submit --properties-file conf/chained_top_keys.conf examples/chained_top_keys.py

Outputs go to ``./out/chained_top_keys/`` (emptied first).
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

NAME = "chained_top_keys"
START = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
USERS = [f"user-{i:02d}" for i in range(12)]

#: Stage 1: revenue per user and minute, a new (retracting) pane every micro-batch.
STAGE1 = {"source": "parquet", "timestampColumn": "sale_time", "keyColumns": "user_id",
          "window": "tumbling(1 minute)", "aggregate": "sum(amount) AS total, count(*) AS sales",
          "trigger": "AfterWatermark(early=AfterCount(1))", "accumulationMode": "accumulating_and_retracting",
          "watermark": "bounded(10 seconds)", "maxFilesPerTrigger": "1"}
#: Stage 2: the top 3 users of each of stage 1's windows.
STAGE2 = {"source": "panes", "window": "inherit",
          "aggregate": "spark_windowing.aggregates.accumulations:TopN(3, total, user_id)",
          "trigger": "AfterWatermark(early=AfterCount(1))", "accumulationMode": "accumulating_and_retracting",
          "maxFilesPerTrigger": "2"}   # two of stage 1's micro-batches per micro-batch

#: Stage 2's result, one row per minute and rank.
TOP_SQL = """\
SELECT window_start, pos AS rank, t.label AS user_id, round(t.value, 2) AS total
FROM top_users LATERAL VIEW posexplode(top) AS pos, t
ORDER BY window_start, rank"""

#: The same from the raw sales, as one Spark batch query.
BATCH_SQL = """\
SELECT window_start, rank - 1 AS rank, user_id, round(total, 2) AS total
FROM (SELECT window.start AS window_start, user_id, sum(amount) AS total,
             ROW_NUMBER() OVER (PARTITION BY window.start ORDER BY sum(amount) DESC, user_id) AS rank
      FROM sales GROUP BY window(sale_time, '1 minute'), user_id)
WHERE rank <= 3
ORDER BY window_start, rank"""


def write_sales(directory: str, *, files: int = 12, per_file: int = 120, seed: int = 11) -> int:
    """``files`` parquet files of sales, each covering the next 20 s, up to 5 s out of order
    (never behind the 10 s watermark delay: nothing is late); return the number of sales."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    weights = rng.gamma(1.5, 1.0, len(USERS))
    n = 0
    for f in range(files):
        sec = np.sort(rng.uniform(5, 25, per_file)) + 20 * f - rng.uniform(0, 5, per_file)
        times = [START.timestamp() * 1e6 + s * 1e6 for s in sec]
        table = pa.table({
            "sale_id": pa.array(np.arange(n, n + per_file), pa.int64()),
            "user_id": pa.array(rng.choice(USERS, per_file, p=weights / weights.sum()).tolist(), pa.string()),
            "sale_time": pa.array(np.array(times, dtype=np.int64), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "amount": pa.array(np.round(rng.gamma(2.0, 15.0, per_file), 2)),
        })
        pq.write_table(table, os.path.join(directory, f"sales-{f:04d}.parquet"))
        os.utime(os.path.join(directory, f"sales-{f:04d}.parquet"), (f, f))  # file order = time order
        n += per_file
    return n


def main(argv: Sequence[str] | None = None, *, spark: "SparkSession | None" = None) -> _common.Outputs:
    """Run both stages; return stage 1's outputs (stage 2's are under ``<output>/downstream``)."""
    args = _common.Args.parse(NAME, __doc__, argv)
    out = _common.Outputs.fresh(args.output)
    down = _common.Outputs(os.path.join(out.root, "downstream"))
    count = write_sales(out.input)
    print(f"wrote {count} sales to {out.input}")
    with _common.windowed_session(args, spark) as session:
        _common.print_banner("Stage 1: revenue per user and minute", session, args)
        stage1 = session.readStream.format("windowed").options(**STAGE1) \
            .option("path", out.input).option("stateLocation", out.state).load()
        s1 = _common.run_to_end(stage1, out, query_name="revenue", spark=session)

        print("\n== Stage 2: the top 3 users of each minute, over stage 1's panes (window=inherit)")
        stage2 = session.readStream.format("windowed").options(**STAGE2) \
            .option("path", out.panes).option("stateLocation", down.state).load()
        s2 = _common.run_to_end(stage2, down, query_name="top_users", spark=session)

        session.sql(f"CREATE OR REPLACE TEMPORARY VIEW top_users USING windowed "
                    f"OPTIONS (path '{down.panes}', table 'current')")
        session.read.parquet(out.input).createOrReplaceTempView("sales")
        _common.show_sql(session, "Top 3 users per minute: stage 2's current table", TOP_SQL, rows=12)
        _common.show_sql(session, "The same as a batch query over the raw sales", BATCH_SQL, rows=12)
        streamed = [tuple(r) for r in session.sql(TOP_SQL).collect()]
        batch = [tuple(r) for r in session.sql(BATCH_SQL).collect()]
        verdict = "equal" if streamed == batch else "DIFFERENT"
        print(f"\n-- stage 2 vs batch: {len(streamed)} rows over {len({r[0] for r in streamed})} minutes, {verdict}")
        _common.plot_timeline(out, title="Stage 1: revenue per user and minute", max_keys=5)
    _common.print_outputs("Chained queries, stage 1", out, s1, with_input=True, with_late=False)
    _common.print_outputs("Chained queries, stage 2", down, s2, with_late=False, with_timeline=False)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
