"""The parsed options of ``spark.readStream.format("windowed")``: the types every layer shares.

A leaf: the option parser (``source.parse``) builds a :class:`SourceConfig`, the upstreams
(``upstreams``) and the stream reader (``source``) read it, and this module imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_windowing.datasource.storage.layout import SOURCES_DIR
from spark_windowing.datasource.tables.maintenance import MaintenanceOptions
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.watermark import WatermarkStrategy

DEFAULT_SHARDS = 2
#: ``malformedEvents``: events whose event time cannot be read go to the late-data table; the
#: query stops when a whole micro-batch holds no readable one before any event had one
#: (``fail-if-all``, default), never stops (``late``), or stops at the first one (``fail``).
MALFORMED_EVENTS = ("fail-if-all", "late", "fail")
#: ``endOfInput``: what the end of an ``availableNow`` run means. ``continue`` (default): nothing,
#: the next run goes on from there; ``fire``: the input is bounded and ends here (a last batch with
#: the watermark at the end of time fires and closes every window).
END_OF_INPUT = ("continue", "fire")
#: ``execution``: where the windowed operator runs: chosen per micro-batch (``auto``, default:
#: ``spark_windowing.datasource.source.auto``), one Spark task per key shard on the executors
#: (``executors``), or the driver's planning process, the source's task running no Python
#: (``driver``: ``spark_windowing.datasource.source.driver``).
EXECUTION = ("auto", "executors", "driver")

#: ``newCheckpoint``: a query started from a new checkpoint (a deleted one, a pipeline's full
#: refresh) over a state location holding another run's state: ``refuse`` (default) or ``reset``
#: (remove that state and start over) (``spark_windowing.datasource.source.runs``).
NEW_CHECKPOINT = ("refuse", "reset")
#: Internal column holding the batch time for processing-time windows (no timestampColumn).
PROC_TIME_COLUMN = "__batch_time"


@dataclass(frozen=True)
class SourceConfig:
    """Everything the stream reader needs; picklable, shipped to the executors."""

    source: str
    path: str | None
    spec: OperatorSpec
    watermark: WatermarkStrategy
    state_location: str
    shards: int
    late_data_path: str | None = None
    max_events_per_batch: int | None = None
    max_files_per_trigger: int | None = None
    starting_version: int | None = None
    skip_change_commits: bool = False        # delta: skip commits that are not appends (Spark's option)
    ignore_deletes: bool = False             # delta: let commits that only delete rows pass
    schema_ddl: str | None = None
    settings: Any = None                     # the upstream kind's own (Upstream.parse_options): GeneratorConfig, ...
    processing_time_windows: bool = False
    late_maintenance: MaintenanceOptions = MaintenanceOptions()
    query_name: str | None = None
    state_buckets: int = 64                  # key buckets per shard (unit of loading / spilling / rewriting)
    state_memory_rows: int = 2_000_000       # windows per shard kept in memory; more spill to stateLocation
    claim_wait: float = 3.0                  # seconds a slot leaves a shard to the executor holding it
    manifest_dir: str = SOURCES_DIR          # under stateLocation: the file source's manifest
    stream2: "SourceConfig | None" = None    # join: the second upstream (its own source/path/limits)
    malformed_events: str = "fail-if-all"    # events without a readable event time (MALFORMED_EVENTS)
    end_of_input: str = "continue"           # availableNow: "fire" closes every window at the input's end
    execution: str = "auto"                  # where the operator steps (EXECUTION)
    auto_executors_above: int | None = None  # execution=auto's crossover, events per batch (None: source.auto's)
    new_checkpoint: str = "refuse"           # a new checkpoint over another run's state (NEW_CHECKPOINT)
