"""Upkeep of the Delta tables a windowed query writes: compaction, vacuum, log checkpoints.

A stream commits to its tables every micro-batch, so small data files and log entries pile up.
The pane sink (``triggers``, ``retractions``, ``current``) and the windowed source (its late-data
table) keep their tables in shape themselves, on the driver, right after a micro-batch's commits
(nothing else writes the tables then), on a schedule set by these options (both
``writeStream.format("windowed")`` and ``readStream.format("windowed")`` accept them; the source's
apply to its late-data table):

* ``compactEvery`` (default 50): every N micro-batches, ``optimize.compact()`` rewrites small
  files into files of up to 32 MiB (per partition of ``current``; a file that reached it is left
  alone, so a compaction rewrites at most that much per table). ``0``: never.
* ``vacuumEvery`` (default 50): every N micro-batches, ``vacuum()`` deletes data files that left
  the table (rewritten by MERGE or compaction) more than ``vacuumRetention`` ago. ``0``: never.
* ``vacuumRetention`` (default ``7 days``, Delta's default): how long a file stays after it left
  the table, so that a reader of an older table version (time travel, a query that pinned a
  version) still finds its files. Recorded as the table property
  ``delta.deletedFileRetentionDuration``, which Spark's own ``VACUUM`` honours too.
* ``checkpointEvery`` (default 100): every N micro-batches, a Delta log checkpoint (when the table
  changed since the last one), so opening a table reads one Parquet checkpoint plus about N JSON
  entries (one commit per table and micro-batch, plus upkeep commits).

Exactly once is untouched: compaction and vacuum change which files hold the rows, never the rows;
their commits carry no app transaction, and the app-transaction versions the sink's batches
recorded stay in the table's state (and in every checkpoint), so a replayed batch is still
recognised and skipped. The schedule counts micro-batch ids, so a replay may repeat a step, which
is harmless. Vacuum only deletes files the log has removed (never uncommitted files of a batch in
flight).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Mapping

from spark_windowing.datasource.storage import filesystem
from spark_windowing._time import parse_duration
from spark_windowing.errors import OptionError

__all__ = ["MaintenanceOptions", "MAINTENANCE_OPTIONS", "maintain", "last_checkpoint_version", "migrate_current"]

MAINTENANCE_OPTIONS = ("compactevery", "vacuumevery", "vacuumretention", "checkpointevery")
_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
TARGET_FILE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class MaintenanceOptions:
    """When to compact, vacuum and checkpoint (see the module docstring)."""

    compact_every: int = 50
    vacuum_every: int = 50
    vacuum_retention_us: int = 7 * 86_400_000_000
    checkpoint_every: int = 100

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "MaintenanceOptions":
        """From options whose names are already lower-cased; ``OptionError`` on a bad value."""
        retention = options.get("vacuumretention")
        return cls(
            compact_every=_count(options, "compactEvery", cls.compact_every),
            vacuum_every=_count(options, "vacuumEvery", cls.vacuum_every),
            vacuum_retention_us=cls.vacuum_retention_us if retention is None else
            _whole_seconds(parse_duration(retention, option="vacuumRetention"), retention),
            checkpoint_every=_count(options, "checkpointEvery", cls.checkpoint_every, minimum=1),
        )

    @property
    def retention_property(self) -> str:
        return f"interval {self.vacuum_retention_us // 1_000_000} seconds"


def _count(options: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    raw = options.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip()
    if not text.isdigit() or int(text) < minimum:
        raise OptionError(name, raw, "a positive integer" if minimum else "an integer >= 0 (0: never)")
    return int(text)


def _whole_seconds(us: int, raw: str) -> int:
    if us % 1_000_000:
        raise OptionError("vacuumRetention", raw, "a duration in whole seconds, e.g. '7 days', '1 hour'",
                          why="Delta records the retention in seconds")
    return us


def maintain(uri: str, batch_id: int, options: MaintenanceOptions) -> dict[str, object]:
    """The upkeep due after micro-batch ``batch_id`` on the Delta table at ``uri``; returns what
    was done (``compacted``: optimize metrics, ``vacuumed``: files deleted, ``checkpoint``:
    version) with the seconds it took, or ``{}``."""
    from deltalake import DeltaTable

    done: dict[str, object] = {}
    if not upkeep_due(batch_id, options):
        return done        # most batches: not even the table's log is read
    checkpoint = _due(batch_id, options.checkpoint_every)
    started = time.perf_counter()
    table = DeltaTable(uri)
    if _due(batch_id, options.compact_every):
        metrics = table.optimize.compact(target_size=TARGET_FILE_BYTES)
        if metrics.get("numFilesRemoved"):
            done["compacted"] = {k: metrics[k] for k in ("numFilesAdded", "numFilesRemoved")}
            done["compacted"]["bytesRemoved"] = json.loads(metrics["filesRemoved"]).get("totalSize", 0)
            done["compacted"]["bytesAdded"] = json.loads(metrics["filesAdded"]).get("totalSize", 0)
    if _due(batch_id, options.vacuum_every):
        if table.metadata().configuration.get(_RETENTION_PROPERTY) != options.retention_property:
            table.alter.set_table_properties({_RETENTION_PROPERTY: options.retention_property})
            table = DeltaTable(uri)
        # full: every file under the table that the log no longer references and that left it
        # more than the retention ago; the default ("lite") only sees removals after the last log
        # checkpoint, so files removed before a checkpoint would stay forever
        done["vacuumed"] = len(table.vacuum(dry_run=False, enforce_retention_duration=False, full=True))
    version = table.version()
    if checkpoint and version > (last_checkpoint_version(uri) or 0):
        table.create_checkpoint()
        done["checkpoint"] = version
    if done:
        done["seconds"] = round(time.perf_counter() - started, 3)
    return done


def upkeep_due(batch_id: int, options: MaintenanceOptions) -> bool:
    """Whether any upkeep (compaction, vacuum, log checkpoint) is due after ``batch_id``."""
    return any(_due(batch_id, every) for every in (options.compact_every, options.vacuum_every,
                                                   options.checkpoint_every))


def _due(batch_id: int, every: int) -> bool:
    return every > 0 and batch_id > 0 and batch_id % every == 0


def last_checkpoint_version(uri: str) -> int | None:
    """The version of the table's latest log checkpoint (``_delta_log/_last_checkpoint``)."""
    fs, base = filesystem(uri)
    try:
        with fs.open_input_stream(f"{base}/_delta_log/_last_checkpoint") as f:
            return int(json.loads(f.read())["version"])
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return None


def migrate_current(path: str, bucket: str = "10 minutes") -> int:
    """Rewrite ``<path>/current`` of the first (unpartitioned) layout into the layout partitioned
    by ``window_end_bucket`` (``bucket`` wide); returns the rows rewritten (0: already migrated).

    Run it while no query writes ``path``. One overwrite commit: readers see the old or the new
    table, never a mix; the app-transaction versions stay, so the query resumes exactly where it
    stopped. Reads the table's live rows into memory.
    """
    from deltalake import DeltaTable, write_deltalake

    from spark_windowing.datasource.tables import delta

    seconds = parse_duration(bucket, option="bucket", allow_zero=False) // 1_000_000
    uri = delta.table_uri(delta.normalize_root(path), delta.CURRENT)
    table = DeltaTable(uri)
    if delta.current_bucket_seconds(table) is not None:
        return 0
    rows = table.to_pyarrow_table()
    rows = rows.append_column(delta.BUCKET_COLUMN, delta.window_end_buckets(rows["window_end"], seconds))
    table.alter.set_table_properties({delta.CONF_BUCKET: str(seconds)}, raise_if_not_exists=False)
    write_deltalake(uri, rows, mode="overwrite", schema_mode="overwrite", partition_by=[delta.BUCKET_COLUMN])
    return rows.num_rows
