"""Fixtures of the interoperability tests: one delta-spark SparkSession for the whole run.

These tests need JVM packages that Maven Central has only for some Spark versions (delta-spark,
Spark's Kafka connector; see
``scripts/_setup_delta.sh``): ``scripts/test.sh`` runs them in a second virtualenv on the newest
pyspark delta-spark supports. In a virtualenv without delta-spark they are skipped, saying so.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "spark")]   # delta_session; pane_source, sink helpers


def _have_delta_spark() -> bool:
    # by its distribution, not find_spec("delta"): with tests/ on sys.path (pytest's rootdir
    # conftest), this very directory would pass for a ``delta`` namespace package
    try:
        distribution("delta-spark")
    except PackageNotFoundError:
        return False
    return True


HAVE_DELTA_SPARK = _have_delta_spark()


def pytest_collection_modifyitems(config, items):
    if HAVE_DELTA_SPARK:
        return
    skip = pytest.mark.skip(reason="needs pyspark 4.2 with delta-spark and Spark's Kafka connector: "
                                   "scripts/test.sh runs these in .venv-delta")
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents and item.get_closest_marker("spark"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory):
    """A local SparkSession with delta-spark, the ``windowed`` and ``test_panes`` formats."""
    import spark_windowing
    import delta_session
    import pane_source

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = delta_session.builder("spark-windowing-delta-tests", warehouse=str(warehouse)).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(session)
    pane_source.register(session)
    yield session
    session.stop()
