"""Where the plugin keeps things on storage: every name and path, in one place (a leaf module).

A query's state location ``S`` (``stateLocation``)::

    S/spec.json                         shard count, key buckets and spec fingerprint it was written with
    S/shards/<shard:04d>/               one state store per shard (``spark_windowing.state.store``)
    S/reports/<seq>/shard-<i>.<summary>.json
                                        what each shard's step did in micro-batch ``seq``; the name
                                        carries what the driver plans from (``shard_reports``)
    S/claims/<seq>/shard-<i>            which partition ran shard ``i`` in micro-batch ``seq`` (``affinity``)
    S/sources/manifest.json             the file source's file list (``sources2``: a join's stream 2)
    S/late.json                         the late table the state's batches wrote to: its path and Delta
                                        table id (``tables.late``: a late table deleted alone is refused)

A pane sink's root ``P`` (``writeStream.format("windowed")``)::

    P/triggers, P/retractions, P/current    the Delta pane tables (``spark_windowing.datasource.tables.delta``)
    P/_staging/                             the sink's per-batch scratch files
    P/_metrics/<batchId>.json               what each micro-batch did to the tables
    P/_spec.json                            the windowing spec whose panes the tables hold (``pane_spec``)
    P/_writer.json                          the writer lease: the query writing the tables, renewed per batch

Every commit the sink makes carries the micro-batch id as custom commit metadata
(:data:`BATCH_ID_KEY`); a ``source=panes`` upstream reads it back to find complete batches.

>>> reports_dir("s3://b/state", 7)
's3://b/state/reports/7'
>>> table_uri("/lake/panes", CURRENT)
'/lake/panes/current'
"""

from __future__ import annotations

# ---------------------------------------------------------------------- a pane sink's root
TRIGGERS, RETRACTIONS, CURRENT = "triggers", "retractions", "current"
#: Every pane table.
TABLES: tuple[str, ...] = (CURRENT, TRIGGERS, RETRACTIONS)
#: The append-only tables: every pane row exactly once (``current`` is derived from them).
HISTORY_TABLES: tuple[str, ...] = (TRIGGERS, RETRACTIONS)
STAGING = "_staging"
METRICS_DIR = "_metrics"
SINK_SPEC = "_spec.json"
WRITER_LEASE = "_writer.json"
#: The custom commit metadata key holding the micro-batch id of a sink commit.
BATCH_ID_KEY = "spark_windowing.batchId"


def table_uri(root: str, table: str) -> str:
    """The URI of pane table ``table`` under sink root ``root``."""
    return f"{root.rstrip('/')}/{table}"


def sink_spec_uri(root: str) -> str:
    """Where the sink records the spec that produced the panes under ``root``."""
    return f"{root.rstrip('/')}/{SINK_SPEC}"


def writer_lease_uri(root: str) -> str:
    """The writer lease of the pane tables under ``root``."""
    return f"{root.rstrip('/')}/{WRITER_LEASE}"


def metrics_path(base: str, batch_id: int) -> str:
    """The metrics file of micro-batch ``batch_id`` under ``base`` (a root or its path in a filesystem)."""
    return f"{base}/{METRICS_DIR}/{batch_id}.json"


# ---------------------------------------------------------------------- a query's state location
REPORTS_DIR = "reports"
CLAIMS_DIR = "claims"
SHARDS_DIR = "shards"
SPEC_MARKER = "spec.json"
#: The run (``"run"`` of the offsets: one per checkpoint) whose state the location holds.
RUN_MARKER = "run.json"
#: The late table (``lateDataPath``) whose rows the state's batches wrote: path and Delta table id.
LATE_MARKER = "late.json"
#: The file source's manifest directory; a join's second stream uses ``sources2``.
SOURCES_DIR, SOURCES2_DIR = "sources", "sources2"


def spec_marker(state: str) -> str:
    return f"{state}/{SPEC_MARKER}"


def run_marker(state: str) -> str:
    return f"{state}/{RUN_MARKER}"


def late_marker(state: str) -> str:
    return f"{state}/{LATE_MARKER}"


def store_root(state: str, shard: int) -> str:
    """The root of shard ``shard``'s state store."""
    return f"{state}/{SHARDS_DIR}/{shard:04d}"


def reports_dir(state: str, seq: int | None = None) -> str:
    """The reports directory, or that of micro-batch ``seq``."""
    base = f"{state.rstrip('/')}/{REPORTS_DIR}"
    return base if seq is None else f"{base}/{int(seq)}"


def claims_dir(state: str, seq: int | None = None) -> str:
    """The shard claims directory, or that of micro-batch ``seq``."""
    base = f"{state.rstrip('/')}/{CLAIMS_DIR}"
    return base if seq is None else f"{base}/{int(seq)}"


def source_manifest(state: str, sources_dir: str = SOURCES_DIR) -> str:
    return f"{state}/{sources_dir}/manifest.json"
