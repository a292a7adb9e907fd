"""The per-micro-batch progress line (``spark_windowing.datasource.progress``), without a Spark session.

Shard reports are real files under a tmp state location::

    <state>/reports/12/shard-0.json   shard-1.json   shard-2.json   (+ a temp file to ignore)
    <state>/reports/13/               (empty: that batch's report is missing)

Listener tests feed real pyspark event objects (``QueryProgressEvent.fromJson``) built from the
JSON Spark itself emits; no session, no JVM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from spark_windowing.datasource.progress import BatchReport, format_progress, progress_lines, read_batch_report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WM_12_00_05 = 1_795_262_405_000_000          # 2026-11-21T12:00:05Z in UTC microseconds
SHARDS = [
    dict(events_in=6_000, panes_trigger=500, panes_retraction=20, late_dropped=2, malformed=1,
         watermark_us=WM_12_00_05, state_rows=700, state_bytes=1_300_000, duration_ms=410.5),
    dict(events_in=4_000, panes_trigger=290, panes_retraction=2, late_dropped=1, malformed=0,
         watermark_us=WM_12_00_05, state_rows=504, state_bytes=800_000, duration_ms=388.0),
    dict(events_in=0, panes_trigger=0, panes_retraction=0, late_dropped=0, malformed=0,
         watermark_us=None, state_rows=0, state_bytes=0, duration_ms=3),
]
EXAMPLE = ("[clicks] batch 12 | events 10,000 | panes 812 (trigger 790, retraction 22) | "
           "late 3 (malformed 1) | watermark 2026-11-21T12:00:05Z | state 1,204 windows / 2.1 MB | "
           "640 ms")


def write_reports(state, seq: int, shards: list[dict]) -> None:
    directory = os.path.join(state, "reports", str(seq))
    os.makedirs(directory, exist_ok=True)
    for i, shard in enumerate(shards):
        with open(os.path.join(directory, f"shard-{i}.json"), "w") as f:
            json.dump(shard, f)


@pytest.fixture
def state(tmp_path) -> str:
    path = str(tmp_path / "state")
    write_reports(path, 12, SHARDS)
    # an in-flight temp file and another batch's report must not be counted
    with open(os.path.join(path, "reports", "12", "shard-3.json.tmp"), "w") as f:
        f.write("{partial")
    write_reports(path, 11, SHARDS[:1])
    os.makedirs(os.path.join(path, "reports", "13"))
    return path


# ------------------------------------------------------------------------------- reports

def test_module_does_not_need_pyspark():
    code = ("import sys, spark_windowing.datasource.progress as p; p.read_batch_report('.', 0); "
            "assert 'pyspark' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_read_batch_report_sums_shards(state):
    r = read_batch_report(state, 12)
    assert r == BatchReport(seq=12, shards=3, events_in=10_000, panes_trigger=790,
                            panes_retraction=22, late_dropped=3, malformed=1,
                            watermark_us=WM_12_00_05, state_rows=1_204, state_bytes=2_100_000,
                            duration_ms=410.5)
    assert r.panes == 812
    assert r.watermark.isoformat() == "2026-11-21T12:00:05+00:00"


def test_read_batch_report_accepts_file_uri_and_relative_path(state, monkeypatch):
    assert read_batch_report("file://" + state, 12).events_in == 10_000
    monkeypatch.chdir(os.path.dirname(state))
    assert read_batch_report("state", 11).events_in == 6_000


def test_missing_report_is_none(state, tmp_path):
    assert read_batch_report(state, 13) is None                  # directory exists, no shards
    assert read_batch_report(state, 99) is None                  # no directory
    assert read_batch_report(str(tmp_path / "no-such-state"), 1) is None


def test_watermark_is_null_until_a_shard_reports_one(tmp_path):
    write_reports(str(tmp_path), 1, [SHARDS[2], SHARDS[2]])
    r = read_batch_report(str(tmp_path), 1)
    assert r.watermark_us is None and r.watermark is None and r.shards == 2


def test_unreadable_shard_report_names_file_and_field(tmp_path):
    write_reports(str(tmp_path), 1, [{k: v for k, v in SHARDS[0].items() if k != "state_rows"}])
    with pytest.raises(ValueError, match=r"shard-0\.json: field 'state_rows' must be an integer"):
        read_batch_report(str(tmp_path), 1)
    with open(tmp_path / "reports" / "1" / "shard-0.json", "w") as f:
        f.write("{not json")
    with pytest.raises(ValueError, match=r"shard-0\.json: not a JSON shard report"):
        read_batch_report(str(tmp_path), 1)


# ------------------------------------------------------------------------------- the line

def test_format_progress_exact_line(state):
    line = format_progress(read_batch_report(state, 12), batch_id=12, query_name="clicks",
                           duration_ms=640)
    assert line == EXAMPLE


def test_format_progress_small_values_and_no_watermark():
    r = BatchReport(seq=1, shards=1, events_in=5, panes_trigger=0, panes_retraction=0,
                    late_dropped=0, malformed=0, watermark_us=WM_12_00_05 + 250_000, state_rows=3,
                    state_bytes=912, duration_ms=2.0)
    assert format_progress(r, batch_id=0, query_name=None, duration_ms=1234.4) == (
        "batch 0 | events 5 | panes 0 (trigger 0, retraction 0) | late 0 | "
        "watermark 2026-11-21T12:00:05.250Z | state 3 windows / 912 B | 1,234 ms")
    r2 = BatchReport(**{**r.__dict__, "watermark_us": None, "state_bytes": 45_600})
    assert format_progress(r2, batch_id=1, query_name="q", duration_ms=None) == (
        "[q] batch 1 | events 5 | panes 0 (trigger 0, retraction 0) | late 0 | "
        "watermark none | state 3 windows / 45.6 kB")


def test_the_line_shows_where_the_slowest_shard_spent_its_time(tmp_path):
    """Each phase is the slowest shard's; reports without the phase fields (earlier releases)
    count as 0, and a line of such reports does not show them."""
    timed = [{**SHARDS[0], "read_ms": 12.4, "step_ms": 300.2, "snapshot_ms": 80.0},
             {**SHARDS[1], "read_ms": 20.0, "step_ms": 250.0, "snapshot_ms": 95.6}, SHARDS[2]]
    write_reports(str(tmp_path), 12, timed)
    report = read_batch_report(str(tmp_path), 12)
    assert (report.read_ms, report.step_ms, report.snapshot_ms) == (20.0, 300.2, 95.6)
    line = format_progress(report, batch_id=12, query_name="clicks", duration_ms=640)
    assert line == EXAMPLE.replace("| 640 ms", "| shard read 20 / step 300 / snapshot 96 ms | 640 ms")


def test_the_line_counts_shards_that_reloaded_their_state(tmp_path):
    """``state_reloads`` sums over the shards (absent in earlier reports: 0) and is named after
    the phases; a report whose field is not an integer is rejected, naming the file."""
    timed = [{**SHARDS[0], "read_ms": 210.0, "step_ms": 300.2, "snapshot_ms": 80.0, "state_reloads": 1},
             {**SHARDS[1], "read_ms": 20.0, "step_ms": 250.0, "snapshot_ms": 95.6, "state_reloads": 1}, SHARDS[2]]
    write_reports(str(tmp_path), 12, timed)
    report = read_batch_report(str(tmp_path), 12)
    assert report.state_reloads == 2
    line = format_progress(report, batch_id=12, query_name="clicks", duration_ms=640)
    assert "| shard read 210 / step 300 / snapshot 96 ms (state reloaded by 2 shards) | 640 ms" in line
    write_reports(str(tmp_path), 13, [{**SHARDS[0], "state_reloads": "yes"}])
    with pytest.raises(ValueError, match=r"shard-0\.json.*'state_reloads' must be an integer"):
        read_batch_report(str(tmp_path), 13)


def test_the_line_tells_reloads_from_local_copies_and_catch_ups_apart(tmp_path):
    """``local_reloads``: shards that read their state back from their executor's local copies
    (``local_copies``), nothing from ``stateLocation``; ``state_catch_ups``: shards whose worker
    held an older copy and read back only what changed since."""
    timed = [{**SHARDS[0], "read_ms": 21.0, "state_reloads": 0, "local_reloads": 1},
             {**SHARDS[1], "read_ms": 20.0, "state_reloads": 1}, {**SHARDS[2], "local_reloads": 1}]
    write_reports(str(tmp_path), 12, timed)
    report = read_batch_report(str(tmp_path), 12)
    assert (report.state_reloads, report.local_reloads, report.state_catch_ups) == (1, 2, 0)
    line = format_progress(report, batch_id=12, query_name="clicks", duration_ms=640)
    assert "(state reloaded by 1 shard, 2 shards from local copies) | 640 ms" in line
    write_reports(str(tmp_path), 13, [{**SHARDS[0], "read_ms": 2.0, "state_catch_ups": 1},
                                      {**SHARDS[1], "read_ms": 2.0, "local_reloads": 1}])
    line = format_progress(read_batch_report(str(tmp_path), 13), batch_id=13, query_name="clicks", duration_ms=9)
    assert "(state reloaded by 1 shard from local copies; state caught up by 1 shard) | 9 ms" in line


def test_format_progress_missing_report():
    assert format_progress(None, batch_id=7, query_name="clicks", duration_ms=80,
                           missing="/s/reports/7") == \
        "[clicks] batch 7 | windowed report missing at /s/reports/7 | 80 ms"


# ------------------------------------------------------------------------------- listener

QID, RUN = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))


def progress_json(batch_id: int, sources: list[tuple[object, object]], *, name="clicks") -> dict:
    """A StreamingQueryProgress as Spark serialises it (offsets embedded as JSON)."""
    return {
        "id": QID, "runId": RUN, "name": name, "timestamp": "2026-11-21T12:00:06.000Z",
        "batchId": batch_id, "batchDuration": 700, "numInputRows": 10_000,
        "inputRowsPerSecond": 0.0, "processedRowsPerSecond": 0.0,
        "durationMs": {"triggerExecution": 640, "latestOffset": 5},
        "stateOperators": [],
        "sources": [{"description": desc, "startOffset": start, "endOffset": end,
                     "latestOffset": end, "numInputRows": 10_000, "inputRowsPerSecond": 0.0,
                     "processedRowsPerSecond": 0.0} for desc, (start, end) in sources],
        "sink": {"description": "windowed", "numOutputRows": 812},
    }


def windowed_offset(state: str, seq: int) -> dict:
    return {"windowed": 1, "seq": seq, "state": state, "upstream": {"version": seq + 3},
            "batch_time_us": WM_12_00_05}


@pytest.fixture
def ev():
    """pyspark's listener event classes (pure Python; no session is started)."""
    return pytest.importorskip("pyspark.sql.streaming.listener")


def progress_event(*a, **kw):
    from pyspark.sql.streaming.listener import QueryProgressEvent
    return QueryProgressEvent.fromJson({"progress": progress_json(*a, **kw)})


def test_progress_lines_for_windowed_sources_only(state, ev):
    rate = ("RateStreamV2", ({"0": 5}, {"0": 9}))
    windowed = ("windowed", (windowed_offset(state, 11), windowed_offset(state, 12)))
    progress = progress_event(12, [rate, windowed]).progress
    assert progress_lines(progress) == [EXAMPLE]


def test_progress_lines_missing_report_and_unmoved_offset(state, ev):
    missing = ("windowed", (None, windowed_offset(state, 13)))
    assert progress_lines(progress_event(13, [missing]).progress) == [
        f"[clicks] batch 13 | windowed report missing at {state}/reports/13 | 640 ms"]
    unmoved = ("windowed", (windowed_offset(state, 12), windowed_offset(state, 12)))
    assert progress_lines(progress_event(14, [unmoved]).progress) == []


def test_listener_writes_lines_and_survives_bad_reports(state, ev):
    from spark_windowing.datasource.progress import WindowedProgressListener

    lines: list[str] = []
    listener = WindowedProgressListener(sink=lines.append)
    assert isinstance(listener, ev.StreamingQueryListener)
    listener.onQueryStarted(ev.QueryStartedEvent.fromJson(
        {"id": QID, "runId": RUN, "name": "clicks", "timestamp": "2026-11-21T12:00:00.000Z"}))
    listener.onQueryProgress(progress_event(
        12, [("windowed", (windowed_offset(state, 11), windowed_offset(state, 12)))]))
    with open(os.path.join(state, "reports", "13", "shard-0.json"), "w") as f:
        f.write("[]")                                         # unreadable report
    listener.onQueryProgress(progress_event(
        13, [("windowed", (windowed_offset(state, 12), windowed_offset(state, 13)))]))
    idle = ev.QueryIdleEvent.fromJson({"id": QID, "runId": RUN, "timestamp": "t"})
    listener.onQueryIdle(idle)
    listener.onQueryIdle(idle)                                # once per idle stretch
    listener.onQueryTerminated(ev.QueryTerminatedEvent.fromJson(
        {"id": QID, "runId": RUN, "exception": "boom\n\tat x", "errorClassOnException": None}))
    assert lines[0] == f"[clicks] started (id {QID}, run {RUN})"
    assert lines[1] == EXAMPLE
    assert lines[2].startswith(f"[clicks] batch 13 | windowed report unreadable at {state}/reports/13")
    assert "a shard report is a JSON object" in lines[2]
    assert lines[3:] == ["[clicks] idle, waiting for data", "[clicks] terminated with error: boom"]


def test_listener_default_sink_prints(state, ev, capsys):
    from spark_windowing.datasource.progress import WindowedProgressListener

    WindowedProgressListener().onQueryProgress(progress_event(
        12, [("windowed", (None, windowed_offset(state, 12)))], name=None))
    assert capsys.readouterr().out == EXAMPLE.replace("[clicks]", f"[{QID[:8]}]") + "\n"


def test_progress_lines_say_what_the_batch_wrote_to_the_pane_tables(state, ev, tmp_path):
    from spark_windowing.datasource.sink.metrics import write_batch_metrics

    panes = str(tmp_path / "panes")
    write_batch_metrics(panes, 12, {
        "current": {"files_added": 2, "bytes_added": 1_234_000, "files_removed": 2, "bytes_removed": 1_100_000,
                    "rows_copied": 900, "files_scanned": 2},
        "triggers": {"files_added": 1, "bytes_added": 85_000, "files_removed": 0, "bytes_removed": 0,
                     "maintenance": {"compacted": {"numFilesAdded": 1, "numFilesRemoved": 50}, "vacuumed": 49}}})
    windowed = ("windowed", (windowed_offset(state, 11), windowed_offset(state, 12)))

    got = progress_lines(progress_event(12, [windowed]).progress, {"clicks": panes})
    missing = progress_lines(progress_event(12, [windowed]).progress, {"clicks": str(tmp_path / "elsewhere")})

    assert got == [EXAMPLE + " | sink current +1.2 MB -1.1 MB (2 files read), triggers +85.0 kB"
                             " | upkeep triggers: compacted 50 -> 1 files, vacuumed 49"]
    assert missing == [EXAMPLE + " | sink metrics missing"]
    assert progress_lines(progress_event(12, [windowed]).progress, {"other": panes}) == [EXAMPLE]


def test_the_line_names_the_route_execution_auto_chose(state, ev):
    """``execution=auto`` writes each batch's route into its offset; the line shows it before the
    duration, and a line of an offset without one (``executors``, ``driver``) has none."""
    routed = ("windowed", (windowed_offset(state, 11), {**windowed_offset(state, 12), "route": "driver"}))
    line, = progress_lines(progress_event(12, [routed]).progress)
    assert line == EXAMPLE.replace("| 640 ms", "| on driver | 640 ms")
