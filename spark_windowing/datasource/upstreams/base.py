"""The upstream interface: what the stream reader asks of a source of events.

An upstream kind is a subclass of :class:`Upstream` in a module of its own, registered by its
``source`` option value in ``spark_windowing.datasource.upstreams.UPSTREAMS``. The reader
(``spark_windowing.datasource.source.reader``) and the option parser (``options``) talk to upstreams only
through this class, by ``upstreams.upstream_for(cfg)`` and ``UPSTREAMS[source]``.

The contract:

* **Positions** are JSON values (numbers, strings, lists, dicts with string keys) that Spark logs
  in the source's offsets (``"up"``, and ``"up2"`` for a join's second stream). The offset log is
  the only record of them, so a kind's position format is part of every checkpoint written with
  it: never change it. A micro-batch reads what lies after its start position up to its end
  position.
* **Replays**: Spark logs an offset before the batch runs and, after a failure, runs the same
  ``(start, end)`` again, possibly on other executors, possibly after more events arrived.
  ``plan(start, end)`` followed by ``read`` must then give exactly the same events (a file
  manifest, a Delta version's log entry, Kafka offset ranges, a pure function of an index).
* **Driver and executors**: construction is cheap and does no I/O. ``check``, the position
  methods, ``plan``, ``initial_offset_fields`` and ``watermark`` run on the driver; ``shard_plan``,
  ``read`` and ``report_fields`` run on the executors, once per key shard; ``schema`` runs on both
  (the executors read it back through ``cached_schema``).
* **Pickling**: an upstream holds only its ``SourceConfig`` (picklable), and travels with the
  stream reader to the executors; ``plan``'s value travels in every partition, so it must be
  picklable too. Clients (brokers, tables) are opened inside the methods, never kept on the object.

Only five methods are required (``schema``, ``initial_position``, ``latest_position``, ``plan``,
``read``); the others have defaults that fit a stream every shard reads whole, with one watermark
for the stream. Kafka overrides them to read partitions disjointly and keep per-partition
watermarks (``spark_windowing.datasource.upstreams.kafka``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa

from spark_windowing.datasource.options.ddl import parse_ddl
from spark_windowing.datasource.storage.layout import SOURCES2_DIR

if TYPE_CHECKING:
    from spark_windowing.datasource.options.config import SourceConfig
    from spark_windowing.operator.spec import OperatorSpec

_SCHEMA_CACHE: dict[tuple, pa.Schema] = {}


class Upstream(ABC):
    """One upstream of a windowed query, for one ``SourceConfig`` (a join has two)."""

    #: Options: ``path`` is required (every kind but the generator and Kafka reads a location).
    needs_path: ClassVar[bool] = True
    #: Options: the kind can be a join's second stream (``source2``).
    joinable: ClassVar[bool] = True
    #: The read limit: ``maxFilesPerTrigger`` is offered to Spark (``ReadMaxFiles``); a kind that
    #: does not count in files (the generator) leaves Spark its event limit or no limit.
    limits_files: ClassVar[bool] = True
    #: Rows: the kind keeps a row it cannot read as a ``_corrupt_record`` row (``upstreams.corrupt``)
    #: instead of failing, so the reader reads that column whatever else it projects.
    keeps_corrupt_rows: ClassVar[bool] = False
    #: Options of the kind's own (lower-cased), parsed by ``parse_options``; a joinable kind's
    #: stream 2 takes them suffixed with ``2``.
    OPTIONS: ClassVar[tuple[str, ...]] = ()
    #: A prefix of client options passed through (``kafka.``): accepted only with this kind.
    OPTION_PREFIX: ClassVar[str | None] = None
    #: An option the kind also takes for ``maxEventsPerBatch`` (Kafka: Spark's ``maxOffsetsPerTrigger``).
    EVENT_LIMIT_ALIAS: ClassVar[str | None] = None

    def __init__(self, cfg: "SourceConfig") -> None:
        self.cfg = cfg

    # ------------------------------------------------------------------ options (driver, load())
    @classmethod
    def parse_options(cls, options: dict[str, str], spec: "OperatorSpec", suffix: str = "") -> Any:
        """The kind's own settings from ``options`` (lower-cased keys; ``suffix`` ``"2"`` for a
        join's stream 2), kept as ``SourceConfig.settings``: picklable, validated here (a bad value
        raises ``OptionError`` naming the option). Default: no settings."""
        return None

    def option(self, name: str) -> str:
        """The option behind ``name`` for this upstream: ``path2``, ``schema2``, ... for a join's stream 2."""
        return name + "2" if self.cfg.manifest_dir == SOURCES2_DIR else name

    # ------------------------------------------------------------------ schema (driver and executors)
    @abstractmethod
    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows ``read`` returns (at ``load()``, and when a shard's state
        is opened). May look at the upstream (a table's schema, a file's footer)."""

    def declared_schema(self) -> pa.Schema | None:
        """The ``schema`` option (``schema2`` for stream 2) as Arrow, if given."""
        return parse_ddl(self.cfg.schema_ddl, option=self.option("schema")) if self.cfg.schema_ddl else None

    def cached_schema(self, columns: list[str] | None) -> pa.Schema:
        """``schema()`` projected to ``columns``, computed once per process (executors)."""
        # the kind's settings too: two streams of one kind without a path (a join of two
        # ``nexmark`` streams) may have different schemas
        key = (self.cfg.source, self.cfg.path, self.cfg.schema_ddl, repr(self.cfg.settings), tuple(columns or ()))
        if key not in _SCHEMA_CACHE:
            schema = self.schema()
            _SCHEMA_CACHE[key] = schema if columns is None else pa.schema([schema.field(c) for c in columns])
        return _SCHEMA_CACHE[key]

    def check(self) -> None:
        """At ``load()``: fail in bounded time when the upstream cannot be reached (Kafka: no
        broker, an unknown topic). Default: nothing to check."""

    # ------------------------------------------------------------------ positions (driver)
    @abstractmethod
    def initial_position(self) -> Any:
        """The position before the first event the query reads (its first offset's ``up``)."""

    @abstractmethod
    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> Any:
        """The furthest position to read up to from ``start``, within the read limits (``None``:
        no limit); ``start`` itself when nothing new arrived. May record what it saw (the file
        manifest) so that a later ``plan`` finds it."""

    def available_now_target(self) -> Any:
        """``Trigger.AvailableNow``: the position the query stops at, taken when it starts; ``None``
        when the upstream bounds itself (the generator's ``totalEvents``). Default: the latest
        position from the initial one, without limits."""
        return self.latest_position(self.initial_position(), None, None)

    def cap(self, up: Any, target: Any, start: Any) -> Any:
        """availableNow: ``up`` limited to ``target`` (never behind ``start``). Default: positions
        are numbers."""
        return min(up, max(target, start))

    def planned_events(self, start: Any, end: Any) -> int | None:
        """The events from ``start`` to ``end`` when the positions tell without reading them
        (``execution=auto`` routes a batch by its size); None when they do not. Default: None."""
        return None

    @abstractmethod
    def plan(self, start: Any, end: Any) -> Any:
        """What a micro-batch from ``start`` to ``end`` reads (a file list, an index range, offset
        ranges): resolved once on the driver, handed to every shard (picklable)."""

    # ------------------------------------------------------------------ reading (executors)
    def shard_plan(self, planned: Any, shard: int) -> Any:
        """The part of ``planned`` shard ``shard`` reads. Default: all of it (the reader then keeps
        the shard's keys by key hash)."""
        return planned

    @property
    def disjoint_shards(self) -> bool:
        """True when ``shard_plan`` gives each shard only events of its own keys (Kafka partitions
        keyed by the window key): the reader keeps every row a shard reads."""
        return False

    @abstractmethod
    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        """The events of ``planned`` (or of a ``shard_plan`` of it), with just ``columns`` (``None``:
        every column) and possibly columns the kind's own hooks need; the same rows every time."""

    # ------------------------------------------------------------------ watermark (driver) and reports (executors)
    def initial_offset_fields(self) -> dict:
        """Fields the kind keeps in the first offset besides its position (Kafka: per-partition
        watermark state ``kwm``). Default: none."""
        return {}

    def watermark(self, start: dict, up: Any, reports: list[dict], *, batch_time: int, max_event: int | None,
                  max_col: int | None, last_input: int | None) -> tuple[int, dict]:
        """The next batch's watermark, and fields to keep in its offset, from the previous offset
        ``start``, the new position ``up`` and the shards' reports of the previous batch. Default:
        the ``watermark`` strategy over the stream's max event time, and no fields."""
        wm = self.cfg.watermark.advance(current=start["wm"], max_event=max_event, max_column=max_col,
                                        batch_time=batch_time, last_input=last_input)
        return wm, {}

    def report_fields(self, events: pa.Table, event_times: Any, planned: Any, shard: int) -> dict:
        """Fields the kind adds to a shard's batch report, from the shard's events before the step
        (``event_times``: the operator's parsed times and the mask of those that may move a
        watermark: readable and not ``future``; ``None`` without events): what
        its ``watermark`` reads next batch, counts for the progress line (Kafka: per-partition max
        event times, skipped offsets). Default: none."""
        return {}
