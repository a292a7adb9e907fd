"""A new checkpoint over a state location that holds another checkpoint's state (a deleted
checkpoint, a declarative pipeline's full refresh), through the source's reader without Spark:
the driver calls and every partition's ``read`` as Spark makes them (``test_rescale_reader``).
Refused by default naming ``stateLocation``; with ``newCheckpoint=reset`` the old state is removed
and the panes are those of a first run, the late rows of the new run appended; the old checkpoint
then no longer resumes; a restart of the same checkpoint (also of its first batch, when Spark asks
for the initial offset again) resumes; offsets without a run (0.1.0) are not checked."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from spark_windowing.datasource.contract import OFFSET_RUN
from spark_windowing.datasource.source import runs
from spark_windowing.datasource.source.reader import WindowedStreamReader, late_writer, stream_schema
from spark_windowing.datasource.storage import layout
from spark_windowing.errors import OptionError


def _options(tmp_path, *, seed: int = 1, **extra: str) -> dict[str, str]:
    return {"source": "generator", "eventsPerBatch": "200", "keys": "10", "eventInterval": "50 milliseconds",
            "disorder": "3 seconds", "lateFraction": "0.1", "seed": str(seed), "window": "tumbling(2 seconds)",
            "aggregate": "count(*) AS n", "timestampColumn": "event_time", "keyColumns": "user_id",
            "watermark": "bounded(1 second)", "stateLocation": str(tmp_path / "state"),
            "lateDataPath": str(tmp_path / "late"), **extra}


def _reader(options: dict[str, str]) -> WindowedStreamReader:
    return WindowedStreamReader(options, stream_schema(options))


def _batch(reader: WindowedStreamReader, start: dict) -> tuple[dict, list[str]]:
    end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
    rows = [r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()]
    reader.commit(end)
    return end, sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_time")) for r in rows)


def _run(reader: WindowedStreamReader, batches: int, start: dict | None = None) -> tuple[list[dict], list[list[str]]]:
    """A checkpoint's ``batches`` micro-batches from ``start`` (None: a new checkpoint)."""
    start = start if start is not None else json.loads(json.dumps(reader.initialOffset()))
    ends, panes = [], []
    for _ in range(batches):
        start, rows = _batch(reader, start)
        ends.append(start)
        panes.append(rows)
    return ends, panes


def _late_rows(tmp_path) -> int:
    return DeltaTable(str(tmp_path / "late")).to_pyarrow_table().num_rows


def test_a_new_checkpoint_over_another_runs_state_is_refused_naming_state_location(tmp_path):
    ends, _ = _run(_reader(_options(tmp_path)), 3)
    assert runs.recorded_run(str(tmp_path / "state")) == ends[-1][OFFSET_RUN]
    fresh = _reader(_options(tmp_path))
    start = fresh.initialOffset()
    assert start[OFFSET_RUN] != ends[-1][OFFSET_RUN]
    with pytest.raises(OptionError) as refused:
        fresh.latestOffset(start, fresh.getDefaultReadLimit())
    message = str(refused.value)
    assert refused.value.option == "stateLocation"
    assert ends[-1][OFFSET_RUN] in message and "up to batch 3" in message
    assert "newCheckpoint=reset" in message and "the checkpoint that state was written with" in message
    # nothing was removed: the old checkpoint resumes
    _run(_reader(_options(tmp_path)), 1, start=ends[-1])


def test_reset_starts_over_with_fresh_state_and_appends_the_new_runs_late_rows(tmp_path):
    first_ends, first = _run(_reader(_options(tmp_path)), 4)
    late_once = _late_rows(tmp_path)
    assert late_once > 0
    first_ends += _run(_reader(_options(tmp_path)), 2, start=first_ends[-1])[0]   # the old run went on to batch 6
    late_old = _late_rows(tmp_path)
    ends, again = _run(_reader(_options(tmp_path, newCheckpoint="reset")), 4)
    assert again == first                       # the panes of a first run: no old window carried over
    assert _late_rows(tmp_path) == late_old + late_once   # the new run's batches 1..4 are not "already committed"
    assert runs.recorded_run(str(tmp_path / "state")) == ends[-1][OFFSET_RUN]
    assert runs.batch_state(str(tmp_path / "state")) == 4   # nothing of the old run's batches 5 and 6 is left
    with pytest.raises(OptionError, match="no longer holds the state location") as gone:
        _run(_reader(_options(tmp_path)), 1, start=first_ends[-1])
    assert gone.value.option == "stateLocation"


def test_reset_lets_a_refreshed_run_change_the_window(tmp_path):
    _run(_reader(_options(tmp_path)), 2)
    with pytest.raises(OptionError, match="stateLocation"):
        _run(_reader(_options(tmp_path, window="tumbling(5 seconds)")), 1)
    _, panes = _run(_reader(_options(tmp_path, window="tumbling(5 seconds)", newCheckpoint="reset")), 3)
    assert any(panes)
    spec = json.loads((tmp_path / "state" / layout.SPEC_MARKER).read_text())
    assert spec["options"]["window"] == "tumbling(5 seconds)"


def test_a_restarted_checkpoint_resumes_also_when_spark_asks_again_for_the_initial_offset(tmp_path):
    # the first batch's offset was logged (run A) and its batch ran, not committed; Spark restarts
    # it from a new initialOffset (run B) to the logged end: the chain goes on with run A
    reader = _reader(_options(tmp_path))
    initial = reader.initialOffset()
    logged = json.loads(json.dumps(reader.latestOffset(initial, reader.getDefaultReadLimit())))
    restarted = _reader(_options(tmp_path))
    again = restarted.initialOffset()
    assert again[OFFSET_RUN] != logged[OFFSET_RUN]
    for p in restarted.partitions(again, logged):
        list(restarted.read(p))
    ends, _ = _run(restarted, 2, start=logged)
    assert ends[-1][OFFSET_RUN] == logged[OFFSET_RUN]
    # a run that claimed the location and never ran a batch is no one's state: a new one takes it
    other = tmp_path / "other"
    first = _reader(_options(other))
    first.latestOffset(first.initialOffset(), first.getDefaultReadLimit())   # not logged: Spark crashed
    _run(_reader(_options(other)), 1)


def test_offsets_without_a_run_resume_as_before(tmp_path):
    reader = _reader(_options(tmp_path))
    legacy = {k: v for k, v in reader.initialOffset().items() if k != OFFSET_RUN}
    ends, _ = _run(reader, 2, start=legacy)
    assert OFFSET_RUN not in ends[-1] and runs.recorded_run(str(tmp_path / "state")) is None
    assert late_writer(reader.cfg, None) == f"spark-windowing-late:{tmp_path / 'state'}"
    _run(_reader(_options(tmp_path)), 1, start=ends[-1])
    with pytest.raises(OptionError, match="recorded none"):   # a new checkpoint over it: refused
        _run(_reader(_options(tmp_path)), 1)
