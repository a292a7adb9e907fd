"""The windowed sink's options and the message a task sends its commit, shared by the task side
(``task``) and the driver side (``writer``, ``commit``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from dataclasses import dataclass
from typing import Mapping

from pyspark.sql.datasource import WriterCommitMessage

from spark_windowing.datasource.tables import delta
from spark_windowing.datasource.tables.delta import DataFile
from spark_windowing.datasource.tables.maintenance import MaintenanceOptions
from spark_windowing._time import parse_duration
from spark_windowing.errors import OptionError
from spark_windowing._parse import parse_bool

DEFAULT_MAX_ROWS_PER_FILE = 500_000
DEFAULT_WRITER_LEASE_US = 300_000_000
APP_ID_KEY = "spark_windowing.appId"   # commitInfo field: the query that made a commit
APP_ID_PREFIX = "spark-windowing-sink-"


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, parsed once on the driver."""

    root: str
    app_id: str | None = None
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE
    writer_lease_us: int = DEFAULT_WRITER_LEASE_US
    current_bucket_seconds: int | None = None      # None: the table's (a new table: the default)
    maintenance: MaintenanceOptions = MaintenanceOptions()
    allow_spec_change: bool = False                 # add panes of another spec to the tables on purpose
    checkpoint: str | None = None                   # the query's checkpointLocation option, when given

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        opts = {k.lower(): v for k, v in options.items()}
        path = opts.get("path")
        if not path or not path.strip():
            raise OptionError("path", path, "the root directory or URI of the pane tables, "
                              "e.g. .option('path', '/lake/panes/clicks')", why="required by the windowed sink")
        app_id = opts.get("appid")
        if app_id is not None and not app_id.strip():
            raise OptionError("appId", app_id, "a non-empty string", why="empty")
        raw_rows = opts.get("maxrowsperfile", str(DEFAULT_MAX_ROWS_PER_FILE))
        try:
            max_rows = int(raw_rows)
        except ValueError:
            max_rows = 0
        if max_rows <= 0:
            raise OptionError("maxRowsPerFile", raw_rows, "a positive integer", why="not a positive integer")
        lease = parse_duration(opts.get("writerlease", "5 minutes"), option="writerLease")
        return cls(root=delta.normalize_root(path), app_id=app_id.strip() if app_id else None,
                   max_rows_per_file=max_rows, writer_lease_us=lease,
                   current_bucket_seconds=_bucket_seconds(opts.get("currentbucket")),
                   maintenance=MaintenanceOptions.parse(opts),
                   allow_spec_change=parse_bool("allowSpecChange", opts.get("allowspecchange", "false")),
                   checkpoint=opts.get("checkpointlocation") or None)


def _bucket_seconds(raw: str | None) -> int | None:
    if raw is None:
        return None
    us = parse_duration(raw, option="currentBucket", allow_zero=False)
    if us % 1_000_000:
        raise OptionError("currentBucket", raw, "a duration in whole seconds, e.g. '10 minutes', '1 hour'",
                          why="buckets are whole seconds")
    return us // 1_000_000


@dataclass
class PaneFilesMessage(WriterCommitMessage):
    """What one task wrote: uncommitted data files and staged retraction-only key+windows."""

    query_id: str | None
    batch_id: int | None
    files: tuple[DataFile, ...] = ()
    deletes: tuple[str, ...] = ()      # Parquet files under P/_staging: key + window columns


def iso_us(us: int) -> str:
    """``us`` (µs since the epoch) as ISO-8601 UTC, exact to the microsecond up to the end of time
    (9999-12-31T23:59:59.999999Z, the watermark of an input's end), which ``us / 1e6`` rounds into
    year 10000."""
    return (_EPOCH + timedelta(microseconds=int(us))).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
