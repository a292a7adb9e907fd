"""``spark_windowing.window(df)`` in a Spark Declarative Pipeline (docs/declarative-pipelines.md):
the form that works and the one that cannot.

* **Works**: the windowed DataFrame built at the module's top level, over a DataFrame read from
  files (not a table of the pipeline), returned by the table's query function. ``window`` reads
  the DataFrame's schema, and SDP allows that outside query functions only.
* **Works**: ``window(spark.readStream.table(<another table of the pipeline>), schema=...)`` inside
  the query function: with the schema declared ``window`` analyzes nothing.
* **Cannot**: ``window(df)`` without ``schema`` inside a query function: SDP refuses any DataFrame
  analysis there (``ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION``), and a dry run says so.

Two ``spark-pipelines`` runs and one dry run; the windows of each run are checked against counts
computed here: the windows the watermark closed (``window(df)`` fires a window in the first batch
after its end is passed, the last input's in a batch without input).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.test_declarative_pipelines import _ok, _spark_pipelines, _warehouse

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000
SEC = 1_000_000
FILES = [[("a", 1), ("b", 2), ("a", 12)], [("b", 15), ("a", 25), ("b", 31)], [("a", 44), ("b", 47)]]

SPEC = """name: window_df_pipeline
storage: {storage}
libraries:
  - glob:
      include: transformations/**
"""
MODULE = '''import spark_windowing
from pyspark import pipelines as dp

EVENTS = spark.readStream.schema("k string, ts timestamp").option("maxFilesPerTrigger", 1).parquet({events!r})  # noqa: F821
OPTIONS = dict(window="tumbling(10 seconds)", aggregate="count(*) AS n", timestampColumn="ts", keyColumns="k",
               shards="1", stateLocation={state!r})
{body}
'''
AT_TOP = '''PANES = spark_windowing.window(EVENTS, **OPTIONS)


@dp.table
def window_df_panes():
    return PANES
'''
IN_FUNCTION = '''@dp.table
def window_df_panes():
    return spark_windowing.window(EVENTS, **OPTIONS)
'''
OVER_A_TABLE = '''@dp.table
def events():
    return EVENTS


@dp.table
def window_df_panes():
    # another table of the pipeline, one of its files a micro-batch; schema= spares window() the
    # DataFrame analysis SDP refuses inside a query function
    upstream = spark.readStream.option("maxFilesPerTrigger", 1).table("events")  # noqa: F821
    return spark_windowing.window(upstream, schema="k string, ts timestamp", **OPTIONS)
'''


def _pipeline(folder: Path, body: str) -> Path:
    (folder / "transformations").mkdir(parents=True)
    (folder / "events").mkdir()
    for i, rows in enumerate(FILES):
        pq.write_table(pa.table({"k": [k for k, _ in rows],
                                 "ts": pa.array([T0 + s * SEC for _, s in rows], pa.timestamp("us", tz="UTC"))}),
                       folder / "events" / f"part-{i}.parquet")
        os.utime(folder / "events" / f"part-{i}.parquet", (1_700_000_000 + i * 10,) * 2)  # Spark reads by mtime
    (folder / "spark-pipeline.yml").write_text(SPEC.format(storage=(folder / "storage").as_uri()))
    (folder / "transformations" / "panes.py").write_text(
        MODULE.format(events=str(folder / "events"), state=str(folder / "state"), body=body))
    return folder


def _expected() -> list[tuple[str, int, int]]:
    """(key, window start in s, count) of the windows ending at or before the largest event time
    (the last batch's watermark: window(df) fires them in a batch without input)."""
    closed_by = max(s for rows in FILES for _, s in rows)
    counts: dict[tuple[str, int], int] = {}
    for rows in FILES:
        for k, s in rows:
            counts[(k, s // 10 * 10)] = counts.get((k, s // 10 * 10), 0) + 1
    return sorted((k, start, n) for (k, start), n in counts.items() if start + 10 <= closed_by)


def test_window_df_built_at_the_top_of_a_pipeline_module_is_a_streaming_table(tmp_path):
    folder = _pipeline(tmp_path / "top", AT_TOP)
    _ok(_spark_pipelines(folder, "run"))
    table = _warehouse(folder, "window_df_panes")
    start = table.column("window_start")
    micros = start.cast(pa.timestamp("us", tz=start.type.tz)).cast(pa.int64())   # Spark's parquet: ns
    starts = [(v - T0) // SEC for v in micros.to_pylist()]
    got = sorted(zip(table.column("k").to_pylist(), starts, table.column("n").to_pylist()))
    assert got == _expected() and len(got) >= 4


def test_window_df_inside_a_query_function_fails_the_dry_run_saying_why(tmp_path):
    folder = _pipeline(tmp_path / "inside", IN_FUNCTION)
    done = _spark_pipelines(folder, "dry-run")
    assert done.returncode != 0
    assert "ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION" in done.stdout + done.stderr


def test_window_df_over_another_table_of_the_pipeline_with_a_declared_schema(tmp_path):
    folder = _pipeline(tmp_path / "table", OVER_A_TABLE)
    done = _spark_pipelines(folder, "run")
    _ok(done)
    table = _warehouse(folder, "window_df_panes")
    start = table.column("window_start")
    micros = start.cast(pa.timestamp("us", tz=start.type.tz)).cast(pa.int64())
    starts = [(v - T0) // SEC for v in micros.to_pylist()]
    got = sorted(zip(table.column("k").to_pylist(), starts, table.column("n").to_pylist()))
    assert got == _expected() and len(got) >= 4
