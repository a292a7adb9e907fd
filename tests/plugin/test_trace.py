"""``datasource.trace``: spans go to the file ``SPARK_WINDOWING_TRACE`` names, and nowhere without it."""

from __future__ import annotations

import json

from spark_windowing.datasource import trace


def test_spans_are_appended_as_json_lines_when_the_variable_names_a_file(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    monkeypatch.setenv(trace.ENV, str(path))
    with trace.span("outer", batch=3):
        trace.traced("inner")(lambda: None)()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [s["span"] for s in lines] == ["inner", "outer"]
    assert lines[1]["batch"] == 3 and lines[1]["start"] <= lines[0]["start"] <= lines[0]["end"] <= lines[1]["end"]


def test_nothing_is_written_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(trace.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with trace.span("outer"):
        trace.record("x", 0.0, 1.0)
    assert list(tmp_path.iterdir()) == []
