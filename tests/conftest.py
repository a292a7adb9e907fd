"""Shared fixtures. Spark starts lazily, once per test session, only for tests that ask for it."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local SparkSession (2 cores) with the ``windowed`` format registered; its warehouse in the
    session's temporary directory (the suite runs in parallel processes: ``scripts/test.sh``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_windowing

    session = (SparkSession.builder.master("local[2]").appName("spark-windowing-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "2g")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def object_store(tmp_path_factory):
    """A real S3-API server (moto) behind a counting, fault-injecting proxy, both on 127.0.0.1
    (``tests/objectstore.py``); its endpoint and credentials are put into ``os.environ`` for the
    session, where pyarrow and deltalake read them."""
    from tests.objectstore import ObjectStore

    yield from _serving(ObjectStore(str(tmp_path_factory.mktemp("s3"))))


def _serving(store):
    """Yield ``store`` (a started test server) with its ``env`` in ``os.environ``; then restore the
    environment and stop it."""
    saved = {k: os.environ.get(k) for k in store.env}
    os.environ.update(store.env)
    try:
        yield store
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        store.stop()


def _emulator(emulator_class, workdir: str):
    """Start ``emulator_class`` (``tests/cloud_emulators.py``) with its endpoint and credentials in
    ``os.environ``; yield it; stop it and restore the environment. Where it cannot be had
    (``missing()``) the test is skipped saying why, and fails in CI (``CI=true``), whose set-up
    installs every emulator."""
    reason = emulator_class.missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{emulator_class.__name__}: {reason}")
        pytest.skip(reason)
    yield from _serving(emulator_class(workdir))


@pytest.fixture(scope="module")
def gcs_store(tmp_path_factory):
    """fake-gcs-server on 127.0.0.1 with the bucket ``lake``; ``STORAGE_EMULATOR_HOST`` set for the module's tests."""
    from tests.cloud_emulators import GcsEmulator
    yield from _emulator(GcsEmulator, str(tmp_path_factory.mktemp("gcs")))


@pytest.fixture(scope="module")
def azure_store(tmp_path_factory):
    """Azurite's blob service on 127.0.0.1 with the container ``lake``;
    ``AZURE_STORAGE_CONNECTION_STRING`` set for the module's tests."""
    from tests.cloud_emulators import AzureEmulator
    yield from _emulator(AzureEmulator, str(tmp_path_factory.mktemp("azurite")))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real single-node Apache Kafka broker (KRaft) on 127.0.0.1, fetched from Maven Central on
    first use (``scripts/kafka_broker.py``); one per test session."""
    from tests.spark.kafka_helpers import KafkaBroker
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker")).start()
    yield broker
    broker.stop()


#: The suite's longest files, longest first (``--durations=0`` of a whole run, 2026-12-07: 95-450 s
#: each). ``scripts/test.sh`` runs the suite in two xdist processes a file at a time, in collection
#: order (``--no-loadscope-reorder``); starting these first and ending with the many short files
#: lets both processes finish together. Before, xdist ordered files by test count, which put these
#: (one to four tests each) last: one process ran a crash test for minutes while the other idled.
LONGEST_FIRST = (
    "spark/test_declarative_pipelines.py", "spark/test_window_df.py", "cluster/test_cluster.py",
    "spark/test_source_replay.py", "spark/test_restart_settings.py", "spark/test_window_df_pipeline.py",
    "spark/test_notebook_day.py", "spark/test_window_df_clock.py", "spark/test_examples.py",
    "spark/test_driver_execution.py", "spark/test_docs_blocks.py", "spark/test_window_df_crash.py",
    "spark/test_kafka.py", "spark/test_rescale.py", "spark/test_wheel.py", "spark/test_nexmark.py",
    "spark/test_sink_crash.py", "spark/test_late_table_lost.py", "spark/test_no_register.py",
)


def pytest_collection_modifyitems(config, items):
    """Longest files first (``LONGEST_FIRST``), then the rest in collection order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item):
        path = item.nodeid.split("::", 1)[0].removeprefix("tests/")
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: a file's tests keep their order
