"""Maintenance by delta-spark while the query runs (#56 item 2): the retracting session-window
query of ``tests/spark/test_maintenance_while_running.py`` (default trigger, kept running, fed
parquet files step by step); between steps, the query still active, delta-spark runs on
``current``, ``triggers``, ``retractions`` and the late table ``OPTIMIZE``, ``VACUUM ... RETAIN 0
HOURS`` (``spark.databricks.delta.retentionDurationCheck.enabled=false``, as users do to reclaim
space), a retention job's ``DELETE FROM delta.`.../current` WHERE window_end < ...`` and ``ALTER
TABLE ... SET TBLPROPERTIES``. The query goes on; afterwards the pane log and the late table hold
exactly a clean run's rows and ``current`` is the pane log's replay less the deleted windows."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable

from maintenance_helpers import ALL_TABLES, RETENTION_END, assert_as_clean, run_steps, table_uri

#: slow: delta-spark's OPTIMIZE and VACUUM of four tables, twice, take ~6 minutes on two cores
#: (8:20 for the file, 2026-11-29); the deltalake variant runs in CI.
pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _sql(spark, root, statement: str, tables=ALL_TABLES) -> None:
    for t in tables:
        spark.sql(statement.format(t=f"delta.`{table_uri(root, t)}`"))


def _vacuum(spark, root) -> None:
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        _sql(spark, root, "VACUUM {t} RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")


END = datetime.fromtimestamp(RETENTION_END / 1e6, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
#: What runs after each step, the query active.
BETWEEN = {
    0: lambda s, root: _sql(s, root, "OPTIMIZE {t}"),
    1: _vacuum,
    2: lambda s, root: _sql(s, root, f"DELETE FROM {{t}} WHERE window_end < TIMESTAMP '{END}'", ["current"]),
    3: lambda s, root: _sql(s, root, "ALTER TABLE {t} SET TBLPROPERTIES "
                                     "('delta.logRetentionDuration' = 'interval 60 days')"),
    4: lambda s, root: (_sql(s, root, "OPTIMIZE {t}"), _vacuum(s, root)),
    5: lambda s, root: None,
}


def test_delta_spark_maintenance_between_batches_of_a_running_query(delta_spark, tmp_path):
    run_steps(delta_spark, tmp_path / "clean")
    run_steps(delta_spark, tmp_path / "run", lambda step: BETWEEN[step](delta_spark, tmp_path / "run"))
    assert_as_clean(tmp_path / "run", tmp_path / "clean", retired=True)
    history = {op["operation"] for t in ALL_TABLES for op in DeltaTable(table_uri(tmp_path / "run", t)).history()}
    assert {"OPTIMIZE", "VACUUM START", "VACUUM END", "DELETE", "SET TBLPROPERTIES"} <= history
