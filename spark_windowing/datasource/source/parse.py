"""All options of ``spark.readStream.format("windowed")``, parsed once on the driver at ``load()``.

Option names are case-insensitive; ``spark.windowed.<option>`` in the Spark conf gives a default.
A bad value raises ``OptionError`` naming the option, the value and the accepted forms.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from spark_windowing.datasource.options.config import (DEFAULT_SHARDS, END_OF_INPUT, EXECUTION, MALFORMED_EVENTS,
                                                       NEW_CHECKPOINT, PROC_TIME_COLUMN, SourceConfig)
from spark_windowing._time import parse_duration
from spark_windowing.datasource.options.reference import options_of
from spark_windowing.datasource.options.values import bool_option, choice_option, int_option
from spark_windowing.datasource.storage.layout import SOURCES2_DIR
from spark_windowing.datasource.tables.maintenance import MaintenanceOptions
from spark_windowing.datasource.upstreams import UPSTREAMS
from spark_windowing.errors import OptionError, UnknownOptionError
from spark_windowing.operator.spec import COUNT_ORDER_FORMS, OperatorSpec
from spark_windowing.operator.watermark import parse_watermark
from spark_windowing.windows.kinds import CountWindow, parse_window

#: ``maxEventTimeAhead``'s default: no real stream has valid events a day ahead of the clock, while
#: one event dated years ahead would close every open window (docs/semantics.md, events from the future).
DEFAULT_MAX_EVENT_TIME_AHEAD = "1 day"
#: Options of a second stream merged per key and window (spark_windowing.operator.join), besides the
#: joinable kinds' own options suffixed with 2 (a generated stream 2: ``eventsPerBatch2``, ...).
_JOIN_OWN = ("join", "path2", "schema2", "timestampcolumn2", "keycolumns2", "aggregate2", "maxfilespertrigger2",
             "startingversion2")
_KIND_OPTIONS = tuple(dict.fromkeys(o for kind in UPSTREAMS.values() for o in kind.OPTIONS))
_KIND_OPTIONS2 = tuple(dict.fromkeys(o + "2" for kind in UPSTREAMS.values() if kind.joinable for o in kind.OPTIONS))
#: Prefixes of client options passed through to one kind (``kafka.*``).
_PREFIXES = tuple(kind.OPTION_PREFIX for kind in UPSTREAMS.values() if kind.OPTION_PREFIX)
KNOWN_OPTIONS = {
    "source", "path", "timestampcolumn", "timestampunit", "keycolumns", "window", "trigger",
    "timestampcombiner", "accumulationmode", "watermark", "watermarkidletimeout", "allowedlateness",
    "fireonlyupdatedpanes", "aggregate", "process", "evictor", "latedatapath", "statelocation", "shards",
    "maxeventsperbatch", "maxfilespertrigger", "startingversion", "schema", "queryname",
    "statebuckets", "statememoryrows", "claimwait", "autoexecutorsabove", "skipchangecommits", "ignoredeletes", "malformedevents",
    "maxeventtimeahead", "endofinput", "execution", "countorder", "newcheckpoint",
    # upkeep of the late-data table (spark_windowing.datasource.tables.maintenance)
    "compactevery", "vacuumevery", "vacuumretention", "checkpointevery",
    "source2", *_JOIN_OWN,
    # each upstream kind's own (spark_windowing.datasource.upstreams), and stream 2's
    *_KIND_OPTIONS, *_KIND_OPTIONS2,
}
#: The documented spelling of every reader option, from the one registry of documented options
#: (``spark_windowing.datasource.options.reference``, which generates docs/options.md; its tests
#: check that the registry and KNOWN_OPTIONS name the same options). Error messages spell them so.
_DOCUMENTED = {o.name.lower(): o.name for o in options_of("reader") if o.name.lower() in KNOWN_OPTIONS}
#: Options of the second stream: a ``spark.windowed.<option>`` conf default of these applies
#: only to queries that name a ``source2`` (so a conf-wide ``join`` cannot break one-stream queries).
JOIN_OPTIONS = _JOIN_OWN + _KIND_OPTIONS2


def applicable_conf_defaults(explicit: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """The ``spark.windowed.*`` conf defaults (lower-cased names) that apply to a query with the
    ``explicit`` options: a join option's only to a query that names a ``source2``, and
    ``countOrder`` only to one with a ``count(<size>[, <slide>])`` window — so a conf-wide
    ``join`` or ``countOrder`` cannot break the queries they mean nothing to."""
    if "source2" not in explicit and "source2" not in defaults:
        defaults = {k: v for k, v in defaults.items() if k not in JOIN_OPTIONS}
    if "countorder" in defaults:
        try:
            counts = isinstance(parse_window(str(explicit.get("window", defaults.get("window", "")))), CountWindow)
        except OptionError:
            counts = True  # the window's own error comes first; keep the default
        if not counts:
            defaults = {k: v for k, v in defaults.items() if k != "countorder"}
    return defaults


#: Said when ``source`` is missing: a batch read of the pane tables is the other use of the format.
_TABLE_READ = ('; or, to read a table the pane sink wrote: spark.read.format("windowed").option("path", '
               '<the sink\'s path>).option("table", "current" | "triggers" | "retractions").load()')


def _require(options: dict[str, str], name: str, accepted: str) -> str:
    raw = options.get(name.lower())
    if raw is None or not str(raw).strip():
        raise OptionError(name, raw, accepted, why="required")
    return str(raw).strip()


def _unknown(name: str) -> bool:
    return name not in KNOWN_OPTIONS and name != "table" and not name.startswith(_PREFIXES)


def unknown_option(name: str, value: object, known: tuple[str, ...] | None = None,
                   where: str = "the reader options of docs/options.md",
                   spelled: dict[str, str] | None = None) -> UnknownOptionError:
    """The error for option ``name``: the ``known`` options (lower case; default: the reader's)
    closest to it (difflib, compared case-insensitively), in their documented casing (the reader's,
    and ``spelled``: lower case -> documented, for options of their own); the whole list on the
    message's second line."""
    names = sorted(KNOWN_OPTIONS if known is None else known)
    spelling = {**_DOCUMENTED, **(spelled or {})}
    close = difflib.get_close_matches(name.lower(), names, n=3, cutoff=0.75)
    accepted = f"{where}: " + ", ".join(sorted((spelling.get(n, n) for n in names), key=str.lower))
    return UnknownOptionError(name, value, accepted, suggestions=[spelling.get(c, c) for c in close])


def parse_options(raw: dict[str, str]) -> SourceConfig:
    """Validate and parse the reader options (keys already lower-cased).

    Long: one flat sequence of option parses, in the order of the README's option table; each
    line is independent."""
    options = {k.lower(): v for k, v in raw.items()}
    unknown = sorted((k for k in raw if _unknown(k.lower())), key=str.lower)
    if unknown:
        raise unknown_option(unknown[0], raw[unknown[0]])
    source = _require(options, "source", ", ".join(UPSTREAMS) + _TABLE_READ).lower()
    if source not in UPSTREAMS:
        raise OptionError("source", options["source"], ", ".join(UPSTREAMS))
    kind = UPSTREAMS[source]
    path = options.get("path")
    if kind.needs_path and not path:
        raise OptionError("path", path, f"the upstream location of the {source} source", why="required")
    window, ts_col = time_options(options)
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
    spec = operator_spec(options, window, ts_col, join=join if source2 else None)
    wm = parse_watermark(options.get("watermark"), options.get("watermarkidletimeout"))
    if processing_time and wm.kind == "bounded":
        # processing-time windows: an event's time is its batch's, so the watermark is the clock's
        # too; it moves without input, and the last windows fire (docs/semantics.md)
        wm = replace(wm, kind="processing")
    state = _require(options, "stateLocation", "a URI such as /lake/_state/q1, s3://bucket/state/q1")
    settings = kind.parse_options(options, spec)
    _check_prefixed_options(options, source)
    alias = kind.EVENT_LIMIT_ALIAS  # e.g. Kafka's maxOffsetsPerTrigger for maxEventsPerBatch
    max_events = int_option(options, alias, minimum=1) if alias else None
    cfg = SourceConfig(
        source=source, path=path, spec=spec, watermark=wm, state_location=state.rstrip("/"),
        shards=int_option(options, "shards", minimum=1, default=DEFAULT_SHARDS),
        late_data_path=options.get("latedatapath") or None,
        max_events_per_batch=max_events or int_option(options, "maxEventsPerBatch", minimum=1),
        max_files_per_trigger=int_option(options, "maxFilesPerTrigger", minimum=1),
        starting_version=int_option(options, "startingVersion", minimum=0),
        skip_change_commits=bool_option(options, "skipChangeCommits", False),
        ignore_deletes=bool_option(options, "ignoreDeletes", False),
        schema_ddl=options.get("schema"), settings=settings, processing_time_windows=processing_time,
        query_name=options.get("queryname"),
        state_buckets=int_option(options, "stateBuckets", minimum=1, default=64),
        state_memory_rows=int_option(options, "stateMemoryRows", minimum=1, default=2_000_000),
        claim_wait=parse_duration(options.get("claimwait") or "3 seconds", option="claimWait") / 1e6,
        late_maintenance=MaintenanceOptions.parse(options),
        malformed_events=choice_option(options, "malformedEvents", MALFORMED_EVENTS),
        end_of_input=choice_option(options, "endOfInput", END_OF_INPUT),
        execution=choice_option(options, "execution", EXECUTION),
        auto_executors_above=int_option(options, "autoExecutorsAbove", minimum=0),
        new_checkpoint=choice_option(options, "newCheckpoint", NEW_CHECKPOINT),
    )
    return _with_stream2(cfg, options) if spec.join is not None else cfg


def time_options(options: dict[str, str]) -> tuple[str, str | None]:
    """The ``window`` option (required) and the event-time column (None: processing time) of
    lower-cased ``options``; ``window=inherit`` defaults them to the pane rows' own (and sets
    ``watermark`` to ``column(watermark)`` in ``options`` when not given)."""
    window = _require(options, "window", "a window spec, e.g. tumbling(1 minute)")
    ts_col = options.get("timestampcolumn")
    inherit = window.strip().lower() == "inherit"
    if inherit and not ts_col:  # chained windowed queries: pane rows carry their time and watermark
        ts_col = "pane_timestamp"
    if inherit and not options.get("watermark"):
        options["watermark"] = "column(watermark)"
    return window, ts_col


def operator_spec(options: dict[str, str], window: str, ts_col: str | None, *, join: str | None = None
                  ) -> OperatorSpec:
    """The operator's spec from lower-cased ``options`` (``time_options`` gives ``window`` and
    ``ts_col``): the same parse for ``format("windowed")`` and ``spark_windowing.window(df)``."""
    count_order = options.get("countorder")
    if not ts_col and count_order is not None and str(count_order).strip().lower() == "timestamp":
        raise OptionError("countOrder", count_order, COUNT_ORDER_FORMS,
                          why="no timestampColumn (processing-time windows): timestamp order needs an event-time "
                              "column and its watermark")
    return OperatorSpec.from_options(
        window=window, aggregate=options.get("aggregate"), process=options.get("process"),
        evictor=options.get("evictor"),
        trigger=options.get("trigger"), key_columns=options.get("keycolumns"),
        timestamp_column=ts_col or PROC_TIME_COLUMN, timestamp_unit=options.get("timestampunit"),
        accumulation_mode=options.get("accumulationmode", "discarding"),
        allowed_lateness=options.get("allowedlateness", "0 seconds"),
        timestamp_combiner=options.get("timestampcombiner", "end_of_window"),
        fire_only_updated_panes=options.get("fireonlyupdatedpanes", "false"),
        max_event_time_ahead=options.get("maxeventtimeahead", DEFAULT_MAX_EVENT_TIME_AHEAD),
        count_order=count_order, join=join, aggregate2=options.get("aggregate2"),
        key_columns2=options.get("keycolumns2"), timestamp_column2=options.get("timestampcolumn2"))


def _check_prefixed_options(options: dict[str, str], source: str) -> None:
    """Client options of one kind (``kafka.*``) are refused with any other ``source``."""
    for name, kind in UPSTREAMS.items():
        prefix = kind.OPTION_PREFIX
        if prefix and name != source and (stray := sorted(k for k in options if k.startswith(prefix))):
            raise OptionError(stray[0], options[stray[0]], f"{prefix}* options only with source={name}",
                              why="unknown option")


def _with_stream2(cfg: SourceConfig, options: dict[str, str]) -> SourceConfig:
    """The second upstream: ``source2``/``path2``/``schema2`` and ``maxFilesPerTrigger2``
    (defaulting to stream 1's); the kind's own options suffixed with 2 (``Upstream.parse_options``:
    a generated stream 2 reads ``eventsPerBatch2``, ...); its file manifest lives in
    ``<stateLocation>/sources2``."""
    source2 = str(options["source2"]).strip().lower()
    joinable = [name for name, kind in UPSTREAMS.items() if kind.joinable]
    if source2 not in joinable:
        raise OptionError("source2", options["source2"], ", ".join(joinable))
    kind2 = UPSTREAMS[source2]
    path2 = options.get("path2")
    if kind2.needs_path and not path2:
        raise OptionError("path2", path2, f"the location of the second ({source2}) upstream", why="required")
    settings2 = kind2.parse_options(options, cfg.spec, "2")
    stream2 = replace(cfg, source=source2, path=path2, schema_ddl=options.get("schema2"), settings=settings2,
                      max_files_per_trigger=int_option(options, "maxFilesPerTrigger2", minimum=1,
                                                       default=cfg.max_files_per_trigger),
                      starting_version=int_option(options, "startingVersion2", minimum=0),
                      manifest_dir=SOURCES2_DIR, stream2=None)
    return replace(cfg, stream2=stream2)
