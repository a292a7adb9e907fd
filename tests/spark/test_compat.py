"""State locations, checkpoints and pane tables written by the release before the one-namespace move
(commit 0da195b, plugin package ``datasource``) are read and continued by today's code.

``tests/fixtures/compat_v0_1_0`` holds what that release wrote for the first 400 generated events
(``make_fixture.py`` there says how). The test continues that query to 800 events with today's code
and compares every table with a run of today's code alone over the same micro-batches (400 events,
then a restart to 800): the same rows, but for ``batch_time`` (the wall clock of a batch).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.spark.sink_helpers import TABLE_NAMES, read_delta, rows

pytestmark = pytest.mark.spark

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "compat_v0_1_0"

# The query of make_fixture.py; the fixture must not change when this does, so it is repeated there.
OPTIONS = {
    "source": "generator", "eventsPerBatch": "200", "keys": "6", "eventInterval": "250 milliseconds",
    "disorder": "3 seconds", "lateFraction": "0.05", "seed": "11", "startTime": "2026-01-01T00:00:00Z",
    "timestampColumn": "event_time", "keyColumns": "user_id", "window": "tumbling(10 seconds)",
    "trigger": "AfterWatermark(early=AfterCount(5), late=AfterCount(1))",
    "accumulationMode": "accumulating_and_retracting", "watermark": "bounded(2 seconds)",
    "allowedLateness": "5 seconds", "aggregate": "count(*) AS n, sum(amount) AS total", "shards": "2",
}


def _run(spark, root: Path, total: int, execution: str = "executors") -> None:
    panes = (spark.readStream.format("windowed").options(**OPTIONS).option("totalEvents", str(total))
             .option("execution", execution)
             .option("stateLocation", str(root / "state")).option("lateDataPath", str(root / "late")).load())
    q = (panes.writeStream.format("windowed").option("path", str(root / "panes"))
         .option("checkpointLocation", str(root / "chk")).trigger(availableNow=True).start())
    q.awaitTermination()


def _comparable(table: pa.Table) -> list[tuple]:
    return rows(table.drop_columns([c for c in ("batch_time",) if c in table.column_names]))


@pytest.mark.parametrize("execution", ["executors", "driver"])
def test_a_query_of_the_previous_release_continues_with_the_same_tables(spark, tmp_path, execution):
    """The previous release's query (run on executors) continued on either route."""
    old = tmp_path / "old"
    shutil.copytree(FIXTURE, old, symlinks=True, ignore=shutil.ignore_patterns("*.py"))
    fresh = tmp_path / "fresh"
    _run(spark, fresh, 400)
    first_half = {t: _comparable(read_delta(fresh / "panes", t)) for t in TABLE_NAMES}
    assert first_half == {t: _comparable(read_delta(old / "panes", t)) for t in TABLE_NAMES}

    _run(spark, old, 800, execution)
    _run(spark, fresh, 800, execution)
    for t in TABLE_NAMES:
        got, want = _comparable(read_delta(old / "panes", t)), _comparable(read_delta(fresh / "panes", t))
        assert got == want, t
        assert len(want) > len(first_half[t]) or t == "retractions", t  # the restart added panes
    late_old = _comparable(DeltaTable(str(old / "late")).to_pyarrow_table())
    assert late_old == _comparable(DeltaTable(str(fresh / "late")).to_pyarrow_table())
    assert late_old, "the generator's late fraction put rows into the late table"
