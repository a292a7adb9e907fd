"""A long-running sink stays flat: MERGE cost follows the batch, and the tables are kept in shape.

Direct tests (``PaneStreamWriter.write`` as a task, ``commit`` as the driver, no stream) over the
``test_panes`` model (windows move 20 s per batch): the bytes each batch writes to ``current``
do not grow with the number of earlier batches; compaction and vacuum keep every table's rows
identical to the model; a replay after compaction is still skipped (app transactions survive); a
reader of an older version within the retention still reads it; log checkpoints appear.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import pane_source
from spark_windowing.datasource.tables import delta
from spark_windowing.datasource._types import arrow_to_spark_schema
from spark_windowing.datasource.tables.maintenance import MaintenanceOptions, last_checkpoint_version, migrate_current
from spark_windowing.datasource.sink.writer import PaneStreamWriter
from spark_windowing.datasource.sink.metrics import format_sink_metrics, read_batch_metrics
from pane_source import ARROW_SCHEMA, expected_tables, simulate
from sink_helpers import TABLE_NAMES, committed_files, pane_table, rows, table_rows
from spark_windowing.errors import OptionError

SPARK_SCHEMA = arrow_to_spark_schema(ARROW_SCHEMA)
NO_UPKEEP = {"compactEvery": "0", "vacuumEvery": "0"}


def _writer(path: Path, **options: str) -> PaneStreamWriter:
    return PaneStreamWriter({"path": str(path), "appId": "test-app", **options}, SPARK_SCHEMA, False)


def _run(writer: PaneStreamWriter, batches: range, keys: int) -> None:
    model = simulate(batches.stop, keys)
    for b in batches:
        table = pa.Table.from_pylist([dict(zip(pane_source.COLUMNS, r)) for r in model[b]], schema=ARROW_SCHEMA)
        writer.commit([writer.write(iter(table.to_batches(max_chunksize=50)))], b)


def _model(batches: int, keys: int) -> dict[str, list[tuple]]:
    return {t: rows(v) for t, v in expected_tables(batches, keys).items()}


def _files_on_disk(path: Path, table: str) -> set[str]:
    """Parquet files under a table directory, partition directories included."""
    return {p.name for p in (path / table).rglob("*.parquet") if "_delta_log" not in p.parts}


def _current_bytes(path: Path, batches: range) -> list[int]:
    return [read_batch_metrics(str(path), b)["tables"]["current"]["bytes_added"] for b in batches]


def test_bytes_written_to_current_per_batch_do_not_grow_with_earlier_batches(tmp_path):
    writer = _writer(tmp_path, currentBucket="1 minute", **NO_UPKEEP)
    _run(writer, range(45), keys=30)

    written = _current_bytes(tmp_path, range(45))
    early, late = max(written[6:15]), max(written[36:45])
    assert late <= 1.3 * early, written
    assert table_rows(tmp_path) == _model(45, 30)
    current = DeltaTable(str(tmp_path / "current"))
    assert current.metadata().partition_columns == [delta.BUCKET_COLUMN]
    merge = read_batch_metrics(str(tmp_path), 44)["tables"]["current"]
    assert merge["files_scanned"] <= 3 < len(current.file_uris()) / 5     # only the batch's buckets
    phases = read_batch_metrics(str(tmp_path), 44)["commit_ms"]          # the commit's split, in ms
    assert set(phases) == {"append", "merge", "close", "clean", "upkeep"} and phases["merge"] > 0
    assert " ms (" in format_sink_metrics(read_batch_metrics(str(tmp_path), 44))


def test_current_of_the_first_layout_keeps_working(tmp_path):
    """A ``current`` created before the bucket column (unpartitioned) is merged as before, and
    ``migrate_current`` moves it to the partitioned layout, exactly once preserved."""
    schema = delta.table_pane_schema(ARROW_SCHEMA)
    DeltaTable.create(str(tmp_path / "current"), schema, name="panes_current",
                      configuration=delta._configuration("current", schema), raise_if_key_not_exists=False)
    writer = _writer(tmp_path, **NO_UPKEEP)
    _run(writer, range(8), keys=4)

    assert table_rows(tmp_path) == _model(8, 4)
    assert delta.current_bucket_seconds(DeltaTable(str(tmp_path / "current"))) is None
    with pytest.raises(OptionError, match="'currentBucket'.*created with another bucket"):
        _writer(tmp_path, currentBucket="1 hour")

    assert migrate_current(str(tmp_path), "1 minute") == len(_model(8, 4)["current"])
    assert migrate_current(str(tmp_path)) == 0                          # once only
    current = DeltaTable(str(tmp_path / "current"))
    assert delta.current_bucket_seconds(current) == 60 and current.transaction_version("test-app") == 7
    _run(_writer(tmp_path, **NO_UPKEEP), range(7, 12), keys=4)          # replays 7, then goes on

    assert table_rows(tmp_path) == _model(12, 4)
    assert read_batch_metrics(str(tmp_path), 11)["tables"]["current"]["files_scanned"] <= 3


def test_compaction_and_vacuum_keep_the_rows_and_drop_the_small_files(tmp_path):
    writer = _writer(tmp_path, compactEvery="5", vacuumEvery="5", vacuumRetention="0 seconds")
    _run(writer, range(21), keys=6)

    assert table_rows(tmp_path) == _model(21, 6)
    for t in TABLE_NAMES:            # vacuum left only the live files, compaction few of them
        assert _files_on_disk(tmp_path, t) == committed_files(tmp_path, t)
        assert len(committed_files(tmp_path, t)) < 10
    upkeep = read_batch_metrics(str(tmp_path), 20)["tables"]["triggers"]["maintenance"]
    assert upkeep["compacted"]["numFilesRemoved"] > 1 and upkeep["vacuumed"] > 0
    assert DeltaTable(str(tmp_path / "triggers")).metadata().configuration[
        "delta.deletedFileRetentionDuration"] == "interval 0 seconds"


def test_a_replay_after_compaction_is_still_skipped(tmp_path):
    writer = _writer(tmp_path, compactEvery="4", vacuumEvery="0")
    _run(writer, range(9), keys=4)                   # batch 8 compacts
    before = {t: DeltaTable(str(tmp_path / t)).version() for t in TABLE_NAMES}
    history = DeltaTable(str(tmp_path / "triggers")).history(1)[0]
    assert history["operation"] == "OPTIMIZE"

    _run(writer, range(8, 9), keys=4)                # Spark replays batch 8

    assert {t: DeltaTable(str(tmp_path / t)).version() for t in TABLE_NAMES} == before
    assert table_rows(tmp_path) == _model(9, 4)
    assert {DeltaTable(str(tmp_path / t)).transaction_version("test-app") for t in TABLE_NAMES} == {8}


def test_a_reader_of_an_older_version_within_retention_still_works(tmp_path):
    writer = _writer(tmp_path, compactEvery="3", vacuumEvery="3", vacuumRetention="1 hour")
    _run(writer, range(4), keys=4)
    old = DeltaTable(str(tmp_path / "current")).version()
    expected = pane_table(tmp_path / "current", old)
    _run(writer, range(4, 13), keys=4)               # MERGEs, compactions and vacuums since

    assert rows(pane_table(tmp_path / "current", old)) == rows(expected)
    assert table_rows(tmp_path) == _model(13, 4)


def test_log_checkpoints_every_n_batches(tmp_path):
    writer = _writer(tmp_path, checkpointEvery="5", **NO_UPKEEP)
    _run(writer, range(12), keys=3)

    for t in TABLE_NAMES:
        version = DeltaTable(str(tmp_path / t)).version()
        assert version - last_checkpoint_version(str(tmp_path / t)) <= 2   # batch 10's
        assert (tmp_path / t / "_delta_log" / f"{last_checkpoint_version(str(tmp_path / t)):020d}.checkpoint.parquet").exists()


@pytest.mark.parametrize("option, value, accepted", [
    ("compactEvery", "-1", "an integer >= 0"),
    ("vacuumEvery", "often", "an integer >= 0"),
    ("checkpointEvery", "0", "a positive integer"),
    ("vacuumRetention", "a week", "a Spark interval"),
    ("vacuumRetention", "1.5 seconds", "whole seconds"),
    ("currentBucket", "0 seconds", "greater than zero"),
])
def test_bad_upkeep_options_fail_naming_the_option(tmp_path, option, value, accepted):
    with pytest.raises(OptionError, match=f"invalid option '{option}' = '{value}'.*{accepted}"):
        _writer(tmp_path, **{option: value})


def test_upkeep_options_parse():
    opts = MaintenanceOptions.parse({"compactevery": "10", "vacuumretention": "2 hours", "checkpointevery": "7"})
    assert opts == MaintenanceOptions(compact_every=10, vacuum_every=50, vacuum_retention_us=7_200_000_000,
                                      checkpoint_every=7)
    assert opts.retention_property == "interval 7200 seconds"
    assert json.loads(json.dumps(MaintenanceOptions().__dict__))["vacuum_retention_us"] == 7 * 86_400_000_000


@pytest.mark.spark
def test_the_source_keeps_its_late_table_in_shape_with_the_same_rows(spark, tmp_path):
    """The stream reader runs the same upkeep on its ``lateDataPath`` table from its commit:
    compactions every 3 micro-batches, vacuums with no retention, a log checkpoint every 4; the
    late rows equal those of a run without upkeep."""
    from tests.spark._helpers import rows as pane_rows, run_noop
    base = {"source": "generator", "totalEvents": "1800", "eventsPerBatch": "150", "keys": "8",
            "eventInterval": "200 milliseconds", "disorder": "2 seconds", "timestampColumn": "event_time",
            "keyColumns": "user_id", "window": "tumbling(2 seconds)", "lateFraction": "0.1",
            "aggregate": "count(*) AS n", "watermark": "bounded(3 seconds)"}
    kept, plain = tmp_path / "late-kept", tmp_path / "late-plain"
    run_noop(spark, {**base, "stateLocation": str(tmp_path / "s1"), "lateDataPath": str(kept),
                     "compactEvery": "3", "vacuumEvery": "3", "vacuumRetention": "0 seconds",
                     "checkpointEvery": "4"}, str(tmp_path / "c1"))
    run_noop(spark, {**base, "stateLocation": str(tmp_path / "s2"), "lateDataPath": str(plain), **NO_UPKEEP},
             str(tmp_path / "c2"))

    late = DeltaTable(str(kept))
    assert late.to_pyarrow_table().num_rows > 20
    assert pane_rows(late.to_pyarrow_table(), drop=("batch_time",)) == \
        pane_rows(DeltaTable(str(plain)).to_pyarrow_table(), drop=("batch_time",))
    operations = [h["operation"] for h in late.history()]
    assert "OPTIMIZE" in operations and "VACUUM END" in operations
    files = {p.name for p in kept.rglob("*.parquet") if "_delta_log" not in p.parts}
    assert files == committed_files(tmp_path, kept.name)       # vacuum left only the live files
    assert len(files) < operations.count("WRITE")                # compaction merged small files
    assert last_checkpoint_version(str(kept)) is not None


def test_vacuum_deletes_what_left_the_table_before_the_last_log_checkpoint(tmp_path):
    """Log checkpoints between vacuums: a file removed before a checkpoint is still deleted once
    its retention has passed (delta-rs's default "lite" vacuum only sees removals after the last
    checkpoint, so those files stayed forever: the one-hour soak found 579 in `retractions`)."""
    writer = _writer(tmp_path, compactEvery="3", vacuumEvery="4", vacuumRetention="0 seconds",
                     checkpointEvery="2")
    _run(writer, range(25), keys=5)

    assert table_rows(tmp_path) == _model(25, 5)
    for t in TABLE_NAMES:
        assert last_checkpoint_version(str(tmp_path / t)) is not None
        assert _files_on_disk(tmp_path, t) == committed_files(tmp_path, t)
