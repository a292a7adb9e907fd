"""What each micro-batch did to the pane tables: ``P/_metrics/<batchId>.json``, one per batch.

Written by the sink's commit on the driver (``spark_windowing.datasource.sink.writer``), read by the progress line
(``spark_windowing.datasource.progress``) and by benchmarks. Per table (``triggers``, ``retractions``,
``current``): ``files_added``, ``bytes_added``, ``files_removed``, ``bytes_removed`` of the
batch's commit (for ``current``, its MERGE, plus ``rows_copied`` and ``files_scanned``: the
target rows rewritten unchanged and the files read), and ``maintenance`` when compaction, vacuum
or a log checkpoint ran (``spark_windowing.datasource.tables.maintenance``). A table the batch did not change is absent.
``commit_ms``: the driver's commit of the batch by phase, in milliseconds (the progress line
prints their sum and the phases of 1 ms or more).
The files of the last 100 batches are kept.
"""

from __future__ import annotations

import json

from spark_windowing.datasource.storage.layout import METRICS_DIR, TABLES, metrics_path
from spark_windowing.datasource.storage import filesystem

__all__ = ["METRICS_DIR", "write_batch_metrics", "read_batch_metrics", "format_sink_metrics", "format_bytes"]

_KEEP = 100


def write_batch_metrics(root: str, batch_id: int, tables: dict[str, dict], *,
                        commit_ms: dict[str, float] | None = None) -> None:
    """Record what batch ``batch_id`` wrote (``tables``) and how long the driver's commit took per
    phase (``commit_ms``: ``append`` to triggers/retractions, ``merge`` into current, ``close``
    windows in current, ``clean`` staging, ``upkeep``; milliseconds)."""
    fs, base = filesystem(root)
    fs.create_dir(f"{base}/{METRICS_DIR}", recursive=True)
    record = {"batch_id": batch_id, "tables": tables}
    if commit_ms:
        record["commit_ms"] = commit_ms
    with fs.open_output_stream(metrics_path(base, batch_id)) as f:
        f.write(json.dumps(record).encode())
    try:
        fs.delete_file(metrics_path(base, batch_id - _KEEP))
    except FileNotFoundError:
        pass


def read_batch_metrics(root: str, batch_id: int) -> dict | None:
    """What the sink recorded for ``batch_id`` (None: nothing, e.g. not committed yet)."""
    fs, base = filesystem(root)
    try:
        with fs.open_input_stream(metrics_path(base, batch_id)) as f:
            return json.loads(f.read())
    except (FileNotFoundError, OSError, ValueError):
        return None


def format_sink_metrics(metrics: dict) -> str:
    """A compact summary: bytes written per table (``current``: + written / - dropped, files
    read by the MERGE) and the upkeep that ran.

    >>> format_sink_metrics({"tables": {"current": {"files_added": 2, "bytes_added": 1_200_000,
    ...     "files_removed": 2, "bytes_removed": 1_100_000, "files_scanned": 2},
    ...     "triggers": {"files_added": 2, "bytes_added": 85_000, "maintenance": {
    ...         "compacted": {"numFilesAdded": 1, "numFilesRemoved": 50}, "vacuumed": 48}}}})
    'sink current +1.2 MB -1.1 MB (2 files read), triggers +85.0 kB | upkeep triggers: compacted 50 -> 1 files, vacuumed 48'
    >>> format_sink_metrics({"tables": {"triggers": {"files_added": 1, "bytes_added": 9_000}},
    ...     "commit_ms": {"append": 14.2, "merge": 61.0, "close": 0.4, "clean": 0.3, "upkeep": 0.1}})
    'sink triggers +9.0 kB in 76 ms (append 14, merge 61)'
    """
    tables = metrics.get("tables", {})
    parts, upkeep = [], []
    for name in TABLES:
        t = tables.get(name)
        if not t:
            continue
        if t.get("files_added") or t.get("files_removed"):
            text = f"{name} +{format_bytes(t.get('bytes_added', 0))}"
            if t.get("files_removed"):
                text += f" -{format_bytes(t.get('bytes_removed', 0))}"
            if "files_scanned" in t:
                text += f" ({t['files_scanned']} files read)"
            parts.append(text)
        m = t.get("maintenance")
        if m:
            did = []
            if "compacted" in m:
                did.append(f"compacted {m['compacted']['numFilesRemoved']} -> {m['compacted']['numFilesAdded']} files")
            if m.get("vacuumed"):
                did.append(f"vacuumed {m['vacuumed']}")
            if "checkpoint" in m:
                did.append(f"checkpoint at v{m['checkpoint']}")
            if did:
                upkeep.append(f"{name}: " + ", ".join(did))
    line = "sink " + (", ".join(parts) if parts else "nothing written")
    phases = metrics.get("commit_ms") or {}
    if phases:
        slow = [f"{name} {ms:,.0f}" for name, ms in phases.items() if ms >= 1]
        line += f" in {sum(phases.values()):,.0f} ms" + (f" ({', '.join(slow)})" if slow else "")
    return line + (" | upkeep " + "; ".join(upkeep) if upkeep else "")


def format_bytes(n: int) -> str:
    """``n`` bytes as ``12 B``, ``24.0 kB``, ``2.1 MB``, ... (powers of 1000)."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
