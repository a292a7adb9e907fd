"""``window(df)``'s ticks (``source.ticks``) without Spark: when its offset moves (a micro-batch
Spark must run without input) and when it stays (nothing due, nothing new)."""

from __future__ import annotations

import json

from spark_windowing.datasource.source import shard_reports
from spark_windowing.datasource.source.ticks import TICKS_OPTION, TicksStreamReader, point_to, ticks_settings

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
