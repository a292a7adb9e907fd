"""A notebook's day in one session (#56 item 3): cycle after cycle, several windowed queries start
and stop in the test session and share its Python workers (``spark.python.worker.reuse``), through
``format("windowed")`` and through ``window(df)``, each into the windowed sink with a late table:

* new paths: a query over a new place (two files), every cycle;
* the same path restarted: a place that got one file in the cycle before gets its second file and
  the query restarts from its checkpoint (odd cycles);
* the same path re-created: that place deleted (events, panes, late table, checkpoint, state) and
  made again with its first file (even cycles);
* a changed option refused: before the restart, the query with another ``window`` over the same
  checkpoint and state fails naming the option (odd cycles).

Each run's tables equal the tables the same run wrote in a clean place at the start of the test
(its references), and the Python workers' resident memory after the warm-up cycles does not grow
by more than ``RSS_GROWTH_BOUND`` by the last cycle.

The memory measured is the largest worker's RSS (a worker that has run the plugin: pyarrow,
deltalake and the operator imported; a leak grows one past the others). Each worker's own growth
is no measure: a worker Spark forked late still imports all that in the measured cycles (one
grew by 39 MiB without any leak). The bound is coarse on purpose (RSS moves with the allocator,
and with which worker ran which task): it is there for a cache that grows with every query or
batch of the day, not for a few kilobytes. Without a leak the largest worker grew by 1.2 MiB
over cycles 1 -> 3 (218.3 -> 219.5 MiB, 2026-11-29); with a module-level list in the sink's
writer keeping 4 MiB per ``write`` (added by hand, then removed) by 47.6 MiB (284.2 -> 331.8),
and ``test_a_notebook_day`` failed. The 20 cycles: 219.3 MiB after cycle 3, 222.5 after cycle 19
(+3.2 MiB, 0.2 a cycle; the caches keyed by table path keep an entry per new path, two new paths
a cycle here)."""

from __future__ import annotations

import os
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.spark.sink_helpers import run_tables

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000_000
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
ROUTES = ("source", "window_df")
OPERATOR = {"timestampColumn": "ts", "keyColumns": "k", "window": "tumbling(10 seconds)",
            "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
            "accumulationMode": "accumulating_and_retracting", "watermark": "bounded(4 seconds)",
            "allowedLateness": "10 seconds", "aggregate": "count(*) AS n, sum(v) AS s", "shards": "2"}
#: how much the largest Python worker's RSS may grow from the end of the warm-up to the last cycle
RSS_GROWTH_BOUND = 24 * 2**20


def _file(events, b: int) -> None:
    """File ``b`` (0 or 1) of a place: 24 events over 2 keys, 36 s of event time from ``40 * b``
    seconds on; file 1 also holds one event late (for the late table) and one within lateness."""
    ts = [T0 + b * 40_000_000 + i * 1_500_000 for i in range(24)]
    if b == 1:
        ts[3] = T0 + 1_000_000            # behind the watermark by more than the lateness: late table
        ts[7] = T0 + 28_000_000           # behind the watermark, within the lateness: a LATE pane
    events.mkdir(parents=True, exist_ok=True)
    path = events / f"part-{b}.parquet"
    pq.write_table(pa.table({"k": [f"k{i % 2}" for i in range(24)], "ts": ts, "v": [b * 100 + i for i in range(24)]},
                            schema=SCHEMA), path)
    os.utime(path, (1_700_000_000 + b * 10,) * 2)      # Spark's file source reads by mtime


def _start(spark, place, route: str, window: str = OPERATOR["window"], sink: str = "windowed"):
    """Start the query of ``route`` over ``place`` (events, panes, late, chk, state under it),
    availableNow; ``window`` the window option, ``sink`` the sink's format."""
    options = {**OPERATOR, "window": window, "stateLocation": str(place / "state"),
               "lateDataPath": str(place / "late")}
    if route == "source":
        panes = (spark.readStream.format("windowed").options(**options)
                 .options(source="parquet", path=str(place / "events"), maxFilesPerTrigger="1").load())
    else:
        import spark_windowing
        events = spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1) \
            .parquet(str(place / "events"))
        panes = spark_windowing.window(events, **options)
    return (panes.writeStream.format(sink).option("path", str(place / "panes"))
            .option("checkpointLocation", str(place / "chk")).trigger(availableNow=True).start())


def _finish(queries) -> None:
    for q in queries:
        q.awaitTermination(300)
        assert not q.isActive, "query did not finish in time"
        assert q.exception() is None, q.exception()


def _tables(place) -> dict[str, list[tuple]]:
    """The pane tables and the late table, without the batch time (the wall clock of each run)."""
    return run_tables(place)


def _refused(spark, place, route: str) -> str:
    """The error of the query of ``route`` over ``place``'s checkpoint and state with another window,
    into the noop sink (the windowed sink would refuse it too, for its tables' spec: the reader's
    and ``window(df)``'s own refusals are the ones looked at here)."""
    with pytest.raises(Exception) as failed:
        _finish([_start(spark, place, route, window="tumbling(20 seconds)", sink="noop")])
    return str(failed.value)


def _worker_rss() -> dict[int, int]:
    """pid -> resident bytes of this session's Python workers: the processes under this process
    (its Spark JVM's descendants) running ``pyspark.daemon``, the daemon and the workers it forks."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:      # ended meanwhile
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = {}, list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ")
            with open(f"/proc/{pid}/statm") as f:
                resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
        if b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline:
            out[pid] = resident
    return out


def _day(spark, tmp_path, cycles: int, warm_up: int) -> list[dict[int, int]]:
    """Run the day; return the Python workers' RSS (``_worker_rss``) after each cycle."""
    expected, ref = {}, tmp_path / "reference"   # each run of the day once, in a clean place
    for route in ROUTES:
        _file(ref / route / "again" / "events", 0)
        _file(ref / route / "new" / "events", 0)
        _file(ref / route / "new" / "events", 1)
    _finish([_start(spark, ref / route / place, route) for route in ROUTES for place in ("again", "new")])
    for route in ROUTES:
        expected[route, "created"], expected[route, "new"] = _tables(ref / route / "again"), _tables(ref / route / "new")
        _file(ref / route / "again" / "events", 1)
    _finish([_start(spark, ref / route / "again", route) for route in ROUTES])
    for route in ROUTES:
        expected[route, "restarted"] = _tables(ref / route / "again")
    for route in ROUTES:
        assert expected[route, "restarted"]["late"] and expected[route, "restarted"]["retractions"]
        assert expected[route, "created"] != expected[route, "restarted"]
    memory = []
    for cycle in range(cycles):
        runs = {}
        for route in ROUTES:
            again = tmp_path / "day" / route / "again"
            if cycle % 2 == 0:                # re-created (a new path on cycle 0)
                shutil.rmtree(again, ignore_errors=True)
                _file(again / "events", 0)
                runs[again] = (route, "created")
            else:                             # a new file; another window refused, then the restart
                _file(again / "events", 1)
                assert "invalid option 'window'" in _refused(spark, again, route)
                runs[again] = (route, "restarted")
            new = tmp_path / "day" / route / f"new-{cycle}"
            _file(new / "events", 0)
            _file(new / "events", 1)
            runs[new] = (route, "new")
        started = time.monotonic()
        _finish([_start(spark, place, route) for place, (route, _) in runs.items()])
        print(f"cycle {cycle}: the queries ran {time.monotonic() - started:.1f} s")
        for place, run in runs.items():
            assert _tables(place) == expected[run], (cycle, place)
        memory.append(_worker_rss())
        print(f"cycle {cycle}: {len(memory[-1])} Python worker processes, largest "
              f"{max(memory[-1].values()) / 2**20:.1f} MiB, total {sum(memory[-1].values()) / 2**20:.1f} MiB")
    grown = max(memory[-1].values()) - max(memory[warm_up - 1].values())
    print(f"cycles {warm_up - 1} -> {cycles - 1}: the largest worker grew by {grown / 2**20:.1f} MiB")
    assert grown < RSS_GROWTH_BOUND, f"the largest Python worker grew by {grown / 2**20:.1f} MiB from cycle {warm_up - 1} to {cycles - 1}"
    return memory


def test_a_notebook_day(spark, tmp_path):
    """The day's short variant (CI): 4 cycles, the memory measured from the end of the second."""
    _day(spark, tmp_path, cycles=4, warm_up=2)


@pytest.mark.slow
def test_a_long_notebook_day(spark, tmp_path):
    """20 cycles, the memory measured from the end of the fourth."""
    _day(spark, tmp_path, cycles=20, warm_up=4)
