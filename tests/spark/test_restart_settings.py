"""A restart with other session settings gives identical tables (#56): a query stopped after its
first files and restarted from its checkpoint under another ``spark.sql.session.timeZone`` and
``spark.sql.shuffle.partitions``, or in a new process under another ``spark.serializer``, writes
the tables a run that kept the settings writes, through ``format("windowed")`` and through
``window(df)``. The state and the offsets hold event times as UTC microseconds, so the session's
zone changes no window; ``window(df)``'s shuffle into key shards takes its partition count from
``shards``, not from ``spark.sql.shuffle.partitions``; what crosses between the JVM and the Python
workers is Arrow batches and pickles, which ``spark.serializer`` (Java or Kryo) does not touch."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark._settings_job import run
from tests.spark.sink_helpers import TABLE_NAMES, pane_table, rows

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
JOB = os.path.join(os.path.dirname(__file__), "_settings_job.py")
JAVA = "org.apache.spark.serializer.JavaSerializer"
KRYO = "org.apache.spark.serializer.KryoSerializer"


def _file(directory, b: int) -> None:
    ts = [T0 + (b * 40 + i) * 1_000_000 + (i % 3) * 7_000_000 for i in range(40)]
    pq.write_table(pa.table({"k": [f"k{i % 5}" for i in range(40)], "ts": ts, "v": list(range(40))}, schema=SCHEMA),
                   directory / f"part-{b}.parquet")
    os.utime(directory / f"part-{b}.parquet", (1_700_000_000 + b * 10,) * 2)   # Spark's file source reads by mtime


def _tables(out) -> dict[str, list[tuple]]:
    return {t: rows(pane_table(out / "panes" / t).drop_columns(["batch_time"])) for t in TABLE_NAMES}


def _two_runs(out, first, restart) -> dict[str, list[tuple]]:
    """Two files, ``first(out)``; two more files, ``restart(out)`` from the checkpoint ``first`` left."""
    (out / "events").mkdir(parents=True)
    _file(out / "events", 0)
    _file(out / "events", 1)
    first(out)
    before = len(_tables(out)["triggers"])
    _file(out / "events", 2)
    _file(out / "events", 3)
    restart(out)
    tables = _tables(out)
    assert len(tables["triggers"]) > before, "the restart fired panes of the new files"
    return tables


def _in_session(spark, route: str, settings: dict[str, str] | None = None):
    """A run of ``route`` in the test session, under the session ``settings`` for its duration."""
    def go(out) -> None:
        saved = {k: spark.conf.get(k) for k in settings or {}}
        try:
            for k, v in (settings or {}).items():
                spark.conf.set(k, v)
            run(spark, out, route)
        finally:
            for k, v in saved.items():
                spark.conf.set(k, v)
    return go


def _in_process(route: str, serializer: str):
    """A run of ``route`` in a new process (its own JVM) under ``spark.serializer`` = ``serializer``."""
    def go(out) -> None:
        done = subprocess.run([sys.executable, JOB, route, str(out), serializer], cwd=str(out),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-6000:]
        assert done.stdout.split()[-1] == serializer   # the job's SparkContext ran with it
    return go


@pytest.fixture(scope="module")
def kept(spark, tmp_path_factory):
    """``kept(route)``: the tables of a run and a restart in the test session with its settings
    unchanged (made once per route for the module's tests)."""
    made = {}

    def tables(route: str) -> dict[str, list[tuple]]:
        if route not in made:
            made[route] = _two_runs(tmp_path_factory.mktemp(f"kept-{route}"), _in_session(spark, route),
                                    _in_session(spark, route))
            assert made[route]["current"] and made[route]["retractions"]
        return made[route]
    return tables


@pytest.mark.parametrize("route", ["source", "window_df"])
def test_a_restart_under_another_time_zone_and_shuffle_partitions_writes_the_same_tables(spark, tmp_path, kept, route):
    changed = _two_runs(tmp_path / "changed", _in_session(spark, route),
                        _in_session(spark, route, {"spark.sql.session.timeZone": "America/Los_Angeles",
                                                   "spark.sql.shuffle.partitions": "5"}))
    assert changed == kept(route)


@pytest.mark.parametrize("route, first, restart", [
    ("source", JAVA, KRYO), ("window_df", KRYO, JAVA),
    pytest.param("driver", JAVA, KRYO, marks=pytest.mark.slow),
    pytest.param("source", KRYO, JAVA, marks=pytest.mark.slow),
    pytest.param("window_df", JAVA, KRYO, marks=pytest.mark.slow)])
def test_a_restart_in_a_new_process_under_another_serializer_writes_the_same_tables(spark, tmp_path, kept, route,
                                                                                   first, restart):
    """The test session runs the Java serializer (Spark's default); the Kryo side is a process of
    its own (a new JVM: ~30 s on 2 busy cores, so CI runs the two routes once, both directions among
    them; the other cases, the driver route's included, are ``slow``)."""
    assert spark.sparkContext.getConf().get("spark.serializer", JAVA) == JAVA

    def side(serializer: str):
        return _in_session(spark, route) if serializer == JAVA else _in_process(route, KRYO)

    assert _two_runs(tmp_path / "changed", side(first), side(restart)) == kept(route)
