"""Flink SQL's window TVFs over the events of ``spark_vs_native.py``: the Flink side of that benchmark.

    python benchmarks/spark_vs_native.py --events 400000 --keys 10000 --engines native,ours,flink
    .venv-flink/bin/python benchmarks/flink_sql.py --dir DIR --kind tumbling --runs 3 --delay 10

Run by ``spark_vs_native.py`` (engine ``flink``) with the interpreter of ``.venv-flink``, which
``scripts/setup_flink.sh`` makes (PyFlink ``apache-flink`` from PyPI, Flink's Parquet format jar
from Maven Central, both cached; idempotent). PyFlink runs Flink's own mini cluster in its JVM,
parallelism 2 (``local[2]``'s two task slots on the Spark side).

The events are ``spark_vs_native.py``'s Parquet files (``k``, ``ts``, ``v``). Flink 2.3's Parquet
reader has no mapping for a UTC-adjusted INT64 timestamp column, so a copy of the files with
``ts`` as INT64 microseconds (the same values, the same files and row order) is written once next
to them, and the table derives ``rt`` from it. The query is the benchmark's, in Flink SQL:

* ``tumbling``: ``TUMBLE(TABLE events, DESCRIPTOR(rt), INTERVAL '1' MINUTE)``;
* ``sliding``: ``HOP(..., INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)``;
* ``session``: ``SESSION(TABLE events PARTITION BY k, DESCRIPTOR(rt), INTERVAL '30' SECOND)``;

each ``GROUP BY k, window_start, window_end`` with ``SUM(v), COUNT(*)``, a watermark of
``rt - --delay seconds``, into the ``blackhole`` sink. The filesystem source is bounded: at its
end Flink's watermark goes to the end of time and every window fires, as ``availableNow`` with
``endOfInput`` on our side. One untimed job first (the JVM's warm-up, as the Spark side's
warm-up query); then ``--runs`` timed jobs, each from submission to its end. Prints one line
``RESULT [seconds, ...]``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq

WINDOWS = {
    "tumbling": "TUMBLE(TABLE events, DESCRIPTOR(rt), INTERVAL '1' MINUTE)",
    "sliding": "HOP(TABLE events, DESCRIPTOR(rt), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)",
    "session": "SESSION(TABLE events PARTITION BY k, DESCRIPTOR(rt), INTERVAL '30' SECOND)",
}


def flink_copy(directory: str) -> str:
    """The events with ``ts`` as INT64 microseconds, once, next to ``directory``."""
    out = directory.rstrip("/") + "-flink"
    if os.path.exists(os.path.join(out, "_SUCCESS")):
        return out
    os.makedirs(out, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(directory, "*.parquet"))):
        table = pq.read_table(path)
        ts = table.column("ts").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
        table = table.set_column(table.schema.get_field_index("ts"), "ts_us", ts)
        pq.write_table(table, os.path.join(out, os.path.basename(path)))
    open(os.path.join(out, "_SUCCESS"), "w").close()
    return out


def environment(jars: list[str]):
    from pyflink.table import EnvironmentSettings, TableEnvironment
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = env.get_config()
    config.set("pipeline.jars", ";".join(f"file://{os.path.abspath(j)}" for j in jars))
    config.set("parallelism.default", "2")
    config.set("table.exec.resource.default-parallelism", "2")
    return env


def run_job(env, directory: str, kind: str, delay_s: int, tag: str) -> float:
    """One job over the files in ``directory``; seconds from submission to its end."""
    env.execute_sql(f"DROP TABLE IF EXISTS events_{tag}")
    env.execute_sql(f"""
        CREATE TEMPORARY TABLE events_{tag} (
            k BIGINT, ts_us BIGINT, v DOUBLE,
            rt AS TO_TIMESTAMP_LTZ(ts_us / 1000, 3),
            WATERMARK FOR rt AS rt - INTERVAL '{delay_s}' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = 'file://{os.path.abspath(directory)}', 'format' = 'parquet')""")
    env.execute_sql(f"""
        CREATE TEMPORARY TABLE out_{tag} (k BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
                                          total DOUBLE, n BIGINT) WITH ('connector' = 'blackhole')""")
    window = WINDOWS[kind].replace("TABLE events", f"TABLE events_{tag}")
    started = time.monotonic()
    env.execute_sql(f"""
        INSERT INTO out_{tag}
        SELECT k, window_start, window_end, SUM(v), COUNT(*)
        FROM TABLE({window}) GROUP BY k, window_start, window_end""").wait()
    return time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="spark_vs_native.py's events directory")
    ap.add_argument("--kind", choices=sorted(WINDOWS), required=True)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--delay", type=int, default=10, help="watermark delay, seconds (the benchmark's --disorder)")
    ap.add_argument("--jar", action="append", required=True,
                    help="flink-sql-parquet and the Hadoop client jars it needs (setup_flink.sh prints them)")
    args = ap.parse_args()
    directory = flink_copy(args.dir)
    env = environment(args.jar)
    run_job(env, directory, args.kind, args.delay, "warmup")
    times = [run_job(env, directory, args.kind, args.delay, f"r{i}") for i in range(args.runs)]
    print("RESULT " + json.dumps(times), flush=True)


if __name__ == "__main__":
    main()
