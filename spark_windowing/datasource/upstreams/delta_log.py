"""The ``delta`` upstream: a Delta table read as a stream, commit by commit, by the rules of Spark's
Delta streaming source (delta-spark's ``DeltaSource``), for tables any Delta writer produced.

A position is a table version; a micro-batch reads the commits ``start+1 .. end``. Each commit is
read from its own log entry ``_delta_log/<version>.json`` (as Spark does), so only what a commit
*added* is read, whatever checkpoints (classic or v2) the writer left:

* ``add`` actions with ``dataChange = true`` are the commit's new rows; ``dataChange = false``
  actions (OPTIMIZE, ZORDER, purges) rewrite existing rows and are ignored.
* A commit that also *removes* rows (``remove`` with ``dataChange = true``: DELETE, UPDATE, MERGE,
  overwrite) fails the query, as Spark's source does, unless an option says what to do:
  ``skipChangeCommits`` skips such commits entirely (their rewritten rows are not re-read);
  ``ignoreDeletes`` lets commits that only remove rows (no ``add``) pass.
* Partitioned tables: partition values come from each ``add`` (they are not in the files).
* Column mapping (``name`` or ``id`` mode): files hold physical column names; they are mapped to
  the table's logical names (so a column renamed before the stream's versions reads under its
  new name).
* ``timestamp_ntz`` columns read as naive timestamps, ``timestamp`` as UTC.
* A commit that changes the schema (``metaData`` with other columns or types), or whose files carry
  deletion vectors, is refused with an error naming the version and the cause — never read
  wrongly. (Delta writers put deletion vectors only on files of change commits, which the rules
  above already fail or skip.)
* Reader features beyond those above are refused when the stream starts, naming the feature.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from spark_windowing._arrow import empty_table
from spark_windowing.datasource import storage
from spark_windowing.errors import OptionError

__all__ = ["DeltaSourceError", "DeltaStream", "AddedFile", "SUPPORTED_READER_FEATURES",
           "open_stream", "read_added_files"]

#: Reader features whose tables this source reads correctly (see the module docstring).
#: ``deletionVectors`` only ever mark files of change commits (failed or skipped by the rules),
#: ``v2Checkpoint`` and ``vacuumProtocolCheck`` do not change how a commit's files are read.
SUPPORTED_READER_FEATURES = frozenset({"columnMapping", "timestampNtz", "deletionVectors", "v2Checkpoint",
                                       "vacuumProtocolCheck"})
_PHYSICAL = "delta.columnMapping.physicalName"


class DeltaSourceError(RuntimeError):
    """A commit of a ``delta`` upstream that the stream cannot read under the chosen options."""


@dataclass(frozen=True)
class AddedFile:
    """A data file a commit added: its URI, row count (from the stats, if any) and partition values
    by logical column name (Delta's serialized strings)."""

    uri: str
    rows: int | None
    partition: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class DeltaStream:
    """What the driver knows about the table when the stream starts: its schema (Arrow, logical
    names), the Delta schema JSON fields (to recognise schema changes), and the physical -> logical
    column names (identity without column mapping). Picklable."""

    path: str
    schema: pa.Schema
    fields: tuple[str, ...]            # canonical JSON of each logical field (name, type, nullable)
    physical: tuple[tuple[str, str], ...]
    partition_columns: tuple[str, ...]


def open_stream(path: str, option: str = "path") -> DeltaStream:
    """The stream view of the table at ``path`` (its latest version); refuses unsupported reader
    features, naming them."""
    from deltalake import DeltaTable
    try:
        table = DeltaTable(path)
    except Exception as e:  # deltalake raises TableNotFoundError and friends
        raise OptionError(option, path, "an existing Delta table", why=str(e).splitlines()[0]) from None
    protocol = table.protocol()
    unsupported = sorted(set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES)
    if unsupported:
        raise OptionError(option, path, "a Delta table whose reader features are among "
                          + ", ".join(sorted(SUPPORTED_READER_FEATURES)),
                          why=f"the table uses reader feature(s) {', '.join(unsupported)}, which this source "
                              "cannot read correctly")
    schema_json = json.loads(table.schema().to_json())
    for field in schema_json["fields"]:
        if isinstance(field["type"], dict) and _has_physical_names(field["type"]):
            raise OptionError(option, path, "a Delta table without nested columns under column mapping",
                              why=f"column {field['name']!r} is nested and the table maps column names")
    metadata = table.metadata()
    return DeltaStream(
        path=path, schema=pa.schema(table.schema().to_arrow()),
        fields=tuple(_canonical(f) for f in schema_json["fields"]),
        physical=tuple((f.get("metadata", {}).get(_PHYSICAL, f["name"]), f["name"]) for f in schema_json["fields"]),
        partition_columns=tuple(metadata.partition_columns))


def _has_physical_names(data_type: Any) -> bool:
    if isinstance(data_type, dict):
        fields = data_type.get("fields", ())
        if any(_PHYSICAL in f.get("metadata", {}) for f in fields):
            return True
        return any(_has_physical_names(v) for k, v in data_type.items() if k != "fields") or \
            any(_has_physical_names(f["type"]) for f in fields)
    return False


def _canonical(field: Mapping[str, Any]) -> str:
    """A field's logical definition without metadata (column mapping ids, comments)."""
    def strip(t: Any) -> Any:
        if isinstance(t, dict):
            return {k: strip(v) for k, v in t.items() if k != "metadata"}
        if isinstance(t, list):
            return [strip(v) for v in t]
        return t
    return json.dumps(strip({"name": field["name"], "type": field["type"]}), sort_keys=True)


# --------------------------------------------------------------------------- the log, commit by commit

def commit_actions(path: str, version: int) -> list[dict]:
    """The actions of commit ``version`` from ``_delta_log/<version>.json``."""
    uri = f"{path.rstrip('/')}/_delta_log/{version:020d}.json"
    raw = storage.read_bytes(uri, missing_ok=True)
    if raw is None:
        raise DeltaSourceError(
            f"the delta upstream {path} has no log entry for version {version} (expected {uri}): the "
            "commits were removed by log cleanup (delta.logRetentionDuration) before the stream read "
            "them. Restart the query with a new checkpoint and startingVersion at or after the "
            "oldest version still in _delta_log.")
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def added_files(stream: DeltaStream, version: int, *, skip_change_commits: bool,
                ignore_deletes: bool) -> list[AddedFile]:
    """The files commit ``version`` adds to the stream (see the module docstring for the rules)."""
    actions = commit_actions(stream.path, version)
    adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
    removes = [a["remove"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
    for action in actions:
        if "metaData" in action:
            _check_schema(stream, version, action["metaData"])
        if "protocol" in action:
            _check_protocol(stream, version, action["protocol"])
    if removes:
        operation = next((a["commitInfo"].get("operation") for a in actions if "commitInfo" in a), None)
        example = operation or removes[0]["path"]
        if skip_change_commits:
            return []
        if adds:
            raise DeltaSourceError(
                f"the delta upstream {stream.path} has a data update ({example}) at version {version}: "
                "a commit that removes and adds rows (UPDATE, MERGE, DELETE with deletion vectors, "
                "overwrite) is not an append. Set option skipChangeCommits=true to skip such commits "
                "(as Spark's Delta source does), or restart from a later startingVersion.")
        if not ignore_deletes:
            raise DeltaSourceError(
                f"the delta upstream {stream.path} has deleted data ({example}) at version {version}. "
                "Set option ignoreDeletes=true to ignore commits that only delete rows, or "
                "skipChangeCommits=true to skip every commit that is not an append.")
    for add in adds:
        if add.get("deletionVector"):
            raise DeltaSourceError(
                f"the delta upstream {stream.path} adds {add['path']} with a deletion vector at version "
                f"{version} (table feature deletionVectors) in a commit without removes; this source "
                "does not apply deletion vectors to appended files.")
    return [_added_file(stream, add) for add in adds]


def _added_file(stream: DeltaStream, add: Mapping[str, Any]) -> AddedFile:
    rel = add["path"]
    uri = rel if "://" in rel else f"{stream.path.rstrip('/')}/{unquote(rel)}"
    rows = None
    if add.get("stats"):
        rows = json.loads(add["stats"]).get("numRecords")
    logical = dict(stream.physical)
    partition = tuple(sorted((logical.get(k, k), v) for k, v in (add.get("partitionValues") or {}).items()))
    return AddedFile(uri=uri, rows=rows, partition=partition)


def _check_schema(stream: DeltaStream, version: int, metadata: Mapping[str, Any]) -> None:
    fields = tuple(_canonical(f) for f in json.loads(metadata["schemaString"])["fields"])
    if fields != stream.fields:
        now = [json.loads(f)["name"] for f in stream.fields]
        then = [json.loads(f)["name"] for f in fields]
        raise DeltaSourceError(
            f"the delta upstream {stream.path} has another schema at version {version} (columns "
            f"{then}) than the stream reads ({now}, the table's schema when the query started): a "
            "stream reads one schema. Read from a startingVersion after the schema change, with a "
            "new checkpoint.")
    partitions = tuple(metadata.get("partitionColumns") or ())
    if partitions != stream.partition_columns:
        raise DeltaSourceError(f"the delta upstream {stream.path} changes its partition columns at version "
                               f"{version}: {list(partitions)} (the stream reads {list(stream.partition_columns)})")


def _check_protocol(stream: DeltaStream, version: int, protocol: Mapping[str, Any]) -> None:
    unsupported = sorted(set(protocol.get("readerFeatures") or ()) - SUPPORTED_READER_FEATURES)
    if unsupported:
        raise DeltaSourceError(f"the delta upstream {stream.path} turns on reader feature(s) "
                               f"{', '.join(unsupported)} at version {version}, which this source cannot read")


# --------------------------------------------------------------------------- reading (executors)

def read_added_files(stream: DeltaStream, files: Sequence[AddedFile], columns: list[str] | None) -> pa.Table:
    """The rows of ``files`` with the stream's logical names and types (``columns`` only, if given)."""
    wanted = columns if columns is not None else stream.schema.names
    target = pa.schema([stream.schema.field(c) for c in wanted])
    tables = [_read_one(stream, f, target) for f in files]
    if not tables:
        return empty_table(target)
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _read_one(stream: DeltaStream, added: AddedFile, target: pa.Schema) -> pa.Table:
    fs, path = storage.filesystem(added.uri)
    to_physical = {logical: physical for physical, logical in stream.physical}
    partition = dict(added.partition)
    in_file = [to_physical.get(f.name, f.name) for f in target if f.name not in partition]
    data = pq.read_table(path, filesystem=fs, columns=in_file)
    n = data.num_rows
    columns = []
    for field in target:
        if field.name in partition:
            columns.append(_partition_column(partition[field.name], field, n))
        else:
            columns.append(data.column(to_physical.get(field.name, field.name)).cast(field.type))
    return pa.Table.from_arrays(columns, schema=target)


def _partition_column(value: str | None, field: pa.Field, n: int) -> pa.Array:
    """A partition value (Delta serializes them as strings; null for a null partition) as a column."""
    if value is None:
        return pa.nulls(n, field.type)
    if pa.types.is_timestamp(field.type):
        # Delta writes "yyyy-MM-dd HH:mm:ss[.ffffff]" or ISO-8601 with a trailing Z (UTC)
        moment = datetime.fromisoformat(value.replace("Z", "")).replace(tzinfo=None)
        micros = (moment - datetime(1970, 1, 1)) // timedelta(microseconds=1)
        return pa.array([micros] * n, pa.int64()).cast(field.type)
    return pa.array([value] * n, pa.string()).cast(field.type)
