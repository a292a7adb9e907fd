"""What the examples share: configuration from a spark-submit properties file, output
directories, running a windowed query to its end, and printing SQL results.

Every example is configured by ``spark.windowed.<option>`` properties (``conf/<example>.conf``),
which ``spark_windowing.register`` turns into defaults of ``format("windowed")``. An example runs

* under spark-submit: ``spark-submit --properties-file conf/<example>.conf examples/<example>.py``
  (spark-submit has put the properties into the Spark conf already), or
* as a plain script: ``python examples/<example>.py`` — then it loads ``conf/<example>.conf``
  itself, into the SparkSession builder. (Under spark-submit without ``--properties-file`` it
  still fills in the file's ``spark.windowed.*`` and runtime SQL properties spark-submit lacks.)

Precedence, highest first: ``--conf k=v`` given to the example, ``--conf`` given to spark-submit,
the properties file, the examples' code. Paths (state, checkpoint, pane tables, late data) are
not configured in the file: they live under ``--output`` (default ``./out/<example>``), which each
run empties first, so every run starts from scratch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONF_DIR = os.path.join(ROOT, "conf")
WINDOWED_PREFIX = "spark.windowed."
#: Sub-directories an example owns under its output directory (removed at the start of a run).
OWNED = ("input", "input2", "state", "checkpoint", "panes", "late", "timeline.png", "downstream")


# --------------------------------------------------------------------------- configuration

def load_properties(path: str) -> dict[str, str]:
    """The ``spark.*`` entries of a spark-submit properties file, in file order.

    The file format is Java's ``.properties`` as spark-submit reads it: ``#``/``!`` comments,
    ``key value`` / ``key=value`` / ``key: value``, values trimmed, a trailing backslash
    continues a line. Entries not starting with ``spark.`` are ignored, as spark-submit does.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
    ...     _ = f.write("# c\\nspark.windowed.window  session(30 seconds)\\nspark.master=local[2]\\nfoo 1\\n")
    >>> load_properties(f.name)
    {'spark.windowed.window': 'session(30 seconds)', 'spark.master': 'local[2]'}
    """
    with open(path, encoding="utf-8") as f:
        text = f.read()
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        key, value = _split_property(line)
        if key.startswith("spark."):
            props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=: \t":
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i], rest.strip()
    return line, ""


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """``["spark.windowed.keys=3", ...]`` -> ``{"spark.windowed.keys": "3"}``."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip().startswith("spark."):
            raise SystemExit(f"--conf expects spark.<name>=<value>, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Args:
    """The command line every example accepts."""

    name: str
    conf_file: str
    overrides: dict[str, str]
    output: str

    @classmethod
    def parse(cls, name: str, description: str, argv: Sequence[str] | None) -> "Args":
        parser = argparse.ArgumentParser(prog=f"examples/{name}.py", description=description,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--conf-file", default=os.path.join(CONF_DIR, f"{name}.conf"),
                            help="spark-submit properties file to load for properties the launcher "
                                 "did not set (default: conf/%(prog)s's own)")
        parser.add_argument("--conf", action="append", default=[], metavar="spark.KEY=VALUE",
                            help="set a Spark property, e.g. spark.windowed.totalEvents=600 "
                                 "(repeatable; wins over the properties file)")
        parser.add_argument("--output", default=os.path.join("out", name),
                            help="directory for state, checkpoint, pane tables, late data and the "
                                 "timeline (default: ./out/<example>; emptied at the start)")
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        return cls(name=name, conf_file=ns.conf_file, overrides=parse_overrides(ns.conf),
                   output=os.path.abspath(ns.output))


# --------------------------------------------------------------------------- outputs

@dataclass(frozen=True)
class Outputs:
    """Where an example writes; everything under one directory."""

    root: str

    @property
    def input(self) -> str:
        return os.path.join(self.root, "input")

    @property
    def state(self) -> str:
        return os.path.join(self.root, "state")

    @property
    def checkpoint(self) -> str:
        return os.path.join(self.root, "checkpoint")

    @property
    def panes(self) -> str:
        return os.path.join(self.root, "panes")

    @property
    def late(self) -> str:
        return os.path.join(self.root, "late")

    @property
    def timeline(self) -> str:
        return os.path.join(self.root, "timeline.png")

    def table(self, name: str) -> str:
        return os.path.join(self.panes, name)

    @classmethod
    def fresh(cls, root: str) -> "Outputs":
        """Create ``root``, removing what an earlier run of an example left there (only the
        entries in ``OWNED``; a directory holding anything else is refused)."""
        os.makedirs(root, exist_ok=True)
        foreign = sorted(set(os.listdir(root)) - set(OWNED))
        if foreign:
            raise SystemExit(f"{root} holds {foreign[:3]}, which no example wrote; "
                             "choose another --output")
        for entry in OWNED:
            path = os.path.join(root, entry)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        return cls(root)

    def describe(self, *, with_input: bool = False, with_late: bool = True, with_timeline: bool = True) -> list[str]:
        lines = [f"  pane tables (Delta)  {self.table('triggers')}",
                 f"                       {self.table('retractions')}",
                 f"                       {self.table('current')}"]
        if with_late:
            lines.append(f"  late data (Delta)    {self.late}")
        if with_input:
            lines.append(f"  input events         {self.input}")
        if with_timeline:
            lines.append(f"  pane timeline        {self.timeline}")
        lines += [f"  operator state       {self.state}",
                  f"  Spark checkpoint     {self.checkpoint}"]
        return lines


# --------------------------------------------------------------------------- the session

@contextmanager
def windowed_session(args: Args, spark: "SparkSession | None" = None) -> Iterator["SparkSession"]:
    """A SparkSession with ``format("windowed")`` registered and the example's properties applied.

    Without ``spark``: builds (and finally stops) a session from ``args.conf_file`` (as a plain
    script) or from what spark-submit set (completed from the file, see the module docstring);
    ``args.overrides`` win either way. With ``spark`` (tests, notebooks):
    uses it; the example's ``spark.windowed.*`` properties replace the session's for the
    duration and are restored afterwards (other properties of a running session stay as they are).
    """
    props = load_properties(args.conf_file)
    if spark is not None:
        with _borrowed(spark, {**props, **args.overrides}):
            yield spark
        return
    session = _build(props, args.overrides)
    try:
        yield session
    finally:
        session.stop()


def _build(props: dict[str, str], overrides: dict[str, str]) -> "SparkSession":
    from pyspark.sql import SparkSession

    import spark_windowing

    # Python workers run the plugin: same interpreter (and packages) as this script, unless set.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    submitted = _started_by_spark_submit()
    builder = SparkSession.builder
    if not submitted:
        for key, value in props.items():
            builder = builder.config(key, value)
    for key, value in overrides.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if submitted:   # fill in what spark-submit was not given (e.g. no --properties-file)
        launched = dict(session.sparkContext.getConf().getAll())
        for key, value in props.items():
            if key not in launched and key not in overrides and (
                    key.startswith(WINDOWED_PREFIX) or session.conf.isModifiable(key)):
                session.conf.set(key, value)
    for key, value in overrides.items():   # in case getOrCreate returned a running session
        if key.startswith(WINDOWED_PREFIX):
            session.conf.set(key, value)
    spark_windowing.register(session)
    return session


def _started_by_spark_submit() -> bool:
    """spark-submit (and the pyspark shell) start the JVM first and hand the Python driver its
    gateway; the Spark conf there already holds ``--properties-file`` and ``--conf`` entries."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@contextmanager
def _borrowed(spark: "SparkSession", props: dict[str, str]) -> Iterator[None]:
    import spark_windowing

    before = {k: v for k, v in spark.conf.getAll.items() if k.startswith(WINDOWED_PREFIX)}
    try:
        _set_windowed(spark, before, {k: v for k, v in props.items() if k.startswith(WINDOWED_PREFIX)})
        spark_windowing.register(spark)
        yield
    finally:
        _set_windowed(spark, props, before)
        spark_windowing.register(spark)


def _set_windowed(spark: "SparkSession", old: dict[str, str], new: dict[str, str]) -> None:
    for key in old:
        if key.startswith(WINDOWED_PREFIX) and key not in new:
            spark.conf.unset(key)
    for key, value in new.items():
        spark.conf.set(key, value)


def windowed_conf(spark: "SparkSession") -> dict[str, str]:
    """The ``spark.windowed.*`` properties in effect, prefix removed (for the run's banner)."""
    entries = dict(spark.sparkContext.getConf().getAll())
    entries.update(spark.conf.getAll)
    return {k[len(WINDOWED_PREFIX):]: v for k, v in sorted(entries.items()) if k.startswith(WINDOWED_PREFIX)}


def print_banner(title: str, spark: "SparkSession", args: Args) -> None:
    print(f"\n== {title}")
    print(f"   configuration: {args.conf_file} (+ spark-submit/--conf overrides)")
    for key, value in windowed_conf(spark).items():
        print(f"   spark.windowed.{key:<20} {value}")
    print(flush=True)


# --------------------------------------------------------------------------- running

def run_to_end(panes: "DataFrame", out: Outputs, *, query_name: str, spark: "SparkSession") -> float:
    """Write ``panes`` with the windowed sink to ``out.panes`` under an ``availableNow`` trigger
    (read all input there is now, fire what becomes due, stop), printing one progress line per
    micro-batch; return the seconds it took. Raises if the query fails."""
    from spark_windowing.datasource.progress import attach_progress

    printer = _ProgressPrinter(query_name)
    listener = attach_progress(spark, printer, pane_paths={query_name: out.panes})
    started = time.monotonic()
    try:
        query = (panes.writeStream.format("windowed").queryName(query_name)
                 .option("path", out.panes).option("checkpointLocation", out.checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        printer.finished.wait(timeout=60)   # the listener bus is asynchronous: let it catch up (at once when it has)
    finally:
        spark.streams.removeListener(listener)
    return time.monotonic() - started


class _ProgressPrinter:
    """Prints the progress listener's lines; notes when this query's 'terminated' line came."""

    def __init__(self, query_name: str) -> None:
        self.prefix = f"[{query_name}]"
        self.finished = threading.Event()

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        if line.startswith(self.prefix) and " terminated" in line:
            self.finished.set()


def create_views(spark: "SparkSession", out: Outputs, name: str) -> None:
    """Temporary views ``<name>`` (current), ``<name>_triggers`` and ``<name>_retractions``."""
    for view, table in ((name, "current"), (f"{name}_triggers", "triggers"),
                        (f"{name}_retractions", "retractions")):
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {view} USING windowed "
                  f"OPTIONS (path '{out.panes}', table '{table}')")


def show_sql(spark: "SparkSession", title: str, sql: str, *, rows: int = 20) -> None:
    """Print ``title``, the query, and its first ``rows`` rows."""
    print(f"\n-- {title}")
    print("\n".join("   " + line for line in sql.strip().splitlines()))
    spark.sql(sql).show(rows, truncate=False)


#: Pane rows by kind and timing, over both append-only tables.
PANE_COUNTS_SQL = """\
SELECT kind, pane_timing, count(*) AS panes
FROM (SELECT kind, pane_timing FROM {name}_triggers
      UNION ALL
      SELECT kind, pane_timing FROM {name}_retractions)
GROUP BY kind, pane_timing
ORDER BY kind DESC, pane_timing"""


def show_late_data(spark: "SparkSession", out: Outputs, view: str, *, event_id: str | None = None) -> int:
    """Register the late-data Delta table as ``view`` (through ``format("windowed")``,
    ``table=late``) and print its rows counted by reason; return the number of rows.

    The table holds one row per dropped (event, window): an event of several sliding windows
    can be dropped for some of them; it exists, empty, from the query's start. ``event_id``: a
    column identifying an event, to count distinct events as well.
    """
    late = spark.read.format("windowed").option("path", out.late).option("table", "late").load()
    late.createOrReplaceTempView(view)
    rows = late.count()
    if not rows:
        print(f"\n-- late data: nothing dropped ({out.late} is empty)")
        return 0
    events = f"count(DISTINCT {event_id}) AS events, " if event_id else ""
    show_sql(spark, f"Dropped late and malformed events by reason ({out.late})",
             f"SELECT reason, count(*) AS rows, {events}min(batch_seq) AS first_batch_seq,\n"
             f"       max(batch_seq) AS last_batch_seq\n"
             f"FROM {view} GROUP BY reason ORDER BY rows DESC")
    return rows


def plot_timeline(out: Outputs, *, title: str, max_keys: int = 6, minutes: int | None = None) -> str:
    """Draw the pane timeline of ``out.panes`` to ``out.timeline``; print and return its path.

    ``minutes``: draw only windows starting within that many minutes around the median window
    start, so the picture of a long run stays readable (and stray early-hour windows of events
    that arrived before the first watermark do not stretch the time axis).
    """
    import numpy as np
    import pyarrow.compute as pc

    from spark_windowing.tools.plot import load_panes, plot_panes

    panes = load_panes(out.panes)
    if minutes is not None and panes.num_rows:
        starts = panes.column("window_start").cast("int64").to_numpy()
        low = int(np.median(starts)) - minutes * 30_000_000
        keep = pc.and_(pc.greater_equal(panes.column("window_start").cast("int64"), low),
                       pc.less(panes.column("window_start").cast("int64"), low + minutes * 60_000_000))
        panes = panes.filter(keep)
    result = plot_panes(panes, out.timeline, max_keys=max_keys, title=title)
    print(f"\n-- pane timeline: {result.summary.describe()}")
    return str(result)


def print_outputs(title: str, out: Outputs, seconds: float, **describe: bool) -> None:
    print(f"\n== {title} done: streaming query ran {seconds:.0f} s. Outputs:")
    print("\n".join(out.describe(**describe)))
    print(f"   Query them again: CREATE TEMPORARY VIEW v USING windowed "
          f"OPTIONS (path '{out.panes}', table 'current')", flush=True)
