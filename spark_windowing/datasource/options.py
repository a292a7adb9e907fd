"""All options of ``spark.readStream.format("windowed")``, parsed once on the driver at ``load()``.

Option names are case-insensitive; ``spark.windowed.<option>`` in the Spark conf gives a default.
A bad value raises ``OptionError`` naming the option, the value and the accepted forms.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from spark_windowing.datasource.kafka import KafkaConfig, parse_kafka_options
from spark_windowing.datasource.layout import SOURCES2_DIR, SOURCES_DIR
from spark_windowing.datasource.maintenance import MaintenanceOptions
from spark_windowing._time import parse_duration
from spark_windowing.errors import OptionError
from spark_windowing.spec import OperatorSpec, parse_bool
from spark_windowing.watermark import WatermarkStrategy, parse_watermark

SOURCES = ("delta", "parquet", "json", "csv", "generator", "panes", "kafka")
DEFAULT_SHARDS = 2
#: ``malformedEvents``: events whose event time cannot be read go to the late-data table; the
#: query stops when a whole micro-batch holds no readable one before any event had one
#: (``fail-if-all``, default), never stops (``late``), or stops at the first one (``fail``).
MALFORMED_EVENTS = ("fail-if-all", "late", "fail")
#: Internal column holding the batch time for processing-time windows (no timestampColumn).
PROC_TIME_COLUMN = "__batch_time"

KNOWN_OPTIONS = {
    "source", "path", "timestampcolumn", "timestampunit", "keycolumns", "window", "trigger",
    "timestampcombiner", "accumulationmode", "watermark", "watermarkidletimeout", "allowedlateness",
    "fireonlyupdatedpanes", "aggregate", "process", "evictor", "latedatapath", "statelocation", "shards",
    "maxeventsperbatch", "maxfilespertrigger", "startingversion", "schema", "queryname",
    "statebuckets", "statememoryrows", "skipchangecommits", "ignoredeletes", "malformedevents",
    # upkeep of the late-data table (spark_windowing.datasource.maintenance)
    "compactevery", "vacuumevery", "vacuumretention", "checkpointevery",
    # generator
    "eventsperbatch", "totalevents", "keys", "eventinterval", "disorder", "latefraction", "seed",
    "starttime",
    # a second stream merged per key and window (spark_windowing.join)
    "join", "source2", "path2", "schema2", "timestampcolumn2", "keycolumns2", "aggregate2",
    "maxfilespertrigger2", "startingversion2",
    # a generated stream 2: the generator options suffixed with 2
    "eventsperbatch2", "totalevents2", "keys2", "eventinterval2", "disorder2", "latefraction2", "seed2",
    "starttime2",
    # kafka (spark_windowing.datasource.kafka; every other ``kafka.*`` option goes to the client)
    "subscribe", "subscribepattern", "assign", "startingoffsets", "maxoffsetspertrigger", "failondataloss",
    "valueformat", "kafkaconsumer.polltimeoutms",
}
#: Options of the second stream: a ``spark.windowed.<option>`` conf default of these applies
#: only to queries that name a ``source2`` (so a conf-wide ``join`` cannot break one-stream queries).
JOIN_OPTIONS = ("join", "path2", "schema2", "timestampcolumn2", "keycolumns2", "aggregate2",
                "maxfilespertrigger2", "startingversion2", "eventsperbatch2", "totalevents2", "keys2",
                "eventinterval2", "disorder2", "latefraction2", "seed2", "starttime2")


@dataclass(frozen=True)
class GeneratorConfig:
    """Deterministic synthetic events (see ``spark_windowing.datasource.upstream.generate``)."""

    events_per_batch: int = 1000
    total_events: int | None = None
    keys: int = 100
    event_interval: int = 10_000          # µs of event time between consecutive events
    disorder: int = 0                     # max µs an event is shifted back (out-of-orderness)
    late_fraction: float = 0.0            # fraction of events shifted back far (late data)
    seed: int = 42
    start_time: int = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


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
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    processing_time_windows: bool = False
    late_maintenance: MaintenanceOptions = MaintenanceOptions()
    query_name: str | None = None
    state_buckets: int = 64                  # key buckets per shard (unit of loading / spilling / rewriting)
    state_memory_rows: int = 2_000_000       # windows per shard kept in memory; more spill to stateLocation
    manifest_dir: str = SOURCES_DIR          # under stateLocation: the file source's manifest
    stream2: "SourceConfig | None" = None    # join: the second upstream (its own source/path/limits)
    kafka: "KafkaConfig | None" = None       # source=kafka: brokers, topics, offsets, value format
    malformed_events: str = "fail-if-all"    # events without a readable event time (MALFORMED_EVENTS)


def _int(options: dict[str, str], name: str, *, minimum: int = 0, default: int | None = None) -> int | None:
    raw = options.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(name, raw, f"an integer >= {minimum}") from None
    if value < minimum:
        raise OptionError(name, raw, f"an integer >= {minimum}")
    return value


def _require(options: dict[str, str], name: str, accepted: str) -> str:
    raw = options.get(name.lower())
    if raw is None or not str(raw).strip():
        raise OptionError(name, raw, accepted, why="required")
    return str(raw).strip()


def parse_options(raw: dict[str, str]) -> SourceConfig:
    """Validate and parse the reader options (keys already lower-cased).

    Long: one flat sequence of option parses, in the order of the README's option table; each
    line is independent."""
    options = {k.lower(): v for k, v in raw.items()}
    unknown = sorted(k for k in set(options) - KNOWN_OPTIONS - {"table"} if not k.startswith("kafka."))
    if unknown:
        raise OptionError(unknown[0], options[unknown[0]], "the options listed in the README (Options): " +
                          ", ".join(sorted(KNOWN_OPTIONS)), why="unknown option")
    source = _require(options, "source", ", ".join(SOURCES)).lower()
    if source not in SOURCES:
        raise OptionError("source", options["source"], ", ".join(SOURCES))
    path = options.get("path")
    if source not in ("generator", "kafka") and not path:
        raise OptionError("path", path, f"the upstream location of the {source} source", why="required")
    window = _require(options, "window", "a window spec, e.g. tumbling(1 minute)")
    ts_col = options.get("timestampcolumn")
    inherit = window.strip().lower() == "inherit"
    if inherit and not ts_col:  # chained windowed queries: pane rows carry their time and watermark
        ts_col = "pane_timestamp"
    if inherit and not options.get("watermark"):
        options["watermark"] = "column(watermark)"
    processing_time = not ts_col
    join, source2 = options.get("join"), options.get("source2")
    if join is not None and str(join).strip() and not (source2 and str(source2).strip()):
        raise OptionError("join", join, "join together with source2 (and path2) naming the second stream",
                          why="no source2")
    if source2 and str(source2).strip() and not (join and str(join).strip()):
        raise OptionError("source2", source2, "source2 together with join=inner|left|outer|cogroup",
                          why="no join: how should the streams be merged?")
    if join and str(join).strip() and processing_time:
        raise OptionError("timestampColumn", ts_col, "an event-time column of stream 1 with join",
                          why="two streams are merged in event time; processing-time windows are not joinable")
    if join and str(join).strip() and options.get("watermark", "").strip().lower().startswith("column"):
        raise OptionError("watermark", options["watermark"], "bounded(<delay>) or processing(<lag>) with join",
                          why="column watermarks are not merged across two streams in this version")
    spec = OperatorSpec.from_options(
        window=window, aggregate=options.get("aggregate"), process=options.get("process"),
        evictor=options.get("evictor"),
        trigger=options.get("trigger"), key_columns=options.get("keycolumns"),
        timestamp_column=ts_col or PROC_TIME_COLUMN, timestamp_unit=options.get("timestampunit"),
        accumulation_mode=options.get("accumulationmode", "discarding"),
        allowed_lateness=options.get("allowedlateness", "0 seconds"),
        timestamp_combiner=options.get("timestampcombiner", "end_of_window"),
        fire_only_updated_panes=options.get("fireonlyupdatedpanes", "false"),
        join=join if source2 else None, aggregate2=options.get("aggregate2"),
        key_columns2=options.get("keycolumns2"), timestamp_column2=options.get("timestampcolumn2"))
    wm = parse_watermark(options.get("watermark"), options.get("watermarkidletimeout"))
    state = _require(options, "stateLocation", "a URI such as /lake/_state/q1, s3://bucket/state/q1")
    gen = _generator(options) if source == "generator" else GeneratorConfig()
    kafka = parse_kafka_options(options, spec.key_columns) if source == "kafka" else None
    if kafka is None and (stray := sorted(k for k in options if k.startswith("kafka."))):
        raise OptionError(stray[0], options[stray[0]], "kafka.* options only with source=kafka", why="unknown option")
    if kafka is not None and options.get("maxoffsetspertrigger") and options.get("maxeventsperbatch"):
        raise OptionError("maxOffsetsPerTrigger", options["maxoffsetspertrigger"],
                          "one of maxOffsetsPerTrigger, maxEventsPerBatch", why="both given")
    if kafka is not None and spec.join is not None:
        raise OptionError("join", options.get("join"), "join with delta, parquet, json, csv or generator streams",
                          why="a Kafka stream cannot be joined in this version")
    max_events = _int(options, "maxOffsetsPerTrigger", minimum=1) if kafka is not None else None
    cfg = SourceConfig(
        source=source, path=path, spec=spec, watermark=wm, state_location=state.rstrip("/"),
        shards=_int(options, "shards", minimum=1, default=DEFAULT_SHARDS),
        late_data_path=options.get("latedatapath") or None,
        max_events_per_batch=max_events or _int(options, "maxEventsPerBatch", minimum=1),
        max_files_per_trigger=_int(options, "maxFilesPerTrigger", minimum=1),
        starting_version=_int(options, "startingVersion", minimum=0),
        skip_change_commits=parse_bool_option(options, "skipChangeCommits", False),
        ignore_deletes=parse_bool_option(options, "ignoreDeletes", False),
        schema_ddl=options.get("schema"), generator=gen, processing_time_windows=processing_time,
        query_name=options.get("queryname"),
        state_buckets=_int(options, "stateBuckets", minimum=1, default=64),
        state_memory_rows=_int(options, "stateMemoryRows", minimum=1, default=2_000_000), kafka=kafka,
        late_maintenance=MaintenanceOptions.parse(options),
        malformed_events=_malformed_events(options.get("malformedevents")),
    )
    return _with_stream2(cfg, options) if spec.join is not None else cfg


def _generator(options: dict[str, str], suffix: str = "") -> GeneratorConfig:
    """The generator's options; a join's generated stream 2 reads ``<option>2``, defaulting to the
    unsuffixed option, and ``seed2`` defaults to ``seed + 1`` (a different stream, not a copy)."""
    def get(name: str, default: str | None = None) -> str | None:
        return options.get(name.lower() + suffix, options.get(name.lower(), default))

    def num(name: str, **kw) -> int | None:
        return _int({(name + suffix).lower(): v} if (v := get(name)) is not None else {}, name + suffix, **kw)

    seed = num("seed", default=42)
    if suffix and options.get("seed" + suffix) is None:
        seed = (seed or 0) + 1
    return GeneratorConfig(
        events_per_batch=num("eventsPerBatch", minimum=1, default=1000),
        total_events=num("totalEvents", minimum=0),
        keys=num("keys", minimum=1, default=100),
        event_interval=parse_duration(get("eventInterval", "10 milliseconds"), option="eventInterval" + suffix,
                                      allow_zero=False),
        disorder=parse_duration(get("disorder", "0 seconds"), option="disorder" + suffix),
        late_fraction=_fraction(get("lateFraction", "0"), option="lateFraction" + suffix),
        seed=seed,
        start_time=_start_time(get("startTime"), option="startTime" + suffix),
    )


def _with_stream2(cfg: SourceConfig, options: dict[str, str]) -> SourceConfig:
    """The second upstream: ``source2``/``path2``/``schema2`` and ``maxFilesPerTrigger2``
    (defaulting to stream 1's); a generated stream 2 takes the generator options suffixed with 2
    (see ``_generator``); its file manifest lives in ``<stateLocation>/sources2``."""
    source2 = str(options["source2"]).strip().lower()
    if source2 not in SOURCES or source2 in ("panes", "kafka"):
        raise OptionError("source2", options["source2"], ", ".join(s for s in SOURCES if s not in ("panes", "kafka")))
    path2 = options.get("path2")
    if source2 != "generator" and not path2:
        raise OptionError("path2", path2, f"the location of the second ({source2}) upstream", why="required")
    gen2 = _generator(options, "2") if source2 == "generator" else GeneratorConfig()
    stream2 = replace(cfg, source=source2, path=path2, schema_ddl=options.get("schema2"), generator=gen2,
                      max_files_per_trigger=_int(options, "maxFilesPerTrigger2", minimum=1,
                                                 default=cfg.max_files_per_trigger),
                      starting_version=_int(options, "startingVersion2", minimum=0),
                      manifest_dir=SOURCES2_DIR, stream2=None)
    return replace(cfg, stream2=stream2)


def _malformed_events(raw: str | None) -> str:
    if raw is None or not str(raw).strip():
        return MALFORMED_EVENTS[0]
    value = str(raw).strip().lower()
    if value not in MALFORMED_EVENTS:
        raise OptionError("malformedEvents", raw, ", ".join(MALFORMED_EVENTS))
    return value


def _fraction(raw: str, option: str = "lateFraction") -> float:
    try:
        v = float(raw)
    except ValueError:
        raise OptionError(option, raw, "a number between 0 and 1") from None
    if not 0 <= v <= 1:
        raise OptionError(option, raw, "a number between 0 and 1")
    return v


def _start_time(raw: str | None, option: str = "startTime") -> int:
    if raw is None:
        return GeneratorConfig.start_time
    from datetime import datetime, timezone
    try:
        d = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(option, raw, "an ISO-8601 timestamp such as 2026-01-01T00:00:00Z") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return int(d.timestamp() * 1_000_000)


def parse_bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    return default if raw is None else parse_bool(name, raw)
