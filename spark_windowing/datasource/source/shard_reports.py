"""Shard reports: what each shard's step did in a micro-batch, and the driver reading them back
with **one listing per micro-batch** (not one read per shard).

Each shard writes one object per micro-batch, ``S/reports/<seq>/shard-<i>.<summary>.json``. Its
body is the whole report (counts for the progress line, phase timings, an upstream's own fields);
its *name* carries the few numbers the driver needs to plan the next micro-batch
(:data:`SUMMARY_FIELDS`: event-time maxima, the next timers, the event counts). So the driver's
``latestOffset`` learns every shard's summary from one listing of ``S/reports/<seq>/`` — one
request per micro-batch on an object store (per 1,000 shards: S3 lists 1,000 keys a page) —
instead of a HEAD and a GET per shard.

A report whose driver fields do not fit a name is named ``shard-<i>.json`` and the driver reads
its body: an upstream that reports fields of its own (Kafka's per-partition maxima), and a batch
with events without a readable event time (the driver may quote one in its error). State
locations written before this layout have only such names, and keep working.

A shard's step that ran twice for one micro-batch (a retried task, a replay after a crash)
writes the same name again, since the summary is a function of the batch's offsets and state. If
two names of one shard are listed all the same, the newest (modification time, then name) is the
shard's report.

>>> name = report_name(3, {"events_in": 200, "time_malformed": 0, "max_event_us": 1_700_000_000_000_000,
...                        "max_col_us": None, "max_event2_us": None, "next_event_timer": 1_700_000_060_000_000,
...                        "next_proc_timer": 9223372036854775807})
>>> name
'shard-3.1700000000000000_n_n_1700000060000000_9223372036854775807_200_0_n.json'
>>> parse_report_name(name)[1]["next_event_timer"]
1700000060000000
>>> parse_report_name("shard-3.json")
(3, None)
"""

from __future__ import annotations

import json
from typing import Any

from spark_windowing.datasource.storage import layout
from spark_windowing.datasource import storage
from spark_windowing.errors import SnapshotError

#: The report fields the driver reads to plan the next micro-batch, in the order a name carries them.
SUMMARY_FIELDS = ("max_event_us", "max_col_us", "max_event2_us", "next_event_timer", "next_proc_timer",
                  "events_in", "time_malformed", "last_input_us")
#: The fields every report has; any other field is an upstream's own (``Upstream.report_fields``).
STANDARD_FIELDS = frozenset(SUMMARY_FIELDS) | {
    "panes_trigger", "panes_retraction", "late_dropped", "malformed", "watermark_us", "state_rows",
    "state_bytes", "duration_ms", "time_sample", "read_ms", "step_ms", "snapshot_ms", "state_reloads",
    "local_reloads", "state_catch_ups", "future", "corrupt", "corrupt_sample"}
_PREFIX, _SUFFIX = "shard-", ".json"


def report_name(shard: int, report: dict[str, Any]) -> str:
    """The object name of ``shard``'s report: with the driver's summary when the report allows."""
    if set(report) - STANDARD_FIELDS or report.get("time_malformed") or report.get("corrupt"):
        return f"{_PREFIX}{shard}{_SUFFIX}"
    summary = "_".join("n" if report.get(f) is None else str(int(report[f])) for f in SUMMARY_FIELDS)
    return f"{_PREFIX}{shard}.{summary}{_SUFFIX}"


def parse_report_name(name: str) -> tuple[int, dict[str, int | None] | None] | None:
    """``(shard, summary)`` of a report name (``summary`` None: read the body); None: not a report."""
    if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
        return None
    shard, _, summary = name[len(_PREFIX):-len(_SUFFIX)].partition(".")
    if not shard.isdigit():
        return None
    values = summary.split("_") if summary else []
    if len(values) != len(SUMMARY_FIELDS):  # no summary (or a layout this code does not know): the body
        return int(shard), None
    try:
        return int(shard), {f: None if v == "n" else int(v) for f, v in zip(SUMMARY_FIELDS, values)}
    except ValueError:
        return int(shard), None


def largest(values: list) -> int | None:
    """The largest of ``values`` that are not None (as ints), or None: a maximum over shards' reports."""
    present = [int(v) for v in values if v is not None]
    return max(present) if present else None


def drop_batches_before(directory: str, seq: int) -> None:
    """Delete the per-micro-batch directories ``directory/<n>`` with n < ``seq`` (reports, shard claims)."""
    for info in storage.list_dir(directory):
        if info.base_name.isdigit() and int(info.base_name) < seq:
            storage.delete(f"{directory.rstrip('/')}/{info.base_name}", recursive=True)


def write_report(state: str, seq: int, shard: int, report: dict[str, Any]) -> None:
    """Publish ``shard``'s report of micro-batch ``seq`` (not fsynced: a replay rewrites it)."""
    uri = f"{layout.reports_dir(state, seq)}/{report_name(shard, report)}"
    storage.write_atomic(uri, json.dumps(report).encode(), durable=False)


def latest_report_files(state: str, seq: int) -> dict[int, str]:
    """Shard -> the URI of its report of micro-batch ``seq``, from one listing (newest name wins)."""
    return {shard: uri for shard, (uri, _) in _latest(state, seq).items()}


def read_driver_reports(state: str, seq: int, shards: int) -> list[dict[str, Any]]:
    """Every shard's report of completed micro-batch ``seq``, as far as the driver needs it: the
    name's summary where it has one, else the body (read in parallel, ``storage.read_many``).
    A shard without a report is a :class:`SnapshotError` (the state location was cleaned or changed)."""
    latest = _latest(state, seq)
    missing = [s for s in range(shards) if s not in latest]
    if missing:
        raise SnapshotError(f"missing shard report of shard {missing[0]} under {layout.reports_dir(state, seq)} "
                            f"for completed batch {seq}; was the state location {state} cleaned or changed "
                            "while the checkpoint refers to it?")
    out = [latest[s][1] for s in range(shards)]
    bodies = [s for s in range(shards) if out[s] is None]
    for shard, raw in zip(bodies, storage.read_many([latest[s][0] for s in bodies])):
        out[shard] = json.loads(raw)
    return out  # type: ignore[return-value]


def due_firing(state: str, seq: int) -> tuple[int | None, int | None]:
    """``(W, T)`` from the reports of micro-batch ``seq`` that exist (a hint, so a shard without
    one is no error): W the largest watermark time the shards have seen (the next batch's
    watermark), T the earliest event-time timer left in any shard. A firing is due when T <= W."""
    s = summary_of(state, seq)
    return s["max_event_us"], s["next_event_timer"]


def summary_of(state: str, seq: int) -> dict[str, int | None]:
    """The reports of micro-batch ``seq`` that exist, summed up for ``window(df)``'s ticks: the
    largest ``max_event_us`` and ``last_input_us``, the earliest ``next_event_timer`` and
    ``next_proc_timer`` (None where no shard has one)."""
    latest = _latest(state, seq)
    summaries = [summary for _, summary in latest.values() if summary is not None]
    bodies = [uri for uri, summary in latest.values() if summary is None]
    summaries += [json.loads(raw) for raw in storage.read_many(bodies)] if bodies else []

    def earliest(field: str) -> int | None:
        times = [int(r[field]) for r in summaries if r.get(field) is not None]
        return min(times) if times else None
    return {"max_event_us": largest([r.get("max_event_us") for r in summaries]),
            "last_input_us": largest([r.get("last_input_us") for r in summaries]),
            "next_event_timer": earliest("next_event_timer"), "next_proc_timer": earliest("next_proc_timer")}


def _latest(state: str, seq: int) -> dict[int, tuple[str, dict[str, int | None] | None]]:
    """Shard -> (URI, summary or None) of its newest report of micro-batch ``seq``: one listing."""
    directory = layout.reports_dir(state, seq)
    newest: dict[int, tuple[float, str, dict[str, int | None] | None]] = {}
    for info in storage.list_dir(directory):
        parsed = parse_report_name(info.base_name)
        if parsed is None:
            continue
        key = (info.mtime.timestamp() if info.mtime is not None else 0.0, info.base_name, parsed[1])
        if parsed[0] not in newest or key[:2] > newest[parsed[0]][:2]:
            newest[parsed[0]] = key
    return {shard: (f"{directory}/{name}", summary) for shard, (_, name, summary) in newest.items()}
