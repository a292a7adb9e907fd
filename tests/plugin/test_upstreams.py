"""The upstream interface (``spark_windowing.datasource.upstreams``): every registered kind
implements it, the reader and the option parser reach upstreams only through it, and a new kind
is one class plus one registry entry — shown end to end with a toy kind driven through the
reader's driver and task functions, without a Spark session (as Spark would call them)."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pyarrow as pa
import pytest

from spark_windowing.datasource.source.parse import parse_options
from spark_windowing.datasource.upstreams import UPSTREAMS, Upstream, upstream_for

ROOT = Path(__file__).resolve().parents[2]
SEC = 1_000_000
T0 = 1_767_225_600_000_000
#: The interface's methods and properties (public, defined on ``Upstream``).
INTERFACE = sorted(n for n, v in vars(Upstream).items()
                   if not n.startswith("_") and (callable(v) or isinstance(v, (property, classmethod))))


@pytest.mark.parametrize("source", sorted(UPSTREAMS))
def test_every_registered_kind_implements_the_interface(source):
    kind = UPSTREAMS[source]
    assert issubclass(kind, Upstream)
    assert not inspect.isabstract(kind), f"{kind.__name__} misses {sorted(kind.__abstractmethods__)}"
    for name in INTERFACE:  # same parameters as the interface: the reader calls them by keyword
        mine, theirs = inspect.getattr_static(kind, name), inspect.getattr_static(Upstream, name)
        assert type(mine) is type(theirs), f"{kind.__name__}.{name} is a {type(mine).__name__}"
        if callable(theirs) and not isinstance(theirs, property):
            assert list(inspect.signature(mine).parameters) == list(inspect.signature(theirs).parameters), \
                f"{kind.__name__}.{name}"


def test_the_interface_is_what_the_reader_uses():
    assert set(INTERFACE) >= {"schema", "initial_position", "latest_position", "plan", "read", "cap",
                              "available_now_target", "shard_plan", "disjoint_shards", "watermark"}
    assert {n for n, v in vars(Upstream).items() if getattr(v, "__isabstractmethod__", False)} == \
        {"schema", "initial_position", "latest_position", "plan", "read"}


@pytest.mark.parametrize("module", ["source/reader.py", "source/parse.py", "options/config.py"])
def test_reader_and_options_never_name_a_kind(module):
    """No branch on the source kind: no registered ``source`` value as a string in the code
    (docstrings and comments aside), no ``.kafka`` / ``.generator`` settings looked at."""
    tree = ast.parse((ROOT / "spark_windowing/datasource" / module).read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(n)}
    names = [n.value for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]
    assert not set(names) & set(UPSTREAMS)
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not attrs & {"kafka", "generator", "source"}


# ---------------------------------------------------------------------- a toy kind, end to end
class ToyUpstream(Upstream):
    """Ten events, ``i`` at ``T0 + i s``, key ``i % 2``, value ``i``; a position is the count of
    events read, four at most per batch."""

    needs_path = False
    TOTAL, PER_BATCH = 10, 4

    def schema(self) -> pa.Schema:
        return pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])

    def initial_position(self) -> int:
        return 0

    def latest_position(self, start, max_files, max_rows) -> int:
        return min(self.TOTAL, start + (max_rows or self.PER_BATCH))

    def plan(self, start, end) -> list[int]:
        return [int(start), int(end)]

    def read(self, planned, columns) -> pa.Table:
        i = list(range(planned[0], planned[1]))
        t = pa.table({"k": [x % 2 for x in i], "ts": pa.array([T0 + x * SEC for x in i], pa.timestamp("us", "UTC")),
                      "v": i}, schema=self.schema())
        return t if columns is None else t.select(columns)


def _toy_options(tmp_path) -> dict[str, str]:
    return {"source": "toy", "timestampcolumn": "ts", "keycolumns": "k", "window": "tumbling(5 seconds)",
            "aggregate": "sum(v) AS s", "watermark": "bounded(0 seconds)", "shards": "2",
            "statelocation": str(tmp_path / "state")}


def test_a_new_kind_is_one_class_and_one_registry_line(tmp_path, monkeypatch):
    """Registered, the toy is parsed, read and windowed by the reader as any kind: positions in
    the offsets, a replay of an offset range reads the same events, panes of its keys."""
    from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
    monkeypatch.setitem(UPSTREAMS, "toy", ToyUpstream)  # the one line
    options = _toy_options(tmp_path)
    assert isinstance(upstream_for(parse_options(options)), ToyUpstream)
    reader = WindowedStreamReader(options, stream_schema(options))
    start, panes, ups = reader.initialOffset(), [], []
    for _ in range(10):  # until no batch is due
        end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
        if end == start:
            break
        parts = reader.partitions(start, end)
        assert reader.up.read(parts[0].planned, None) == reader.up.read(reader.up.plan(start["up"], end["up"]), None)
        panes += [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
        ups.append(end["up"])
        start = end
    assert ups[:3] == [4, 8, 10]
    fired = sorted((r["k"], r["window_start"], r["s"]) for r in panes)
    w0 = pa.scalar(T0, pa.timestamp("us", "UTC")).as_py()
    assert fired == [(0, w0, 0 + 2 + 4), (1, w0, 1 + 3)]  # [5 s, 10 s) waits for a watermark of 10 s


def test_an_unregistered_kind_is_refused_naming_the_registered_ones(tmp_path):
    from spark_windowing.errors import OptionError
    with pytest.raises(OptionError) as e:
        parse_options(_toy_options(tmp_path))
    assert e.value.option == "source" and e.value.accepted == ", ".join(UPSTREAMS)


def test_a_paced_nexmark_stream_offers_the_positions_due_by_the_wall_clock(tmp_path):
    """``rate``: a batch reads what is due since the first call, at most ``eventsPerBatch``; both
    bounds hold however slow the machine is (the stream's clock starts after ``before``)."""
    import time

    from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
    options = {"source": "nexmark", "rate": "2000", "eventsPerBatch": "1500", "timestampColumn": "date_time",
               "window": "tumbling(10 seconds)", "aggregate": "count(*) AS n", "statelocation": str(tmp_path / "s")}
    reader = WindowedStreamReader(options, stream_schema(options))
    start, limit = reader.initialOffset(), reader.getDefaultReadLimit()
    before = time.monotonic()
    assert reader.latestOffset(start, limit) == start            # nothing due yet: no batch
    time.sleep(0.3)
    end = reader.latestOffset(start, limit)
    assert 600 <= end["up"] <= (time.monotonic() - before) * 2000
    time.sleep(0.6)
    assert reader.latestOffset(start, limit)["up"] == 1500   # 1,800 or more due: capped at eventsPerBatch


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_the_schema_is_the_first_readable_files(tmp_path, fmt):
    """No ``schema`` option: the first file that can be read gives the columns (a Parquet file's
    from its footer, with its metadata), an empty or broken one before it is passed over, and
    no readable file is an error naming the ``schema`` option."""
    import pyarrow.parquet as pq

    from spark_windowing.errors import OptionError
    events = tmp_path / "events"
    events.mkdir()
    options = {"source": fmt, "path": str(events), "timestampColumn": "ts", "keyColumns": "k",
               "window": "tumbling(5 seconds)", "aggregate": "count(*) AS n",
               "stateLocation": str(tmp_path / "state")}
    up = upstream_for(parse_options(options))
    with pytest.raises(OptionError) as e:
        up.row_schema()
    assert e.value.option == "schema"
    (events / f"a-empty.{fmt}").write_bytes(b"")
    (events / f"b-broken.{fmt}").write_bytes(b"PAR1 not a file" if fmt == "parquet" else b"")
    table = pa.table({"k": pa.array([1], pa.int64()), "ts": pa.array([T0], pa.timestamp("us", "UTC")),
                      "v": pa.array(["x"])}).replace_schema_metadata({"origin": "test"})
    if fmt == "parquet":
        pq.write_table(table, events / "c.parquet")
        expected = pq.read_table(events / "c.parquet").schema
    else:
        (events / "c.json").write_text('{"k": 1, "ts": "2026-01-01T00:00:00", "v": "x"}\n')
        expected = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("s")), ("v", pa.string())])
    found = up.row_schema()
    assert found.equals(expected, check_metadata=True), found
    assert fmt != "parquet" or found.metadata[b"origin"] == b"test"


def _upstream(tmp_path, **options):
    base = {"window": "tumbling(1 minute)", "aggregate": "count(*) AS n", "stateLocation": str(tmp_path / "state")}
    return upstream_for(parse_options({k.lower(): v for k, v in {**base, **options}.items()}))


def test_planned_events_are_known_where_the_positions_tell_them(tmp_path):
    """``execution=auto`` routes a batch by its events when the upstream knows them before
    reading: Parquet by its files' footers, the generators by their positions, Kafka by its
    offsets (not for a partition new to the query); JSON and CSV not (that means reading them)."""
    import pyarrow.parquet as pq
    data = tmp_path / "events"
    data.mkdir()
    for i, n in enumerate([5, 40, 7]):
        pq.write_table(pa.table({"k": ["a"] * n, "ts": [T0] * n}), data / f"{i}.parquet")
        (data / f"{i}.json").write_text('{"k": "a"}\n' * n)
    files = _upstream(tmp_path, source="parquet", path=str(data), timestampColumn="ts", keyColumns="k")
    end = files.latest_position(0, 2, None)
    assert end == 2 and files.planned_events(0, end) in (45, 12, 47)     # two files, by modification time
    assert files.planned_events(0, 3) == 52 and files.planned_events(3, 3) == 0
    assert _upstream(tmp_path, source="json", path=str(data), schema="k string, ts timestamp",
                     timestampColumn="ts").planned_events(0, 3) is None
    generator = _upstream(tmp_path, source="generator", eventsPerBatch="500")
    assert generator.planned_events(1000, 1500) == 500
    kafka = _upstream(tmp_path, source="kafka", subscribe="t", schema="k string, ts timestamp",
                      **{"kafka.bootstrap.servers": "localhost:1"},
                      timestampColumn="ts")
    assert kafka.planned_events({"t": {"0": 5, "1": 2}}, {"t": {"0": 9, "1": 12}}) == 14
    assert kafka.planned_events({"t": {"0": 5}}, {"t": {"0": 9, "1": 3}}) is None   # partition 1 is new


def test_no_source_says_how_to_read_a_pane_table_too(tmp_path):
    """A newcomer's ``spark.read.format("windowed").load(<the sink's path>)`` has no ``source``
    (and no ``table``): the error names the kinds and the batch read of a pane table."""
    from spark_windowing.errors import OptionError
    with pytest.raises(OptionError) as e:
        parse_options({"path": str(tmp_path / "panes" / "current")})
    assert e.value.option == "source" and ", ".join(UPSTREAMS) in e.value.accepted
    assert '.option("table", "current"' in e.value.accepted
