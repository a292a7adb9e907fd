"""A late table (``lateDataPath``) deleted alone before a restart, the checkpoint and state kept:
the restarted reader refuses at its first offset with an ``OptionError`` naming ``lateDataPath``,
what is missing and the two ways out (restore it; or a new checkpointLocation and stateLocation),
and writes nothing. Creating it empty would lose every late row the state's committed batches
wrote, silently. A late table the state never recorded (``lateDataPath`` added on a restart) or a
state without committed batches is not refused. Spark-level: ``tests/spark/test_late_table_lost.py``."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
from spark_windowing.datasource.tables.late import check_late_table, record_late_table
from spark_windowing.errors import OptionError
from tests.plugin.test_rescale_reader import _options

REFUSED = r"(?s)'lateDataPath'.*{what}.*committed micro-batches.*restored.*new checkpointLocation and a new stateLocation"


def _batches(options: dict, n: int, start: dict | None = None) -> dict:
    """``n`` micro-batches of a reader over ``options`` from ``start`` (a first start: None)."""
    reader = WindowedStreamReader(options, stream_schema(options))
    start = start or reader.initialOffset()
    for _ in range(n):
        end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
        [b for p in reader.partitions(start, end) for b in reader.read(p)]
        reader.commit(end)
        start = end
    return start


def _restart(options: dict, start: dict) -> None:
    reader = WindowedStreamReader(options, stream_schema(options))     # Spark restarts from its log
    reader.latestOffset(start, reader.getDefaultReadLimit())


@pytest.fixture()
def ran(tmp_path):
    """Three batches with a late table: the options, the offset they reached, the late table's rows."""
    options = {**_options(str(tmp_path / "state"), 2), "lateDataPath": str(tmp_path / "late")}
    start = _batches(options, 3)
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table()
    assert late.num_rows > 0          # the generator's late events went there
    return options, start, late


def test_a_restart_whose_late_table_was_deleted_is_refused_and_creates_nothing(tmp_path, ran):
    options, start, _ = ran
    shutil.rmtree(tmp_path / "late")
    with pytest.raises(OptionError, match=REFUSED.format(what="is missing")):
        _restart(options, start)
    assert not (tmp_path / "late").exists()


def test_a_restart_whose_late_table_was_created_anew_is_refused(tmp_path, ran):
    options, start, late = ran
    shutil.rmtree(tmp_path / "late")
    write_deltalake(str(tmp_path / "late"), late.slice(0, 0))        # an empty table of the same schema
    with pytest.raises(OptionError, match=REFUSED.format(what="another table.*deleted and created anew")):
        _restart(options, start)


def test_the_restored_late_table_resumes(tmp_path, ran):
    options, start, late = ran
    shutil.copytree(tmp_path / "late", tmp_path / "backup")
    shutil.rmtree(tmp_path / "late")
    shutil.copytree(tmp_path / "backup", tmp_path / "late")           # restored: the same table id
    _batches(options, 1, start)
    assert DeltaTable(str(tmp_path / "late")).to_pyarrow_table().num_rows >= late.num_rows


def test_a_new_state_location_starts_over_with_the_late_table_gone(tmp_path, ran):
    options, _, _ = ran
    shutil.rmtree(tmp_path / "late")
    _batches({**options, "stateLocation": str(tmp_path / "state2")}, 1)   # a new checkpoint: batch 0 again
    assert DeltaTable(str(tmp_path / "late")).version() >= 0


def test_a_late_data_path_added_on_a_restart_is_created(tmp_path):
    options = _options(str(tmp_path / "state"), 2)
    start = _batches(options, 2)
    _batches({**options, "lateDataPath": str(tmp_path / "late")}, 1, start)
    assert DeltaTable(str(tmp_path / "late")).version() >= 0


def test_the_check_without_a_reader(tmp_path):
    state, late = str(tmp_path / "state"), str(tmp_path / "late")
    check_late_table(state, late, has_batches=True)                    # nothing recorded: nothing to check
    write_deltalake(late, pa.table({"k": [1]}))
    record_late_table(state, late)
    check_late_table(state, late, has_batches=True)                    # the recorded table: fine
    check_late_table(state, str(tmp_path / "other"), has_batches=True)  # lateDataPath changed on purpose
    shutil.rmtree(late)
    check_late_table(state, late, has_batches=False)                   # no committed batch lost anything
    with pytest.raises(OptionError, match=REFUSED.format(what="is missing")):
        check_late_table(state, late, has_batches=True)
