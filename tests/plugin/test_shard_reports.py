"""The driver plans a micro-batch from one listing of the shards' reports (issue #29): each report's
name carries the fields the driver reads, so no report body is read unless the name cannot carry
them (an upstream's own fields, events without a readable event time, state written before)."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from spark_windowing.datasource.storage import layout
from spark_windowing.datasource.source import shard_reports
from spark_windowing.datasource import storage
from spark_windowing.datasource.progress import read_batch_report
from spark_windowing.datasource.source.shard_reports import SUMMARY_FIELDS, read_driver_reports, write_report
from spark_windowing.errors import SnapshotError
from tests.objectstore import count


def _report(shard: int, **extra) -> dict:
    report = {"events_in": 100 + shard, "panes_trigger": 3, "panes_retraction": 1, "late_dropped": 0,
              "malformed": 0, "watermark_us": 1_700_000_000_000_000, "state_rows": 10, "state_bytes": 400,
              "duration_ms": 5.5, "max_event_us": 1_700_000_000_000_000 + shard, "max_col_us": None,
              "max_event2_us": -5 if shard == 1 else None, "next_event_timer": 1_700_000_060_000_000 + shard,
              "next_proc_timer": 9_223_372_036_854_775_807, "time_malformed": 0, "time_sample": None,
              "read_ms": 1.0, "step_ms": 2.0, "snapshot_ms": 3.0, "state_reloads": shard % 2}
    report.update(extra)
    return report


def _driver_view(report: dict) -> dict:
    return {f: report.get(f) for f in SUMMARY_FIELDS}


def _spoil_bodies(state: str, seq: int) -> None:
    """Overwrite every report body: what the driver then still reads must come from the names."""
    for uri in shard_reports.latest_report_files(state, seq).values():
        storage.write_atomic(uri, b"not json", durable=False)


def test_the_driver_reads_every_summary_from_the_names(tmp_path):
    state = str(tmp_path / "state")
    reports = [_report(s) for s in range(3)]
    for shard, report in enumerate(reports):
        write_report(state, 7, shard, report)
    assert [_driver_view(r) for r in read_driver_reports(state, 7, 3)] == [_driver_view(r) for r in reports]
    _spoil_bodies(state, 7)
    assert [_driver_view(r) for r in read_driver_reports(state, 7, 3)] == [_driver_view(r) for r in reports]


def test_an_upstreams_own_fields_and_malformed_times_are_read_from_the_body(tmp_path):
    state = str(tmp_path / "state")
    kafka = _report(0, partition_max_us={"t-0": 5, "t-1": 9})
    malformed = _report(1, time_malformed=2, time_sample="'yesterday'")
    write_report(state, 3, 0, kafka)
    write_report(state, 3, 1, malformed)
    assert sorted(os.listdir(layout.reports_dir(state, 3))) == ["shard-0.json", "shard-1.json"]
    assert read_driver_reports(state, 3, 2) == [kafka, malformed]


def test_reports_of_the_earlier_layout_are_read(tmp_path):
    """State locations written before the names carried summaries have ``shard-<i>.json`` only."""
    state = str(tmp_path / "state")
    old = [_report(s) for s in range(2)]
    for shard, report in enumerate(old):
        storage.write_atomic(f"{layout.reports_dir(state, 4)}/shard-{shard}.json", json.dumps(report).encode())
    assert read_driver_reports(state, 4, 2) == old
    assert read_batch_report(state, 4).events_in == 201


def test_a_shard_reported_twice_counts_once_and_its_newest_report_wins(tmp_path):
    state = str(tmp_path / "state")
    write_report(state, 5, 0, _report(0))
    write_report(state, 5, 1, _report(1, max_event_us=1))
    time.sleep(0.02)  # the retried step's report is the newer one
    write_report(state, 5, 1, _report(1))
    assert len(os.listdir(layout.reports_dir(state, 5))) == 3
    assert read_driver_reports(state, 5, 2)[1]["max_event_us"] == _report(1)["max_event_us"]
    assert read_batch_report(state, 5).shards == 2


def test_a_missing_shard_report_is_an_error_naming_the_shard(tmp_path):
    state = str(tmp_path / "state")
    write_report(state, 2, 0, _report(0))
    write_report(state, 2, 2, _report(2))
    with pytest.raises(SnapshotError, match="missing shard report of shard 1 .*completed batch 2"):
        read_driver_reports(state, 2, 3)


def test_on_an_object_store_the_driver_sends_one_request_per_batch(object_store):
    state = object_store.uri(f"reports-{uuid.uuid4().hex[:8]}")
    shards = 16
    for shard in range(shards):
        write_report(state, 9, shard, _report(shard))
    mark = object_store.proxy.mark()
    got = read_driver_reports(state, 9, shards)
    assert [_driver_view(r) for r in got] == [_driver_view(_report(s)) for s in range(shards)]
    assert sum(count(object_store.proxy.since(mark)).values()) == 1  # one listing, no GET


def test_a_real_shards_report_carries_its_summary_and_the_driver_plans_the_same_from_it(tmp_path):
    """Through the source's reader (without Spark): every report a shard writes has a summary
    name, and the next offset planned from the names equals the one planned from the bodies."""
    from tests.plugin.test_rescale_reader import _batch, _options
    from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema

    state = str(tmp_path / "state")
    options = _options(state, 3)
    reader = WindowedStreamReader(options, stream_schema(options))
    start = reader.initialOffset()
    for _ in range(3):
        start, _rows = _batch(reader, start)
    names = os.listdir(layout.reports_dir(state, start["seq"]))
    assert len(names) == 3 and all(shard_reports.parse_report_name(n)[1] is not None for n in names), names
    from_names = reader._reports(start["seq"], 3)
    bodies = [json.loads(storage.read_bytes(u)) for _, u in sorted(shard_reports.latest_report_files(
        state, start["seq"]).items())]
    assert [_driver_view(r) for r in from_names] == [_driver_view(r) for r in bodies]


def test_drop_batches_before_deletes_only_older_batch_directories(tmp_path):
    from spark_windowing.datasource.source.shard_reports import drop_batches_before, largest
    for name in ("0", "1", "2", "3", "4", "notes"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "shard-0.json").write_text("{}")
    drop_batches_before(str(tmp_path), 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3", "4", "notes"]
    assert largest([None, 3, 7, None]) == 7 and largest([None]) is None
