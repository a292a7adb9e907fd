"""``window(df)``'s ticks (``source.ticks``) without Spark: when its offset moves (a micro-batch
Spark must run without input) and when it stays (nothing due, nothing new)."""

from __future__ import annotations

import json

import pytest

from spark_windowing.datasource.source import offset_log, shard_reports
from spark_windowing.datasource.source.ticks import TICKS_OPTION, TicksStreamReader, point_to, ticks_settings
from spark_windowing.errors import OptionError, WindowingError

MAX = 9_223_372_036_854_775_807


def _report(max_event: int | None, next_timer: int | None) -> dict:
    return {"max_event_us": max_event, "max_col_us": None, "max_event2_us": None, "next_event_timer": next_timer,
            "next_proc_timer": MAX, "events_in": 1, "time_malformed": 0}


def _reader(root: str | None, pointer: str | None = None, partition: bool = False) -> TicksStreamReader:
    reader = TicksStreamReader({TICKS_OPTION.lower(): ticks_settings(root, pointer, partition=partition)})
    first = reader.latestOffset(reader.initialOffset())
    assert first == {"ticks": 1, "wm": None}     # a start moves the ticks once
    return reader


def test_a_start_moves_the_ticks_once_then_nothing_without_reports(tmp_path):
    reader = _reader(str(tmp_path / "state"))
    start = {"ticks": 1, "wm": None}
    assert reader.latestOffset(start) == start
    assert reader.partitions({"ticks": 0, "wm": None}, start) == []     # the shuffle runs every shard's task


def test_with_one_shard_a_moved_offset_plans_one_empty_partition(tmp_path):
    reader = _reader(str(tmp_path / "state"), partition=True)
    start, moved = {"ticks": 1, "wm": None}, {"ticks": 2, "wm": 5}
    assert reader.partitions(start, start) == [] and len(reader.partitions(start, moved)) == 1
    assert list(reader.read(reader.partitions(start, moved)[0])) == []


def test_a_timer_at_or_before_the_next_watermark_moves_the_ticks_once(tmp_path):
    root = str(tmp_path / "state")
    reader = _reader(root)
    shard_reports.write_report(root, 1, 0, _report(100, 90))     # after batch 0: window end 90, watermark 100
    shard_reports.write_report(root, 1, 1, _report(40, MAX))
    start = {"ticks": 1, "wm": None}
    moved = reader.latestOffset(start)
    assert moved == {"ticks": 2, "wm": 100}
    assert reader.latestOffset(moved) == moved                   # the same reports: nothing new
    shard_reports.write_report(root, 2, 0, _report(100, 150))    # the batch that fired: nothing due
    shard_reports.write_report(root, 2, 1, _report(40, MAX))
    assert reader.latestOffset(moved) == moved


def test_nothing_due_or_no_newer_watermark_leaves_the_ticks(tmp_path):
    root = str(tmp_path / "state")
    reader = _reader(root)
    shard_reports.write_report(root, 1, 0, _report(100, 150))    # the earliest timer is past the watermark
    assert reader.latestOffset({"ticks": 1, "wm": None}) == {"ticks": 1, "wm": None}
    shard_reports.write_report(root, 2, 0, _report(100, 90))     # due, but the ticks moved for 100 already
    assert reader.latestOffset({"ticks": 3, "wm": 100}) == {"ticks": 3, "wm": 100}


def test_the_shards_name_the_state_location_in_the_pointer(tmp_path):
    root, pointer = str(tmp_path / "base" / "query-id"), str(tmp_path / "base" / "ticks" / "abc")
    reader = _reader(None, pointer)
    assert reader.latestOffset({"ticks": 1, "wm": None}) == {"ticks": 1, "wm": None}   # no batch yet
    point_to(pointer, root)
    shard_reports.write_report(root, 1, 0, _report(100, 90))
    assert reader.latestOffset({"ticks": 1, "wm": None}) == {"ticks": 2, "wm": 100}


def test_a_report_without_a_summary_in_its_name_is_read(tmp_path):
    root = str(tmp_path / "state")
    reader = _reader(root)
    shard_reports.write_report(root, 1, 0, {**_report(100, 90), "kafka_offsets": json.dumps({"0": 5})})
    assert reader.latestOffset({"ticks": 1, "wm": None}) == {"ticks": 2, "wm": 100}


def _clock_reader(root: str, **clock) -> TicksStreamReader:
    settings = ticks_settings(root, None, clock={"kind": "bounded", "delay": 0, "idle": None, "proc": False,
                                                 "labels": [7, 3], **clock})
    reader = TicksStreamReader({TICKS_OPTION.lower(): settings})
    reader.latestOffset(reader.initialOffset())
    return reader


def _now() -> int:
    import time
    return time.time_ns() // 1000


def test_with_the_clock_a_moved_offset_plans_one_tick_per_shard(tmp_path):
    from pyspark.sql.types import IntegerType
    reader = _clock_reader(str(tmp_path / "state"))
    start, moved = {"ticks": 1, "wm": None}, {"ticks": 2, "wm": 5}
    assert reader.partitions(start, start) == []
    partition, = reader.partitions(start, moved)
    assert list(reader.read(partition)) == [(1, 7), (1, 3)]     # (tick, the shard's label)
    from spark_windowing.datasource.source.ticks import ticks_schema
    schema = ticks_schema({TICKS_OPTION.lower(): ticks_settings(None, None, clock={"labels": [0]})})
    assert [(f.name, f.dataType) for f in schema.fields] == [("__sw_tick", IntegerType()), ("__sw_part", IntegerType())]


def test_a_due_processing_time_timer_moves_the_ticks_not_under_available_now(tmp_path):
    root = str(tmp_path / "state")
    reader = _clock_reader(root, proc=True)
    start = {"ticks": 1, "wm": None}
    shard_reports.write_report(root, 1, 0, {**_report(100, MAX), "next_proc_timer": _now() + 60_000_000})
    assert reader.latestOffset(start) == start                   # a minute ahead: not due
    shard_reports.write_report(root, 2, 0, {**_report(100, MAX), "next_proc_timer": _now() - 1})
    assert reader.latestOffset(start)["ticks"] == 2
    reader.prepareForTriggerAvailableNow()                       # availableNow ignores processing timers
    assert reader.latestOffset({"ticks": 2, "wm": 100}) == {"ticks": 2, "wm": 100}


def test_the_clock_computes_the_watermark_at_the_call(tmp_path):
    """``processing(lag)``: now − lag; an idle timeout adds the time beyond it since the last input."""
    root = str(tmp_path / "state")
    end_in_past, end_in_future = _now() - 5_000_000, _now() + 60_000_000
    processing = _clock_reader(root, kind="processing", delay=1_000_000)
    shard_reports.write_report(root, 1, 0, _report(None, end_in_past))
    before = _now()
    moved = processing.latestOffset({"ticks": 1, "wm": None})
    assert moved["ticks"] == 2 and before - 1_000_000 <= moved["wm"] <= _now() - 1_000_000
    idle = _clock_reader(str(tmp_path / "idle"), idle=2_000_000)
    quiet_since = _now() - 10_000_000
    shard_reports.write_report(str(tmp_path / "idle"), 1, 0,
                               {**_report(quiet_since - 30_000_000, quiet_since - 25_000_000), "last_input_us": quiet_since})
    # event time alone: watermark 30 s before the last input, the timer 25 s before: due only by the idle advance
    moved = idle.latestOffset({"ticks": 1, "wm": None})
    assert moved["ticks"] == 2 and moved["wm"] >= quiet_since - 30_000_000 + 8_000_000
    shard_reports.write_report(str(tmp_path / "idle"), 2, 0,
                               {**_report(quiet_since - 30_000_000, end_in_future), "last_input_us": quiet_since})
    assert idle.latestOffset(moved) == moved


# --------------------------------------------------------------- endOfInput=fire: Spark's offset log

def _offsets(chk, batch: int, *lines) -> None:
    """Spark's ``offsets/<batch>`` (``OffsetSeqLog`` v1): the sources' offsets, ``None`` as ``-``."""
    (chk / "offsets").mkdir(parents=True, exist_ok=True)
    body = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1})]
    body += ["-" if line is None else json.dumps(line) for line in lines]
    (chk / "offsets" / str(batch)).write_text("\n".join(body))


def _end_reader(chk, labels=(4, 1)) -> TicksStreamReader:
    reader = TicksStreamReader({TICKS_OPTION.lower(): ticks_settings(
        str(chk / "state"), None, end={"checkpoint": str(chk), "labels": list(labels)})})
    reader.prepareForTriggerAvailableNow()
    return reader


def test_the_ticks_probe_while_the_sources_move_and_end_after_a_batch_that_found_none(tmp_path):
    chk = tmp_path / "chk"
    reader = _end_reader(chk)
    t0 = reader.initialOffset()
    assert set(t0) == {"ticks", "wm", "token"}                   # the query's own offsets, recognizable
    t1 = reader.latestOffset(t0)                                 # a start moves once
    _offsets(chk, 0, {"logOffset": 0}, t1)
    t2 = reader.latestOffset(t1)                                 # batch 0 took input: probe again
    assert t2 == {**t1, "ticks": t1["ticks"] + 1} and "end" not in t2
    _offsets(chk, 1, {"logOffset": 1}, t2)
    t3 = reader.latestOffset(t2)                                 # batch 1 took input too
    assert "end" not in t3
    _offsets(chk, 2, {"logOffset": 1}, t3)                       # batch 2: the file source stayed
    t4 = reader.latestOffset(t3)
    assert t4["end"] is True and t4["token"] == t0["token"]
    assert [list(reader.read(p)) for p in reader.partitions(t3, t4)] == [[(2, 4), (2, 1)]]   # one tick per shard
    _offsets(chk, 3, {"logOffset": 1}, t4)
    assert reader.latestOffset(t4) == t4                         # ended: nothing due, the run stops


def test_an_empty_input_ends_after_its_first_batch_and_another_window_s_ticks_are_not_input(tmp_path):
    chk = tmp_path / "chk"
    reader = _end_reader(chk)
    t1 = reader.latestOffset(reader.initialOffset())
    _offsets(chk, 0, None, t1, {"ticks": 7, "wm": None})         # no file yet; a second window(df)'s ticks
    assert reader.latestOffset(t1)["end"] is True


def test_without_availablenow_or_with_a_checkpoint_of_another_query_no_end(tmp_path):
    chk = tmp_path / "chk"
    live = TicksStreamReader({TICKS_OPTION.lower(): ticks_settings(
        str(chk / "state"), None, end={"checkpoint": str(chk), "labels": [0]})})
    t1 = live.latestOffset(live.initialOffset())
    _offsets(chk, 0, {"logOffset": 0}, t1)
    assert live.latestOffset(t1) == t1                           # no availableNow: endOfInput has no effect
    other = _end_reader(chk)
    mine = other.latestOffset(other.initialOffset())
    with pytest.raises(OptionError, match="checkpointLocation.*not planned with this query's offsets"):
        other.latestOffset(mine)
    typo = _end_reader(tmp_path / "no-such-checkpoint")
    mine = typo.latestOffset(typo.initialOffset())
    with pytest.raises(OptionError, match="checkpointLocation.*no micro-batch in its offset log"):
        typo.latestOffset(mine)


def test_an_offset_log_spark_did_not_write_as_v1_is_an_error(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text('v2\n{}\n{"a": 1}')
    with pytest.raises(WindowingError, match="version 'v2', not v1"):
        offset_log.offsets_of(str(tmp_path), 0)
    assert offset_log.offsets_of(str(tmp_path), 1) is None and offset_log.newest_batch(str(tmp_path)) == 0
