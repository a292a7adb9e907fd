"""The docs' Python blocks that need the Delta interoperability virtualenv (marked
``<!-- docs-test: delta: ... -->``): delta-spark's session builder with the project's Ivy settings,
and DuckDB reading a pane table offline. Each runs with its example paths replaced by real ones
(``tests.docs_blocks.with_real_places``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_windowing.tools.packages import ivy_cache_dir
from tests.docs_blocks import all_blocks, with_real_places

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _block(needle: str):
    (block,) = [b for b in all_blocks() if b.kind == "delta" and needle in b.code]
    return block


def test_the_delta_spark_session_recipe_runs_with_a_maven_cache_of_poms_without_jars(tmp_path):
    """docs/delta-sql.md's builder, run as a job with a poisoned ~/.m2 (tests/delta/poisoned_m2.py):
    the session starts, writes a Delta table with delta-spark and reads it back."""
    from poisoned_m2 import poisoned_home
    import delta_session

    home = poisoned_home(tmp_path / "home")
    code = with_real_places(_block("spark.jars.ivySettings"), {
        "io.delta:delta-spark_4.2_2.13:4.4.0": delta_session.delta_package(),
        "/home/me/.cache/spark-windowing/ivy-central": ivy_cache_dir(),
        "SparkSession.builder": f'SparkSession.builder.master("local[1]")'
                                f'.config("spark.driver.extraJavaOptions", "-Duser.home={home}")'})
    out = tmp_path / "t"
    code += (f"\nspark.range(4).write.format('delta').save({str(out)!r})"
             f"\nprint('ROWS', spark.read.format('delta').load({str(out)!r}).count())\nspark.stop()\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ROWS 4" in done.stdout.splitlines()


def test_the_duckdb_block_reads_a_pane_table_offline(tmp_path):
    table = tmp_path / "current"
    write_deltalake(str(table), pa.table({"user_id": ["a", "b", "c"], "n": [1, 2, 3]}))
    code = with_real_places(_block("duckdb"), {"/lake/panes/clicks/current": str(table)})
    printed = io.StringIO()
    with redirect_stdout(printed):
        exec(compile(code, "docs/delta-sql.md", "exec"), {"__name__": "__docs__"})
    assert printed.getvalue().strip() == "(3,)"
