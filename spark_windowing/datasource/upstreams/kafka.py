"""The Kafka upstream (``source=kafka``): options named as Spark's Kafka source names them,
positions per topic-partition, records decoded into Arrow, per-partition watermarks.

Positions. The upstream position in the windowed source's offset is Spark's form,
``{"<topic>": {"<partition>": <next offset>}}``: a micro-batch reads, per partition, the records
from the previous offset's position up to (not including) its own. Spark logs the offset before
the batch runs, so a replayed batch reads exactly the same records. Partitions are assigned to
the client explicitly (``assign`` with those offsets); nothing is committed to a consumer group.
Partitions that appear later (new partitions, new topics matching ``subscribePattern``) are read
from offset 0, as in Spark (an earliest offset above 0 is data loss).

Data loss. When a partition's earliest available offset is past the position to read from
(retention deleted the records first), ``failOnDataLoss=true`` (the default) fails the query
naming the topic, partition and missing offsets; ``false`` continues from the earliest offset
and counts the skipped offsets (``skipped_offsets`` in the batch's report, and a warning).

Rows. The value is decoded by ``valueFormat`` (``json`` / ``csv`` with ``schema`` = DDL, ``avro``
with ``schema`` = the Avro schema JSON, the 5-byte Confluent header accepted, ``raw``: no
decoding) and the record's own columns follow, as Spark's Kafka rows have them: ``key``
(binary), ``topic``, ``partition``, ``offset``, ``timestamp``, ``timestampType``, ``headers``
(list of key/value) and the raw ``value``. A value field with the name of a record column wins.
A value that cannot be decoded becomes a row whose value fields are all null, so it reaches the
late-data table as ``malformed``, with its topic, partition, offset and raw value.

Per-partition watermarks (Flink's ``KafkaSource`` with per-split watermarks and
``withIdleness``): with ``watermark=bounded(d)`` each partition's watermark is its max event time
− d, and the source's is the minimum over the active partitions. A partition with no record for
``watermarkIdleTimeout`` (processing time, from the batch times in the offsets) is idle and stops
holding it back; when every partition is idle the stream is quiet and the usual quiet-stream rule
applies. The per-partition state lives in the offset (``kwm``), so a replay sees the same watermark.

Sharding. With ``keyColumns=key`` the window key is the record key: Kafka's partitioner puts a key
in one partition (the co-partitioning rule of Kafka Streams), so each shard reads a disjoint set
of partitions (``shard_of_partition``) and nothing else. With other key columns each shard reads
every record of the batch and keeps its keys (reads and decodes ``shards`` times the batch).

The options: ``kafka_options``; values decoded into Arrow: ``kafka_values``; per-partition
watermarks: ``kafka_watermarks``; the reader reaches all of it only through ``KafkaUpstream`` (the ``Upstream`` interface, at the end).
"""

from __future__ import annotations

import logging
import re
import time
import zlib
from typing import Any

import pyarrow as pa

from spark_windowing._arrow import empty_table
from spark_windowing.datasource.upstreams.base import Upstream
from spark_windowing.datasource.upstreams.kafka_options import (METADATA_TIMEOUT_S, OPTIONS, KafkaConfig,
                                                                parse_kafka_options)
from spark_windowing.datasource.upstreams.kafka_values import records_table, row_schema
from spark_windowing.datasource.upstreams.kafka_watermarks import (advance_partition_state, partition_keys,
                                                                   partition_max, partition_watermark,
                                                                   with_record_columns)
from spark_windowing.errors import OptionError

_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------- broker metadata (driver)
def _admin(cfg: KafkaConfig):
    from confluent_kafka.admin import AdminClient
    return AdminClient({**cfg.client_conf(), "log_level": 0})


def _consumer(cfg: KafkaConfig, **extra):
    from confluent_kafka import Consumer
    return Consumer({**cfg.client_conf(), "group.id": "spark-windowing-no-commits", "enable.auto.commit": False,
                     "enable.auto.offset.store": False, "log_level": 0, **extra})


def topic_partitions(cfg: KafkaConfig, timeout: float | None = None) -> list[tuple[str, int]]:
    """The (topic, partition)s this query reads now, sorted. Raises a clear error when no broker
    answers within ``timeout`` (default ``METADATA_TIMEOUT_S``) or a subscribed / assigned topic
    does not exist."""
    from confluent_kafka import KafkaException
    timeout = METADATA_TIMEOUT_S if timeout is None else timeout
    try:
        md = _admin(cfg).list_topics(timeout=timeout)
    except KafkaException as e:
        raise OptionError("kafka.bootstrap.servers", cfg.bootstrap, "reachable Kafka brokers host:port[,...]",
                          why=f"no broker answered within {timeout:g} s ({e.args[0].str() if e.args else e})") from None
    topics = {name: sorted(t.partitions) for name, t in md.topics.items()
              if t.error is None and not name.startswith("__")}
    if cfg.pattern is not None:
        rx = re.compile(cfg.pattern)
        return sorted((t, p) for t, ps in topics.items() if rx.fullmatch(t) for p in ps)
    wanted = list(cfg.assign) if cfg.assign is not None else list(cfg.subscribe)
    missing = [t for t in wanted if t not in topics]
    if missing:
        opt = "assign" if cfg.assign is not None else "subscribe"
        raise OptionError(opt, ",".join(wanted), f"existing topics (the broker has: {', '.join(sorted(topics)) or 'none'})",
                          why=f"unknown topic(s) {', '.join(missing)}")
    if cfg.assign is not None:
        return sorted((t, p) for t, ps in cfg.assign.items() for p in ps)
    return sorted((t, p) for t in wanted for p in topics[t])


def watermark_offsets(cfg: KafkaConfig, tps: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(earliest, next) offset of each partition, from the broker."""
    from confluent_kafka import KafkaException, TopicPartition
    c = _consumer(cfg)
    try:
        out = {}
        for t, p in tps:
            try:
                out[(t, p)] = c.get_watermark_offsets(TopicPartition(t, p), timeout=METADATA_TIMEOUT_S)
            except KafkaException as e:
                raise RuntimeError(f"Kafka: cannot read the offsets of {t}-{p} from {cfg.bootstrap} within "
                                   f"{METADATA_TIMEOUT_S:g} s: {e}") from None
        return out
    finally:
        c.close()


def _get(pos: dict, t: str, p: int) -> int | None:
    v = pos.get(t, {}).get(str(p))
    return None if v is None else int(v)


def _put(pos: dict, t: str, p: int, off: int) -> None:
    pos.setdefault(t, {})[str(p)] = int(off)


def initial_position(cfg: KafkaConfig) -> dict:
    """``startingOffsets`` resolved against the broker: ``{topic: {partition: offset}}``."""
    tps = topic_partitions(cfg)
    marks = watermark_offsets(cfg, tps)
    pos: dict = {}
    for t, p in tps:
        low, high = marks[(t, p)]
        if cfg.starting == "earliest":
            off = low
        elif cfg.starting == "latest":
            off = high
        else:
            given = _get(cfg.starting, t, p)
            off = low if given is None or given == -2 else high if given == -1 else given
        _put(pos, t, p, off)
    return pos


def latest_position(cfg: KafkaConfig, start: dict, max_rows: int | None) -> dict:
    """How far the next micro-batch reads: every partition's latest offset, or — with
    ``maxOffsetsPerTrigger`` — at most that many offsets in all, split over the partitions in
    proportion to how far each is behind (Spark's rate limit). New partitions start at their
    earliest offset. Data loss is checked here (``failOnDataLoss``)."""
    tps = topic_partitions(cfg)
    marks = watermark_offsets(cfg, tps)
    begin: dict[tuple[str, int], int] = {}
    for t, p in tps:
        low, high = marks[(t, p)]
        s = _get(start, t, p)
        begin[(t, p)] = low if s is None else max(s, low) if not cfg.fail_on_data_loss else s
        if s is not None and s < low and cfg.fail_on_data_loss:
            raise RuntimeError(
                f"Kafka data loss: topic {t} partition {p}: offsets {s}..{low - 1} were deleted (retention) "
                f"before they were read; the earliest available offset is {low}. Set failOnDataLoss=false "
                "to skip them and continue.")
    lag = {tp: max(0, marks[tp][1] - begin[tp]) for tp in tps}
    total = sum(lag.values())
    take = dict(lag)
    if max_rows is not None and total > max_rows:
        take = {tp: (n * max_rows) // total for tp, n in lag.items()}
        rest = max_rows - sum(take.values())
        for tp in sorted(lag, key=lambda tp: (-(lag[tp] * max_rows % total), tp)):
            if rest <= 0:
                break
            if take[tp] < lag[tp]:
                take[tp], rest = take[tp] + 1, rest - 1
    end: dict = {}
    for tp in tps:
        _put(end, tp[0], tp[1], begin[tp] + take[tp])
    for t, ps in start.items():  # partitions that vanished (topic deleted) keep their position
        for p, off in ps.items():
            if _get(end, t, int(p)) is None:
                _put(end, t, int(p), off)
    return end


def cap(up: dict, target: dict, start: dict) -> dict:
    """availableNow: no partition beyond the target taken when the query started; a partition
    that appeared since is read up to where it was first seen, then held."""
    out: dict = {}
    for t, ps in up.items():
        for p, off in ps.items():
            s, tgt = _get(start, t, int(p)), _get(target, t, int(p))
            if tgt is None:
                new = int(off) if s is None else s
            else:
                new = min(int(off), tgt if s is None else max(tgt, s))
            _put(out, t, int(p), new)
    return out


def plan(cfg: KafkaConfig, start: dict, end: dict) -> dict:
    """The records a micro-batch reads: ``[topic, partition, from, to)`` ranges, the starts
    clamped to the earliest available offset when ``failOnDataLoss=false`` (``skipped`` counts
    the offsets jumped over)."""
    ranges, skipped = [], 0
    todo = [(t, int(p), int(e)) for t, ps in end.items() for p, e in ps.items()]
    todo = [(t, p, _get(start, t, p), e) for t, p, e in sorted(todo)]
    added = [(t, p) for t, p, s, _ in todo if s is None]
    lows = {}
    if added or not cfg.fail_on_data_loss:
        lows = {tp: m[0] for tp, m in watermark_offsets(
            cfg, [(t, p) for t, p, s, _ in todo if s is None or not cfg.fail_on_data_loss]).items()}
    for t, p, s, e in todo:
        if s is None:  # a partition added since the previous batch: from offset 0, as Spark's source
            s = 0
            if lows[(t, p)] > 0 and cfg.fail_on_data_loss:
                raise RuntimeError(
                    f"Kafka data loss: topic {t} partition {p} was added with its earliest offset at "
                    f"{lows[(t, p)]}, not 0: offsets 0..{lows[(t, p)] - 1} were deleted (retention) before "
                    "they were read. Set failOnDataLoss=false to skip them and continue.")
        if (t, p) in lows and lows[(t, p)] > s:
            low = min(lows[(t, p)], e)
            skipped += low - s
            s = low
        if e > s:
            ranges.append([t, p, s, e])
    if skipped:
        _log.warning("Kafka: skipped %d offsets deleted before they were read (failOnDataLoss=false)", skipped)
    return {"ranges": ranges, "skipped": skipped}


def shard_of_partition(topic: str, partition: int, shards: int) -> int:
    """The shard that reads a partition when shards read disjoint partitions (stable when
    partitions are added)."""
    return (zlib.crc32(topic.encode()) + partition) % shards


# ---------------------------------------------------------------------- reading (executors)
def read_ranges(cfg: KafkaConfig, fmt_schema: tuple[str, str | None], ranges: list) -> pa.Table:
    """Every record of ``ranges`` (exactly ``[from, to)`` per partition), decoded, ordered by
    topic, partition and offset."""
    from confluent_kafka import KafkaError, TopicPartition
    fmt, schema_text = fmt_schema
    schema = row_schema(fmt, schema_text)
    if not ranges:
        return empty_table(schema)
    want = {(t, p): (s, e) for t, p, s, e in ranges}
    got: dict[tuple[str, int], list] = {tp: [] for tp in want}
    c = _consumer(cfg, **{"enable.partition.eof": True, "auto.offset.reset": "error",
                          "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20})
    try:
        c.assign([TopicPartition(t, p, s) for (t, p), (s, _) in want.items()])
        open_ = set(want)
        deadline = time.monotonic() + cfg.poll_timeout_ms / 1000
        while open_:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka: records not received within kafkaConsumer.pollTimeoutMs="
                                   f"{cfg.poll_timeout_ms} from {cfg.bootstrap}: " + ", ".join(
                                       f"{t}-{p} [{want[(t, p)][0]}, {want[(t, p)][1]})" for t, p in sorted(open_)))
            for m in c.consume(num_messages=_still_wanted(want, got, open_), timeout=0.5):
                tp = (m.topic(), m.partition())
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if tp in open_ and m.offset() >= want[tp][1]:
                            open_.discard(tp)
                        continue
                    if err.code() in (KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET):
                        raise RuntimeError(f"Kafka data loss: {tp[0]}-{tp[1]}: offsets from {want[tp][0]} are no "
                                           "longer available (deleted while the batch ran)")
                    if err.retriable() or not err.fatal():
                        continue
                    raise RuntimeError(f"Kafka: {err.str()}")
                if tp not in open_:
                    continue
                off = m.offset()
                end = want[tp][1]
                if off < end:
                    got[tp].append(m)
                if off >= end - 1:
                    open_.discard(tp)
    finally:
        c.close()
    messages = [m for tp in sorted(got) for m in got[tp]]
    return records_table(messages, fmt, schema_text, schema)


def _still_wanted(want: dict, got: dict, open_: set) -> int:
    """How many messages to ask ``consume`` for: the records the open ranges still miss (at least
    1, at most 100 000). librdkafka's batch consume waits for that many messages or its timeout,
    so asking for more than the ranges hold would cost every read the whole timeout."""
    missing = sum(want[tp][1] - want[tp][0] - len(got[tp]) for tp in open_)
    return min(100_000, max(1, missing))


# ---------------------------------------------------------------------- the upstream interface
class KafkaUpstream(Upstream):
    """Positions: ``{topic: {partition: next offset}}``. Settings: a ``KafkaConfig``. Overrides the
    interface's sharding and watermark hooks (see the module docstring)."""

    needs_path = False
    joinable = False
    keeps_corrupt_rows = True
    OPTIONS = OPTIONS
    OPTION_PREFIX = "kafka."
    EVENT_LIMIT_ALIAS = "maxOffsetsPerTrigger"

    @classmethod
    def parse_options(cls, options: dict[str, str], spec, suffix: str = "") -> KafkaConfig:
        """``kafka.*`` and the options above; refuses ``maxOffsetsPerTrigger`` with
        ``maxEventsPerBatch``, and a join (stream 1 of a join cannot be Kafka either)."""
        config = parse_kafka_options(options, spec.key_columns)
        if options.get("maxoffsetspertrigger") and options.get("maxeventsperbatch"):
            raise OptionError("maxOffsetsPerTrigger", options["maxoffsetspertrigger"],
                              "one of maxOffsetsPerTrigger, maxEventsPerBatch", why="both given")
        if spec.join is not None:
            raise OptionError("join", options.get("join"), "join with delta, parquet, json, csv or generator streams",
                              why="a Kafka stream cannot be joined in this version")
        return config

    @property
    def settings(self) -> KafkaConfig:
        return self.cfg.settings

    def check(self) -> None:
        topic_partitions(self.settings)  # a broker that is down or an unknown topic fails in bounded time

    def schema(self) -> pa.Schema:
        return row_schema(self.settings.value_format, self.cfg.schema_ddl)

    def initial_position(self) -> dict:
        return initial_position(self.settings)

    def latest_position(self, start: Any, max_files: int | None, max_rows: int | None) -> dict:
        return latest_position(self.settings, start, max_rows)

    def available_now_target(self) -> dict:
        """Every partition's latest offset now (partitions not yet read included)."""
        return latest_position(self.settings, {}, None)

    def cap(self, up: Any, target: Any, start: Any) -> dict:
        return cap(up, target, start)

    def planned_events(self, start: Any, end: Any) -> int | None:
        """The offsets between (a compacted topic has fewer records); None: a partition new to ``start``."""
        starts = [_get(start, t, int(p)) for t, ps in end.items() for p in ps]
        return None if None in starts else sum(int(e) for ps in end.values() for e in ps.values()) - sum(starts)

    def plan(self, start: Any, end: Any) -> dict:
        return plan(self.settings, start, end)

    def shard_plan(self, planned: Any, shard: int) -> dict:
        """A topic keyed by the window key (``keyColumns=key``) is read partition-disjointly;
        without key columns only shard 0 reads; otherwise every shard reads the whole plan and
        keeps its keys."""
        shards = self.cfg.shards
        if shards == 1:
            return planned
        if self.settings.by_partition:
            return {**planned, "ranges": [r for r in planned["ranges"] if shard_of_partition(r[0], r[1], shards) == shard]}
        if not self.cfg.spec.key_columns and shard != 0:
            return {**planned, "ranges": []}
        return planned

    @property
    def disjoint_shards(self) -> bool:
        return self.settings.by_partition

    def read(self, planned: Any, columns: list[str] | None) -> pa.Table:
        """The records of the plan's ranges; a projection keeps ``topic`` and ``partition``."""
        t = read_ranges(self.settings, (self.settings.value_format, self.cfg.schema_ddl), planned["ranges"])
        return t if columns is None else t.select(with_record_columns(columns))

    def initial_offset_fields(self) -> dict:
        return {"kwm": advance_partition_state(None, {}, {}, [], 0)}

    def watermark(self, start: dict, up: Any, reports: list[dict], *, batch_time: int, max_event: int | None,
                  max_col: int | None, last_input: int | None) -> tuple[int, dict]:
        """The minimum over the active partitions; the per-partition state goes in ``kwm``."""
        kwm = advance_partition_state(start.get("kwm"), start["up"], up, reports, batch_time)
        wm = partition_watermark(self.cfg.watermark, current=start["wm"], kwm=kwm, partitions=partition_keys(up),
                                 batch_time=batch_time, max_event=max_event, last_input=last_input)
        return wm, {"kwm": kwm}

    def report_fields(self, events: pa.Table, event_times: Any, planned: Any, shard: int) -> dict:
        """Per-partition max event times, and (shard 0) the offsets skipped for data loss."""
        pmax = {} if event_times is None else partition_max(events, *event_times)
        return {"partition_max_us": pmax, "skipped_offsets": planned["skipped"] if shard == 0 else 0}
