"""One progress line per micro-batch of a windowed query.

::

    [clicks] batch 12 | events 10,000 | panes 812 (trigger 790, retraction 22) | late 3 (malformed 1) | watermark 2026-11-21T12:00:05Z | state 1,204 windows / 2.1 MB | 640 ms

>>> import spark_windowing.datasource.progress                           # doctest: +SKIP
>>> spark_windowing.datasource.progress.attach_progress(spark)           # doctest: +SKIP
>>> query = panes.writeStream.queryName("clicks").format("windowed")...start()  # doctest: +SKIP

With ``attach_progress(spark, pane_paths={"clicks": "/lake/panes/clicks"})`` the line of that
query also says what the batch wrote to the pane tables and the upkeep that ran
(``spark_windowing.datasource.sink.metrics``)::

    ... | 640 ms | sink current +1.2 MB -1.1 MB (2 files read), triggers +85.0 kB, retractions +6.1 kB

``attach_progress`` adds a ``WindowedProgressListener`` to ``spark.streams``; it prints one line
for every micro-batch of every query that reads ``format("windowed")``, on the driver (with Spark
Connect, listeners run on the server, so the lines land in the server's output).

Where the numbers come from (the stream reader's contract): every offset of the windowed source is
a JSON object ``{"windowed": 1, "seq": <batch sequence>, "state": "<stateLocation URI>", ...}``;
after the micro-batch ending at the offset with ``seq`` N has run, shard *i* has written its
report under ``<state>/reports/<N>/`` (``shard_reports``: ``shard-<i>.<summary>.json``) with ``events_in``, ``panes_trigger``,
``panes_retraction``, ``late_dropped``, ``malformed``, ``watermark_us`` (UTC µs or null),
``state_rows``, ``state_bytes`` and ``duration_ms``, and where that time went: ``read_ms``,
``step_ms``, ``snapshot_ms``, and ``state_reloads`` (1 when the shard read its state back from
``stateLocation`` because Spark ran its previous batch in another Python worker) or
``local_reloads`` (1 when it read it back from its executor's local copies, ``local_copies``).
``read_batch_report`` sums the shards (times: the slowest shard).

``read_batch_report`` and ``format_progress`` need no Spark; only the listener class imports
pyspark, on first use (``spark_windowing.datasource.progress.WindowedProgressListener``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.listener import StreamingQueryProgress

from spark_windowing.datasource.storage.layout import REPORTS_DIR, reports_dir
from spark_windowing.datasource.sink.metrics import format_bytes, format_sink_metrics, read_batch_metrics
from spark_windowing.datasource import storage
from spark_windowing.datasource.source.shard_reports import latest_report_files

__all__ = ["BatchReport", "read_batch_report", "format_progress", "progress_lines", "format_bytes",
           "WindowedProgressListener", "attach_progress", "REPORTS_DIR"]


_log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_COUNT_FIELDS = ("events_in", "panes_trigger", "panes_retraction", "late_dropped", "malformed",
                 "state_rows", "state_bytes")
_PHASE_FIELDS = ("read_ms", "step_ms", "snapshot_ms")
#: Counts only some reports have, 0 when absent: Kafka's skipped offsets, and state reloads
#: (absent in reports of earlier releases).
_OPTIONAL_COUNT_FIELDS = ("skipped_offsets", "state_reloads", "local_reloads", "state_catch_ups", "future")

Sink = Callable[[str], Any]


@dataclass(frozen=True)
class BatchReport:
    """What the windowed operator did in one micro-batch, summed over its shards.

    Counts are sums; ``watermark_us`` is the largest reported watermark (the watermark is global,
    so shards agree; null before any watermark); ``duration_ms`` is the slowest shard's time.
    """

    seq: int
    shards: int
    events_in: int
    panes_trigger: int
    panes_retraction: int
    late_dropped: int
    malformed: int
    watermark_us: int | None
    state_rows: int
    state_bytes: int
    duration_ms: float
    skipped_offsets: int = 0   # Kafka, failOnDataLoss=false: offsets deleted before they were read
    #: where the slowest shard's time went (0 in reports of releases before these fields): reading
    #: its events (fetch, decode, keep its keys), the operator step (including handing the panes
    #: to Spark and writing late rows), the state snapshot
    read_ms: float = 0.0
    step_ms: float = 0.0
    snapshot_ms: float = 0.0
    #: shards that read their state back from ``stateLocation`` this batch instead of reusing the
    #: Python worker's in-memory copy (Spark handed the shard to another worker; part of ``read_ms``)
    state_reloads: int = 0
    #: shards that read their state back, but from their executor's local copies of an object
    #: store's segments (``local_copies``), reading nothing from ``stateLocation``
    local_reloads: int = 0
    #: events further ahead of the batch time than ``maxEventTimeAhead`` (late reason ``future``)
    future: int = 0
    #: shards whose Python worker held an older copy of their state and read back only the key
    #: buckets written since (``StateStore.catch_up``)
    state_catch_ups: int = 0

    @property
    def panes(self) -> int:
        return self.panes_trigger + self.panes_retraction

    @property
    def watermark(self) -> datetime | None:
        if self.watermark_us is None:
            return None
        return _EPOCH + timedelta(microseconds=self.watermark_us)


def read_batch_report(state: str, seq: int) -> BatchReport | None:
    """Sum the shard reports of micro-batch ``seq`` (``shard_reports``); ``None`` if no shard has written one.

    ``state`` is the query's ``stateLocation``: a local path (with or without ``file://``) or a
    URI ``pyarrow.fs`` understands (``s3://``, ``abfss://``, ``hdfs://``). A report file that is
    not valid JSON or lacks a field raises ``ValueError`` naming the file.
    """
    files = latest_report_files(state, seq)
    if not files:
        return None
    uris = [files[shard] for shard in sorted(files)]
    shards = [_parse_shard(uri, raw) for uri, raw in zip(uris, storage.read_many(uris))]
    watermarks = [s["watermark_us"] for s in shards if s["watermark_us"] is not None]
    return BatchReport(seq=int(seq), shards=len(shards),
                       **{f: sum(s[f] for s in shards) for f in _COUNT_FIELDS},
                       watermark_us=max(watermarks) if watermarks else None,
                       duration_ms=max(s["duration_ms"] for s in shards),
                       **{f: sum(s[f] for s in shards) for f in _OPTIONAL_COUNT_FIELDS},
                       **{f: max(s[f] for s in shards) for f in _PHASE_FIELDS})


def format_progress(report: BatchReport | None, *, batch_id: int, query_name: str | None,
                    duration_ms: float | None, missing: str | None = None, route: str | None = None) -> str:
    """One compact line for a micro-batch (``duration_ms``: the whole trigger, from Spark).

    >>> r = BatchReport(seq=12, shards=2, events_in=10_000, panes_trigger=790, panes_retraction=22,
    ...                 late_dropped=3, malformed=1, watermark_us=1_795_262_405_000_000,
    ...                 state_rows=1_204, state_bytes=2_100_000, duration_ms=410.0)
    >>> format_progress(r, batch_id=12, query_name="clicks", duration_ms=640)
    '[clicks] batch 12 | events 10,000 | panes 812 (trigger 790, retraction 22) | late 3 (malformed 1) | watermark 2026-11-21T12:00:05Z | state 1,204 windows / 2.1 MB | 640 ms'

    ``route``: where ``execution=auto`` stepped the batch (``driver`` or ``executors``), shown
    before the duration (``on driver``). ``report=None`` gives a line saying the report is missing (``missing``: where it was looked
    for). ``late`` is ``late_dropped``; ``malformed`` and ``future`` are shown when non-zero, and so are the Kafka
    offsets skipped because retention deleted them first (``failOnDataLoss=false``).
    """
    head = f"[{query_name}] batch {batch_id}" if query_name else f"batch {batch_id}"
    tail = [] if duration_ms is None else [f"{round(duration_ms):,} ms"]
    if report is None:
        where = f" at {missing}" if missing else ""
        return " | ".join([head, f"windowed report missing{where}", *tail])
    late = f"late {report.late_dropped:,}"
    reasons = [f"{name} {n:,}" for name, n in (("malformed", report.malformed), ("future", report.future)) if n]
    if reasons:
        late += f" ({', '.join(reasons)})"
    return " | ".join([
        head,
        f"events {report.events_in:,}",
        f"panes {report.panes:,} (trigger {report.panes_trigger:,}, "
        f"retraction {report.panes_retraction:,})",
        late,
        f"watermark {_format_watermark(report.watermark)}",
        f"state {report.state_rows:,} windows / {format_bytes(report.state_bytes)}",
        *([f"skipped offsets {report.skipped_offsets:,} (data loss)"] if report.skipped_offsets else []),
        *([f"shard read {report.read_ms:,.0f} / step {report.step_ms:,.0f} / snapshot {report.snapshot_ms:,.0f} ms"
           + _reloads(report)]
          if report.read_ms or report.step_ms or report.snapshot_ms else []),
        *([f"on {route}"] if route else []),
        *tail,
    ])


def _reloads(report: BatchReport) -> str:
    """How shards got their state when their worker did not hold it (``shard_state``)."""
    def shards(n: int) -> str:
        return f"{n} shard{'s' if n > 1 else ''}"

    reloaded = [shards(n) + where for n, where in
                ((report.state_reloads, ""), (report.local_reloads, " from local copies")) if n]
    said = [f"state reloaded by {', '.join(reloaded)}"] if reloaded else []
    said += [f"state caught up by {shards(report.state_catch_ups)}"] if report.state_catch_ups else []
    return f" ({'; '.join(said)})" if said else ""


def progress_lines(progress: "StreamingQueryProgress",
                   pane_paths: Mapping[str, str] | None = None) -> list[str]:
    """The lines for one ``StreamingQueryProgress``: one per windowed source that ran a batch.

    Sources whose ``endOffset`` is not a windowed offset are ignored, as are windowed sources whose
    offset did not move (no batch of theirs ran). Never raises for a missing or unreadable report:
    the line says so instead. ``pane_paths``: query name -> the windowed sink's ``path`` of that
    query; its lines then end with what the batch wrote to each pane table and the upkeep that ran
    (``spark_windowing.datasource.sink.metrics``).
    """
    name = progress.name or str(progress.id)[:8]
    duration = (progress.durationMs or {}).get("triggerExecution", progress.batchDuration)
    windowed = [(src, off) for src in progress.sources
                if (off := _windowed_offset(src.endOffset)) is not None
                and _windowed_offset(src.startOffset) != off]
    lines = []
    for n, (src, offset) in enumerate(windowed, start=1):
        label = name if len(windowed) == 1 else f"{name} #{n}"
        lines.append(_source_line(offset, batch_id=progress.batchId, query_name=label,
                                  duration_ms=duration))
    root = (pane_paths or {}).get(progress.name or "")
    if root and lines:
        lines[-1] += " | " + _sink_part(root, progress.batchId)
    return lines


def _sink_part(root: str, batch_id: int) -> str:
    try:
        metrics = read_batch_metrics(root, batch_id)
    except Exception as e:  # never break the progress line
        return f"sink metrics unreadable: {type(e).__name__}: {e}"
    return "sink metrics missing" if metrics is None else format_sink_metrics(metrics)


def attach_progress(spark: "SparkSession", sink: Sink | None = None, *,
                    pane_paths: Mapping[str, str] | None = None) -> "WindowedProgressListener":
    """Add a ``WindowedProgressListener`` writing to ``sink`` (default: print, flushed); return it.

    ``pane_paths`` (query name -> the windowed sink's path): those queries' lines also say what
    each batch wrote to the pane tables. Remove it again with ``spark.streams.removeListener(listener)``.
    """
    listener = _listener_class()(sink, pane_paths)
    spark.streams.addListener(listener)
    return listener


def __getattr__(name: str) -> Any:   # PEP 562: build the pyspark subclass on first use
    if name == "WindowedProgressListener":
        return _listener_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------------------------

_LISTENER_CLASS: type | None = None


def _listener_class() -> type:
    global _LISTENER_CLASS
    if _LISTENER_CLASS is None:
        _LISTENER_CLASS = _make_listener_class()
    return _LISTENER_CLASS


def _make_listener_class() -> type:
    # Long: the class is defined inside a function so pyspark is imported on first use only; its
    # methods are short.
    from pyspark.sql.streaming import StreamingQueryListener

    class WindowedProgressListener(StreamingQueryListener):
        """Writes one progress line per micro-batch of each windowed query to ``sink``.

        Also a line when a query starts, terminates, or goes idle (once per idle stretch).
        Nothing raises out of the callbacks: Spark would only log it and drop the event.
        """

        def __init__(self, sink: Sink | None = None, pane_paths: Mapping[str, str] | None = None) -> None:
            self.sink: Sink = sink or _print_flush
            self.pane_paths = dict(pane_paths or {})
            self._names: dict[str, str] = {}
            self._idle: set[str] = set()

        def onQueryStarted(self, event: Any) -> None:
            qid = str(event.id)
            self._names[qid] = event.name or qid[:8]
            self._emit(lambda: [f"[{self._names[qid]}] started (id {event.id}, run {event.runId})"])

        def onQueryProgress(self, event: Any) -> None:
            self._idle.discard(str(event.progress.id))
            self._emit(lambda: progress_lines(event.progress, self.pane_paths))

        def onQueryIdle(self, event: Any) -> None:
            qid = str(event.id)
            if qid not in self._idle:
                self._idle.add(qid)
                self._emit(lambda: [f"[{self._name(qid)}] idle, waiting for data"])

        def onQueryTerminated(self, event: Any) -> None:
            qid = str(event.id)
            name = self._name(qid)
            self._names.pop(qid, None)
            self._idle.discard(qid)
            if event.exception:
                first = str(event.exception).strip().splitlines()[0]
                self._emit(lambda: [f"[{name}] terminated with error: {first}"])
            else:
                self._emit(lambda: [f"[{name}] terminated"])

        def _name(self, qid: str) -> str:
            return self._names.get(qid, qid[:8])

        def _emit(self, lines: Callable[[], Iterable[str]]) -> None:
            try:
                for line in lines():
                    self.sink(line)
            except Exception:  # a listener must not break the query's listener bus
                _log.exception("windowed progress listener failed")

    WindowedProgressListener.__module__ = __name__
    WindowedProgressListener.__qualname__ = "WindowedProgressListener"
    return WindowedProgressListener


def _source_line(offset: dict, *, batch_id: int, query_name: str, duration_ms: float | None) -> str:
    state, seq = offset.get("state"), offset.get("seq")
    if not isinstance(state, str) or not isinstance(seq, int):
        return (f"[{query_name}] batch {batch_id} | windowed offset without state/seq: "
                f"{json.dumps(offset)[:200]}")
    where = reports_dir(state, seq)
    try:
        report = read_batch_report(state, seq)
    except Exception as e:  # unreadable report: say so on the progress line
        return (f"[{query_name}] batch {batch_id} | windowed report unreadable at {where}: "
                f"{type(e).__name__}: {e}")
    return format_progress(report, batch_id=batch_id, query_name=query_name,
                           duration_ms=duration_ms, missing=where, route=offset.get("route"))


def _windowed_offset(raw: Any) -> dict | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return raw if isinstance(raw, dict) and "windowed" in raw else None


def _parse_shard(path: str, raw: bytes) -> dict:
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"{path}: not a JSON shard report ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a shard report is a JSON object, got {type(data).__name__}")
    for f in _COUNT_FIELDS:
        if not _is_int(data.get(f)):
            raise ValueError(f"{path}: field {f!r} must be an integer, got {data.get(f)!r}")
    wm = data.get("watermark_us")
    if wm is not None and not _is_int(wm):
        raise ValueError(f"{path}: field 'watermark_us' must be an integer or null, got {wm!r}")
    dur = data.get("duration_ms")
    if not isinstance(dur, (int, float)) or isinstance(dur, bool):
        raise ValueError(f"{path}: field 'duration_ms' must be a number, got {dur!r}")
    for f in _OPTIONAL_COUNT_FIELDS:
        if not _is_int(data.get(f, 0)):
            raise ValueError(f"{path}: field {f!r} must be an integer, got {data.get(f)!r}")
    for f in _PHASE_FIELDS:  # absent in reports of earlier releases
        v = data.get(f, 0.0)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ValueError(f"{path}: field {f!r} must be a number, got {v!r}")
    return {**{f: data[f] for f in _COUNT_FIELDS}, "watermark_us": wm, "duration_ms": float(dur),
            **{f: data.get(f, 0) for f in _OPTIONAL_COUNT_FIELDS},
            **{f: float(data.get(f, 0.0)) for f in _PHASE_FIELDS}}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _format_watermark(ts: datetime | None) -> str:
    if ts is None:
        return "none"
    text = ts.strftime("%Y-%m-%dT%H:%M:%S")
    if ts.microsecond % 1000:
        text += f".{ts.microsecond:06d}"
    elif ts.microsecond:
        text += f".{ts.microsecond // 1000:03d}"
    return text + "Z"


def _print_flush(line: str) -> None:
    print(line, flush=True)
