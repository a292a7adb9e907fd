"""Maintenance by another writer while the query runs (#56 item 2), with ``deltalake``: a
retracting session-window query (default trigger, kept running) is fed parquet files step by step;
between steps, the query still active, the test runs on ``current``, ``triggers``, ``retractions``
and the late table what users run to keep tables in shape: ``optimize.compact()``,
``create_checkpoint()``, ``vacuum`` with retention 0 (the check off), a retention job's
``DELETE`` of closed windows from ``current``, and ``alter.set_table_properties``. The query goes on,
and afterwards the pane log and the late table hold exactly the rows of a clean run of the same
input (nothing lost or duplicated), and ``current`` is the pane log's replay less what the user
deleted. A second test runs compaction, checkpoints and vacuum in a loop in another thread while
the batches run (truly concurrent): the sink's and the source's commits retry over them, and the
tables are the same. How to run them: docs/delta-sql.md, "Maintaining the pane tables"."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest
from deltalake import DeltaTable

from maintenance_helpers import ALL_TABLES, RETENTION_END, assert_as_clean, run_steps, table_uri

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory):
    """The same input, nothing maintained."""
    root = tmp_path_factory.mktemp("clean")
    run_steps(spark, root)
    return root


def _each(root, operation) -> None:
    for t in ALL_TABLES:
        operation(DeltaTable(table_uri(root, t)))


def _vacuum(table: DeltaTable) -> None:
    table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)


def _retire(table: DeltaTable) -> None:
    end = datetime.fromtimestamp(RETENTION_END / 1e6, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    table.delete(f"window_end < '{end}'")


#: What runs after each step, the query active.
BETWEEN = {
    0: lambda root: _each(root, lambda t: t.optimize.compact()),
    1: lambda root: _each(root, lambda t: t.create_checkpoint()),
    2: lambda root: _each(root, _vacuum),
    3: lambda root: _retire(DeltaTable(table_uri(root, "current"))),
    4: lambda root: _each(root, lambda t: t.alter.set_table_properties({"delta.logRetentionDuration": "interval 60 days"})),
    5: lambda root: (_each(root, lambda t: t.optimize.compact()), _each(root, _vacuum)),
}


def test_maintenance_between_batches_of_a_running_query(spark, tmp_path, clean):
    run_steps(spark, tmp_path, lambda step: BETWEEN[step](tmp_path))
    assert_as_clean(tmp_path, clean, retired=True)
    history = {op["operation"] for t in ALL_TABLES for op in DeltaTable(table_uri(tmp_path, t)).history()}
    assert {"OPTIMIZE", "VACUUM START", "VACUUM END", "DELETE", "SET TBLPROPERTIES"} <= history


def test_maintenance_in_a_loop_beside_the_running_batches(spark, tmp_path, clean):
    """Compaction, a checkpoint and vacuum of every table, over and over in another thread while
    the steps run. An operation of the loop that loses a commit race to the query is the user's to
    retry (it is counted, not asserted): the query's own commits must neither fail nor go wrong."""
    done, failed, rounds = threading.Event(), [], [0]

    def loop() -> None:
        while not done.is_set():
            for t in ALL_TABLES:
                for operation in (lambda d: d.optimize.compact(), lambda d: d.create_checkpoint(), _vacuum):
                    try:
                        operation(DeltaTable(table_uri(tmp_path, t)))
                    except Exception as e:   # the maintenance's own commit conflicts: reported below
                        failed.append(f"{t}: {type(e).__name__}: {str(e)[:200]}")
            rounds[0] += 1

    worker = threading.Thread(target=loop, daemon=True)

    def begin(step: int) -> None:
        if step == 0:
            worker.start()

    try:
        run_steps(spark, tmp_path, begin)
    finally:
        done.set()
        worker.join(120)
    print(f"maintenance rounds: {rounds[0]}; its own failed commits: {len(failed)}", *failed[:10], sep="\n")
    assert rounds[0] > 0
    assert_as_clean(tmp_path, clean, retired=False)
