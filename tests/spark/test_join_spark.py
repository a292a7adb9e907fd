"""Two parquet upstreams joined per key and window through Spark into the Delta pane tables and
the late-data table, checked against TestStream replaying the very same micro-batches (each
stream's files, watermark, batch time from Spark's offset log)."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from spark_windowing._time import MIN_TIME
from spark_windowing.errors import OptionError
from spark_windowing.operator import join as J
from spark_windowing.testing import TestStream
from tests.spark._helpers import offsets, rows, run_to_sink
from tests.spark.test_source import SEC, T0

pytestmark = pytest.mark.spark
TS = pa.timestamp("us", tz="UTC")
SCHEMA1 = pa.schema([("k", pa.string()), ("ts", TS), ("v", pa.int64()), ("id", pa.int64())])
SCHEMA2 = pa.schema([("user", pa.string()), ("t", TS), ("amount", pa.int64()), ("id", pa.int64())])
AGG1 = "sum(v) AS total, collect_list(id) AS ids1"
AGG2 = "collect_list(id) AS ids2, count(*) AS n2, max(amount) AS top"


def _bundles(seed: int, n: int, first_id: int) -> list[list[dict]]:
    rnd = random.Random(seed)
    out, i = [], first_id
    for b in range(n):
        bundle = []
        for _ in range(rnd.randrange(1, 6)):
            bundle.append((rnd.choice("ab"), T0 + b * 3 * SEC + rnd.randrange(-6 * SEC, 2 * SEC), rnd.randrange(50), i))
            i += 1
        out.append(bundle)
    out[-1].append(("a", T0 - 20 * SEC, 7, first_id + 999))  # behind the merged watermark by then: late
    out.append([("z", T0 + 60 * SEC, 0, i)])  # moves this stream's watermark past every window above
    return out


def _write(root, bundles, schema) -> None:
    root.mkdir()
    names = schema.names
    for n, b in enumerate(bundles):
        table = pa.Table.from_pylist([dict(zip(names, (k, t, v, i))) for k, t, v, i in b], schema=pa.schema(
            [(f.name, pa.int64() if f.type == TS else f.type) for f in schema])).cast(schema)
        pq.write_table(table, str(root / f"{n:03d}.parquet"))


@pytest.mark.parametrize("how,window", [("inner", "tumbling(4 seconds)"), ("outer", "session(2 seconds)")])
def test_join_through_spark_matches_test_stream_replay(spark, tmp_path, how, window):
    b1, b2 = _bundles(1, 6, 0), _bundles(2, 5, 1000)
    _write(tmp_path / "s1", b1, SCHEMA1)
    _write(tmp_path / "s2", b2, SCHEMA2)
    opts = {"source": "parquet", "path": str(tmp_path / "s1"), "timestampColumn": "ts", "keyColumns": "k",
            "source2": "parquet", "path2": str(tmp_path / "s2"), "timestampColumn2": "t", "keyColumns2": "user",
            "join": how, "window": window, "aggregate": AGG1, "aggregate2": AGG2,
            "watermark": "bounded(1 second)", "maxFilesPerTrigger": "1", "shards": "2",
            "stateLocation": str(tmp_path / "state"), "lateDataPath": str(tmp_path / "late")}
    chk = run_to_sink(spark, opts, tmp_path)
    triggers = DeltaTable(str(tmp_path / "panes" / "triggers")).to_pyarrow_table()

    s = TestStream(window=window, aggregate=AGG1, aggregate2=AGG2, join=how, key_columns="k",
                   key_columns2="user", timestamp_column2="t", timestamp_unit="us", schema=SCHEMA1, schema2=SCHEMA2)
    batches = offsets(chk)
    merged = MIN_TIME
    for start, end in batches:
        # each stream's watermark: bounded(1 second) behind the latest event of the batches before
        # this one (Spark's rule); the merged one: the earlier of the two, never going back
        seen1 = [t for f in range(0 if start is None else start["up"]) for _, t, _, _ in b1[f]]
        seen2 = [t for f in range(0 if start is None else start["up2"]) for _, t, _, _ in b2[f]]
        want1 = max(seen1) - SEC if seen1 else MIN_TIME
        want2 = max(seen2) - SEC if seen2 else MIN_TIME
        merged = max(merged, min(want1, want2))
        assert (end["wm1"], end["wm2"], end["wm"]) == (want1, want2, merged)
        s1 = [r for f in range(0 if start is None else start["up"], end["up"]) for r in b1[f]]
        s2 = [r for f in range(0 if start is None else start["up2"], end["up2"]) for r in b2[f]]
        s.add_elements(_table(s1, SCHEMA1), stream2=_table(s2, SCHEMA2), watermark=end["wm"],
                       processing_time=end["bt"])
    expected = pa.Table.from_pylist([{c: p[c] for c in triggers.column_names} for p in s.take_panes()])
    assert len(batches) >= 7 and triggers.num_rows >= 2
    assert rows(triggers, drop=("batch_seq",)) == rows(expected, drop=("batch_seq",))
    if how == "inner":
        assert all(r["ids1"] and r["ids2"] for r in triggers.to_pylist())
    else:
        assert any(not r["ids1"] for r in triggers.to_pylist()) or any(not r["ids2"] for r in triggers.to_pylist())
    # every element is either in a pane or in the late table, each stream's marked with its side
    want_late = sorted((r[J.SIDE_COLUMN], r["id"] if r[J.SIDE_COLUMN] == 1 else r["__s2_id"]) for r in s.take_late())
    assert {side for side, _ in want_late} == {1, 2}
    late = DeltaTable(str(tmp_path / "late")).to_pyarrow_table().to_pylist()
    got_late = sorted((r[J.SIDE_COLUMN], r["id"] if r[J.SIDE_COLUMN] == 1 else r["__s2_id"]) for r in late)
    assert got_late == want_late


def _table(events, schema):
    names = schema.names
    return pa.Table.from_pylist([dict(zip(names, (k, t, v, i))) for k, t, v, i in events], schema=pa.schema(
        [(f.name, pa.int64() if f.type == TS else f.type) for f in schema])).cast(schema)


@pytest.mark.parametrize("extra,option", [
    ({"join": "inner"}, "join"),                                        # join without source2
    ({"source2": "parquet", "path2": "PATH2"}, "source2"),              # source2 without join
    ({"join": "full", "source2": "parquet", "path2": "PATH2"}, "join"),
    ({"join": "inner", "source2": "parquet", "path2": "PATH2", "keyColumns2": "user,id"}, "keyColumns2"),
    ({"join": "inner", "source2": "parquet", "path2": "PATH2", "aggregate2": "count(*) AS total"}, "aggregate2"),
])
def test_bad_join_options_fail_at_load(spark, tmp_path, extra, option):
    _write(tmp_path / "s1", [[("a", T0, 1, 1)]], SCHEMA1)
    _write(tmp_path / "s2", [[("a", T0, 1, 2)]], SCHEMA2)
    opts = {"source": "parquet", "path": str(tmp_path / "s1"), "timestampColumn": "ts", "keyColumns": "k",
            "window": "tumbling(4 seconds)", "aggregate": AGG1, "stateLocation": str(tmp_path / "state")}
    opts.update({k: v.replace("PATH2", str(tmp_path / "s2")) for k, v in extra.items()})
    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load()
    assert f"invalid option '{option}'" in str(info.value) and "Accepted:" in str(info.value)


def test_conf_default_join_does_not_reach_single_stream_queries(tmp_path):
    """``spark.windowed.join`` in the conf applies only to queries with a source2."""
    import json

    from spark_windowing.datasource import CONF_DEFAULTS_OPTION
    from spark_windowing.datasource._plugin import WindowedDataSource
    from spark_windowing.datasource.source.parse import parse_options

    def cls(options):  # a query that carries these conf defaults, as spark_windowing.register makes it
        carried = json.dumps({"join": "inner", "aggregate2": "count(*) AS n2"})
        return WindowedDataSource({**options, CONF_DEFAULTS_OPTION: carried})
    base = {"source": "parquet", "path": "/p", "timestampColumn": "ts", "window": "tumbling(1 second)",
            "aggregate": "count(*) AS n", "stateLocation": str(tmp_path)}
    single = parse_options(cls(base).options)
    assert single.spec.join is None and single.stream2 is None
    joined = parse_options(cls({**base, "source2": "json", "path2": "/q"}).options)
    assert joined.spec.join is not None and joined.spec.join.how == "inner" and joined.stream2.path == "/q"
    with pytest.raises(OptionError) as e:  # an explicit join without source2 is still an error
        parse_options(cls({**base, "join": "left"}).options)
    assert e.value.option == "join"


@pytest.mark.parametrize("extra,option", [
    ({"timestampColumn": ""}, "timestampColumn"),                 # processing-time windows
    ({"watermark": "column(ts)"}, "watermark"),
    ({"source2": "panes"}, "source2"),
    ({"path2": ""}, "path2"),
    ({"maxFilesPerTrigger2": "0"}, "maxFilesPerTrigger2"),
])
def test_bad_join_options_without_spark(tmp_path, extra, option):
    from spark_windowing.datasource.source.parse import parse_options
    base = {"source": "parquet", "path": "/p", "timestampColumn": "ts", "window": "tumbling(1 second)",
            "aggregate": "count(*) AS n", "stateLocation": str(tmp_path), "join": "inner", "source2": "json",
            "path2": "/q"}
    with pytest.raises(OptionError) as e:
        parse_options({k.lower(): v for k, v in {**base, **extra}.items()})
    assert e.value.option == option


def test_stream2_options_are_its_own(tmp_path):
    """Stream 2 never silently takes stream 1's schema; a generated stream 2 reads the generator
    options suffixed with 2 and is a different stream (seed + 1), not a copy; errors about stream
    2's upstream name stream 2's options."""
    from spark_windowing.datasource.source.parse import parse_options
    from spark_windowing.datasource.upstreams import upstream_for
    base = {"source": "json", "path": str(tmp_path), "schema": "k string, ts timestamp, v long",
            "timestampColumn": "ts", "keyColumns": "k", "window": "tumbling(1 second)",
            "aggregate": "count(*) AS n", "aggregate2": "count(*) AS n2", "stateLocation": str(tmp_path / "st"),
            "join": "inner", "source2": "json", "path2": str(tmp_path / "nothing_here")}
    cfg = parse_options({k.lower(): v for k, v in base.items()})
    assert cfg.schema_ddl and cfg.stream2.schema_ddl is None
    with pytest.raises(OptionError) as e:
        upstream_for(cfg.stream2).schema()
    assert e.value.option == "path2"
    (tmp_path / "empty").mkdir()
    cfg = parse_options({k.lower(): v for k, v in {**base, "path2": str(tmp_path / "empty")}.items()})
    with pytest.raises(OptionError) as e:
        upstream_for(cfg.stream2).schema()
    assert e.value.option == "schema2"
    cfg = parse_options({k.lower(): v for k, v in {**base, "schema2": "k string, ts nonsense"}.items()})
    with pytest.raises(OptionError) as e:
        upstream_for(cfg.stream2).schema()
    assert e.value.option == "schema2" and "nonsense" in str(e.value)
    gen = {**base, "source": "generator", "source2": "generator", "seed": "7", "keys": "5", "keys2": "9"}
    for k in ("path", "path2", "schema"):
        gen.pop(k)
    cfg = parse_options({k.lower(): v for k, v in gen.items()})
    g1, g2 = cfg.settings, cfg.stream2.settings
    assert (g1.seed, g1.keys, g2.seed, g2.keys) == (7, 5, 8, 9)
    assert g2.events_per_batch == g1.events_per_batch
    with pytest.raises(OptionError) as e:
        parse_options({k.lower(): v for k, v in {**gen, "lateFraction2": "2"}.items()})
    assert e.value.option == "lateFraction2"


def test_left_join_with_a_silent_second_stream_fires_after_the_idle_timeout(spark, tmp_path):
    """Stream 2 has no events at all: with watermarkIdleTimeout it stops holding the merged
    watermark back, so the left join's windows close on stream 1's watermark alone.

    What must hold at any speed: both windows ``[0, 4)`` fire, with nothing of stream 2. Whether
    ``a [8, 12)`` fires too depends on the wall clock (the same timeout also lets stream 1's own
    quiet watermark advance with the processing time that passes, 3 s of it close that window),
    so it is allowed, with its own contents, but not required."""
    b1 = [[("a", T0 + SEC, 5, 1), ("b", T0 + 2 * SEC, 7, 2)], [("a", T0 + 9 * SEC, 1, 3)]]
    _write(tmp_path / "s1", b1, SCHEMA1)
    (tmp_path / "s2").mkdir()
    opts = {"source": "parquet", "path": str(tmp_path / "s1"), "timestampColumn": "ts", "keyColumns": "k",
            "source2": "parquet", "path2": str(tmp_path / "s2"), "schema2": "user string, t timestamp, amount long, id long",
            "timestampColumn2": "t", "keyColumns2": "user", "join": "left", "window": "tumbling(4 seconds)",
            "aggregate": AGG1, "aggregate2": AGG2, "watermarkIdleTimeout": "1 milliseconds",
            "stateLocation": str(tmp_path / "state"), "maxFilesPerTrigger": "1"}
    reader = spark.readStream.format("windowed")
    for k, v in opts.items():
        reader = reader.option(k, v)
    chk = str(tmp_path / "chk")
    name = "join_idle"
    q = (reader.load().writeStream.format("memory").queryName(name).option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert q.exception() is None
    got = sorted((r["window_start"], r["k"], r["ids1"], r["ids2"], r["n2"]) for r in spark.table(name).collect())
    first = [g[1:] for g in got if g[0] == got[0][0]]
    assert first == [("a", [1], [], 0), ("b", [2], [], 0)]
    assert [g[1:] for g in got if g[0] != got[0][0]] in ([], [("a", [3], [], 0)])
    assert all(end["wm2"] == MIN_TIME for _, end in offsets(chk))


def test_replayed_join_batches_give_identical_panes(tmp_path):
    """The reader's offsets hold both streams' positions: reading a batch (start, end] again —
    as Spark does after a crash — gives the same panes, byte for byte (no Spark session needed)."""
    import json

    from pyspark.sql.streaming.datasource import ReadMaxFiles

    from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema
    _write(tmp_path / "s1", _bundles(3, 5, 0), SCHEMA1)
    _write(tmp_path / "s2", _bundles(4, 5, 1000), SCHEMA2)
    opts = {"source": "parquet", "path": str(tmp_path / "s1"), "timestampcolumn": "ts", "keycolumns": "k",
            "source2": "parquet", "path2": str(tmp_path / "s2"), "timestampcolumn2": "t", "keycolumns2": "user",
            "join": "outer", "window": "sliding(4 seconds, 2 seconds)", "aggregate": AGG1, "aggregate2": AGG2,
            "accumulationmode": "accumulating_and_retracting", "trigger": "AfterWatermark(early=AfterCount(1))",
            "watermark": "bounded(1 second)", "shards": "2", "statelocation": str(tmp_path / "state")}
    reader = WindowedStreamReader(opts, stream_schema(opts))
    start, batches, seen = reader.initialOffset(), 0, 0
    while True:
        end = reader.latestOffset(start, ReadMaxFiles(1))
        if end == start:
            break
        end = json.loads(json.dumps(end))  # as Spark's offset log keeps it
        parts = reader.partitions(start, end)
        first = [[b.to_pylist() for b in reader.read(p)] for p in parts]
        again = [[b.to_pylist() for b in reader.read(p)] for p in parts]
        assert again == first
        seen += sum(len(b) for shard in first for b in shard)
        reader.commit(end)
        start, batches = end, batches + 1
    assert batches >= 6 and seen > 5
