"""The windowed query on a real Spark standalone cluster (``tests/sparkcluster.py``: a master and 2
workers, 1 core and 1 GB each, executors in their own JVMs and Python processes) with everything
that outlives a task on the S3-API server (``tests/objectstore.py``): the Delta upstream, the state,
the late-data table and the pane tables. Only Spark's own checkpoint is on the driver's local disk.

Each fault run is compared with an uninterrupted run over the same upstream: the pane and late
tables hold the same rows (all columns but ``batch_time``, the wall-clock time a batch was planned).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

import socket

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.objectstore import ObjectStore, count, free_port
from tests.sparkcluster import SPARK_HOME, SparkCluster, _children

pytestmark = pytest.mark.spark

JOB = os.path.join(os.path.dirname(__file__), "_job.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARDS = 4                      # > the cluster's 2 executor cores
VERSIONS = 10
SEC = 1_000_000
T0 = 1_767_225_600_000_000      # 2026-01-01T00:00:00Z
TABLES = ("triggers", "retractions", "current")


@pytest.fixture(scope="module")
def cluster(object_store, tmp_path_factory):
    c = SparkCluster(str(tmp_path_factory.mktemp("cluster")), workers=2, cores=1, memory="1g")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def upstream(object_store) -> str:
    """A Delta table of click events on the object store, one version per future micro-batch, with
    events behind the watermark (late rows) from version 3 on."""
    uri = object_store.uri("cluster/events")
    rnd = random.Random(17)
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    for b in range(VERSIONS):
        n = 40
        ts = [T0 + b * 4 * SEC + rnd.randrange(-2 * SEC, 2 * SEC) for _ in range(n)]
        if b >= 3:
            ts[:3] = [T0 + (b - 3) * 4 * SEC - 12 * SEC] * 3
        table = pa.table({"k": [f"k{rnd.randrange(16)}" for _ in range(n)],
                          "ts": [datetime.fromtimestamp(t / SEC, tz=timezone.utc) for t in ts],
                          "v": [rnd.randrange(100) for _ in range(n)]}, schema=schema)
        write_deltalake(uri, table, mode="append")
    return uri


def _config(store: ObjectStore, cluster: SparkCluster, upstream: str, run: str, tmp_path, **source) -> str:
    cfg = {"master": cluster.url, "env": store.env,
           "panes": store.uri(f"cluster/{run}/panes"), "checkpoint": str(tmp_path / f"{run}-chk"),
           "source": {"source": "delta", "path": upstream, "maxFilesPerTrigger": "1", "timestampColumn": "ts",
                      "keyColumns": "k", "window": "tumbling(10 seconds)", "trigger": "AfterWatermark(early=AfterCount(5))",
                      "accumulationMode": "accumulating_and_retracting", "aggregate": "sum(v) AS total, count(*) AS n",
                      "watermark": "bounded(2 seconds)", "shards": str(SHARDS),
                      "stateLocation": store.uri(f"cluster/{run}/state"),
                      "lateDataPath": store.uri(f"cluster/{run}/late"), **source}}
    path = tmp_path / f"{run}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _start(config: str, log) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, JOB, config], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def _run(config: str, tmp_path, name: str, timeout: float = 300) -> str:
    """Run the job to the end; return its output (the test fails if the job does)."""
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "ab") as log:
        proc = _start(config, log)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    out = log_path.read_text(errors="replace")
    assert code == 0, f"job {name} failed ({code}):\n{out[-4000:]}"
    return out


def _wait_for_manifest(store: ObjectStore, run: str, seq: int, mark: int, timeout: float = 240) -> None:
    """Until some shard of ``run`` has published its snapshot of batch ``seq``."""
    name = f"cluster/{run}/state/shards/"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(r.kind == "PUT" and r.key.startswith(name) and r.key.endswith(f"{seq:012d}.manifest")
               for r in store.proxy.since(mark)):
            return
        time.sleep(0.2)
    raise AssertionError(f"no snapshot of batch {seq} within {timeout} s")


def _content(store: ObjectStore, run: str) -> dict[str, list]:
    """Every row of the pane tables and the late table, ``batch_time`` left out, sorted."""
    out = {}
    uris = {t: store.uri(f"cluster/{run}/panes/{t}") for t in TABLES}
    uris["late"] = store.uri(f"cluster/{run}/late")
    for name, uri in uris.items():
        table = DeltaTable(uri).to_pyarrow_table()
        table = table.select(sorted(c for c in table.column_names if c != "batch_time"))
        out[name] = sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())
    return out


@pytest.fixture(scope="module")
def clean(object_store, cluster, upstream, tmp_path_factory):
    """The uninterrupted run, and the object-store requests of each of its micro-batches."""
    tmp = tmp_path_factory.mktemp("clean")
    mark = object_store.proxy.mark()
    # claimWait well above a loaded machine's task time: whether a slot gets to wait for the
    # executor that holds a shard must not depend on how fast that executor's task starts
    out = _run(_config(object_store, cluster, upstream, "clean", tmp, claimWait="20 seconds"), tmp, "clean")
    requests = object_store.proxy.since(mark, "cluster/clean/state/")
    content = _content(object_store, "clean")
    assert len(content["triggers"]) > 30 and content["retractions"] and content["late"]
    return {"content": content, "requests": requests, "output": out, "checkpoint": tmp / "clean-chk"}


def test_auto_runs_every_batch_on_the_executors_of_a_cluster(clean):
    """``execution=auto`` (the default) reads the master off the driver JVM's command line
    (``spark://``: not local mode) and puts every micro-batch on the executors (``source.auto``)."""
    from tests.spark._helpers import offsets
    routes = [end.get("route") for _, end in offsets(str(clean["checkpoint"]))]
    assert len(routes) >= VERSIONS and set(routes) == {"executors"}, routes


def _puts_per_batch(requests) -> dict[int, Counter]:
    """State-location PUTs by batch (the batch number in the object key) and object kind."""
    out: dict[int, Counter] = defaultdict(Counter)
    rx = re.compile(r"/(?:(\d{12})\.manifest|seg-(\d{12})-[^/]*|reports/(\d+)/[^/]*)$")
    for r in requests:
        m = rx.search(r.key)
        if r.kind == "PUT" and m:
            kind = ("manifest", "segment", "report")[next(i for i, g in enumerate(m.groups()) if g)]
            out[int(next(g for g in m.groups() if g))][kind] += 1
    return out


def test_requests_per_micro_batch_follow_the_shards(clean):
    """Per micro-batch and shard: one manifest and one report PUT, a segment PUT only when the
    shard's state changed; reads are a few per shard (the start manifest; segments only when a
    shard's task lands on an executor that does not hold its state); the driver lists the reports
    once per batch and reads none (``shard_reports``); garbage collection lists, every 10 batches;
    the spare slots list the claims (``affinity.slots``)."""
    puts = _puts_per_batch(clean["requests"])
    batches = sorted(puts)
    totals = Counter(r.kind for r in clean["requests"])
    print("\nstate PUTs per micro-batch:", {b: dict(puts[b]) for b in batches})
    print(f"state requests over {len(batches)} micro-batches, {SHARDS} shards:", dict(totals))
    assert len(batches) >= VERSIONS
    for b in batches:
        assert puts[b]["manifest"] == SHARDS and puts[b]["report"] == SHARDS, (b, puts[b])
        assert puts[b]["segment"] <= SHARDS, (b, puts[b])
    # the driver lists each batch's reports once; garbage collection lists once per shard (one round)
    claim_lists = count(clean["requests"], r"/claims/")["LIST"]
    assert totals["LIST"] - claim_lists <= len(batches) + 1 + SHARDS + 2
    # a spare slot lists the claims at least once (all taken: it runs nothing); a waiting one every
    # 0.1 s, so how often depends on how long it waits: no upper bound holds at every speed
    assert SHARDS * len(batches) <= claim_lists, claim_lists
    assert totals["GET"] + totals["HEAD"] <= len(batches) * SHARDS * 8
    report_reads = count(clean["requests"], r"/reports/")
    assert report_reads["GET"] + report_reads["HEAD"] == 0, report_reads  # the names carry what the driver reads


def _run_with_fault(store: ObjectStore, cluster: SparkCluster, upstream: str, tmp_path, run: str, fault) -> str:
    """Start the job, call ``fault()`` once batch 3 is published and while tasks are busy (the
    store holds each request 0.4 s for a moment), wait for the job; return its output. The job
    must succeed: Spark retries what the fault broke."""
    mark = store.proxy.mark()
    with open(tmp_path / f"{run}.log", "ab") as log:
        proc = _start(_config(store, cluster, upstream, run, tmp_path), log)
        try:
            _wait_for_manifest(store, run, 3, mark)
            store.proxy.delay(0.4)                 # tasks now spend seconds waiting on the store
            time.sleep(3)
            fault()
            store.proxy.delay(0)
            code = proc.wait(300)
        finally:  # a fault or a wait that failed leaves no job (driver and JVM) running behind the test
            store.proxy.delay(0)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    out = (tmp_path / f"{run}.log").read_text(errors="replace")
    assert code == 0, out[-4000:]
    return out


@pytest.mark.slow
def test_python_worker_killed_mid_stream(object_store, cluster, upstream, clean, tmp_path):
    victims: list[int] = []

    def kill_python_workers() -> None:
        for pid in cluster.python_workers(0) + cluster.python_workers(1):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended between the listing and the kill
                continue
            victims.append(pid)

    out = _run_with_fault(object_store, cluster, upstream, tmp_path, "pykill", kill_python_workers)
    assert victims, "no Python worker found (alive) under the executors"
    assert re.search(r"Lost task|Python worker exited unexpectedly|crashed", out), "the kill did not fail a task"
    assert _content(object_store, "pykill") == clean["content"]


@pytest.mark.slow
def test_whole_worker_killed_mid_stream(object_store, cluster, upstream, clean, tmp_path):
    try:
        out = _run_with_fault(object_store, cluster, upstream, tmp_path, "wkill", lambda: cluster.kill_worker(1))
    finally:
        cluster.start_worker(1)
        cluster.wait_workers(2)
    assert re.search(r"Lost executor|lost|Removed", out), "no executor was lost"
    assert _content(object_store, "wkill") == clean["content"]
    print("\nstate reloads per micro-batch, a worker killed after batch 3:", _reloads(object_store, "wkill", range(12)))


@pytest.mark.slow
def test_driver_killed_and_restarted_from_the_checkpoint(object_store, cluster, upstream, clean, tmp_path):
    mark = object_store.proxy.mark()
    config = _config(object_store, cluster, upstream, "dkill", tmp_path)
    with open(tmp_path / "dkill.log", "ab") as log:
        proc = _start(config, log)
        _wait_for_manifest(object_store, "dkill", 4, mark)
        os.killpg(proc.pid, signal.SIGKILL)           # the driver: its Python process and its JVM
        proc.wait()
    cluster.wait_workers(2)
    _run(config, tmp_path, "dkill-restart")
    assert _content(object_store, "dkill") == clean["content"]


@pytest.mark.slow
def test_object_store_refuses_requests_for_a_while(object_store, cluster, upstream, clean, tmp_path):
    mark = object_store.proxy.mark()
    _run_with_fault(object_store, cluster, upstream, tmp_path, "outage", lambda: object_store.proxy.refuse_for(5))
    assert any(r.kind == "REFUSED" for r in object_store.proxy.since(mark))
    assert _content(object_store, "outage") == clean["content"]


# --------------------------------------------------------------------------- Spark Connect
# The same query submitted from a Spark Connect client: a Connect server (pyspark's own
# sbin/start-connect-server.sh; its jar ships in the pip package) driving this cluster, and a client
# process (_job.py with an sc:// URL) that registers the format, starts the query and reads its
# progress.

@pytest.fixture(scope="module")
def connect_server(object_store, cluster, tmp_path_factory):
    work = tmp_path_factory.mktemp("connect")
    port = free_port()
    confs = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
             "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
             "spark.driver.memory": "768m", "spark.executor.memory": "512m", "spark.executor.cores": "1",
             "spark.cores.max": "2", "spark.ui.enabled": "false", "spark.task.maxFailures": "8",
             "spark.sql.session.timeZone": "UTC", "spark.executorEnv.PYTHONPATH": ROOT,
             "spark.executorEnv.PYSPARK_PYTHON": sys.executable, "spark.pyspark.python": sys.executable,
             **{f"spark.executorEnv.{k}": v for k, v in object_store.env.items()}}
    args = [os.path.join(SPARK_HOME, "sbin", "start-connect-server.sh"), "--wait", "--master", cluster.url]
    for k, v in confs.items():
        args += ["--conf", f"{k}={v}"]
    env = {**os.environ, **object_store.env, "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(work), "SPARK_PID_DIR": str(work), "PYTHONPATH": ROOT,
           "PYSPARK_PYTHON": sys.executable}
    log = open(work / "server.log", "ab")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 120
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError(f"Spark Connect server did not start: {(work / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    yield f"sc://127.0.0.1:{port}"
    for pid in [*_children(proc.pid), proc.pid]:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    proc.wait()
    log.close()


@pytest.mark.slow
def test_query_from_a_spark_connect_client(object_store, cluster, upstream, clean, connect_server, tmp_path):
    pytest.importorskip("grpc", reason="a Spark Connect client needs pyspark[connect]")
    config = _config(object_store, cluster, upstream, "connect", tmp_path)
    cfg = json.loads(open(config).read())
    cfg["master"] = connect_server
    open(config, "w").write(json.dumps(cfg))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run([sys.executable, JOB, config], capture_output=True, text=True, env=env, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    progress = [json.loads(line.split(" ", 1)[1]) for line in out.stdout.splitlines() if line.startswith("PROGRESS ")]
    clean_progress = [json.loads(line.split(" ", 1)[1]) for line in clean["output"].splitlines()
                      if line.startswith("PROGRESS ")]
    # the source's input rows are the panes it emitted: as many, batch by batch, as in the clean run
    def rows_per_batch(entries: list[dict]) -> list[tuple]:
        return [(p["batchId"], p["numInputRows"]) for p in entries]
    assert _content(object_store, "connect") == clean["content"]
    assert rows_per_batch(progress) == rows_per_batch(clean_progress) and len(progress) >= 10
    assert sum(n for _, n in rows_per_batch(progress)) > 0


def test_shards_are_claimed_by_conditional_writes_on_s3(object_store, clean):
    """With ``s3://`` state each task claims its shard by a conditional PUT (``If-None-Match: *``,
    botocore on the executors): every micro-batch has exactly ``SHARDS`` successful claims, one per
    shard."""
    claims: dict[int, set[int]] = defaultdict(set)
    rx = re.compile(r"/claims/(\d+)/shard-(\d+)$")
    for r in clean["requests"]:
        m = rx.search(r.key)
        if m and r.kind == "PUT" and r.status == 200:
            assert r.conditional, r
            claims[int(m.group(1))].add(int(m.group(2)))
    assert len(claims) >= VERSIONS
    assert all(shards == set(range(SHARDS)) for shards in claims.values()), dict(claims)


def test_after_warm_up_no_shard_reads_its_state_from_the_store(object_store, clean):
    """Issue #29: with the pane sink (a Python sink: a task's reading and writing Python workers
    swap every batch) and ``s3://`` state, a shard whose current state its worker does not hold
    catches up from its worker's older copy or reopens from its executor's local copies
    (``shard_state``); from batch ``WARM_UP`` on, no shard reads its state from the store. Spark
    gives a batch's tasks to executors in the order their cores come free (a Python source cannot
    name preferred locations), so an executor can get more tasks than it holds shards: that task
    leaves the shard to the executor that holds it (``claimWait``), whose next task, one of the
    spare slots, claims it (``affinity``). Prints, per micro-batch, how each shard got its state
    (the shards' reports)."""
    ways = _reloads(object_store, "clean", range(1, VERSIONS + 2))
    print("\nper micro-batch (state_reloads, local_reloads, state_catch_ups):", ways)
    print("trigger ms per micro-batch:", [json.loads(line.split(" ", 1)[1])["ms"]
                                          for line in clean["output"].splitlines() if line.startswith("PROGRESS ")])
    segment_gets = Counter(int(m.group(1)) for r in clean["requests"] if r.kind in ("GET", "HEAD")
                           for m in [re.search(r"/seg-(\d{12})-", r.key)] if m)
    print("segment reads from the store, by the batch that wrote the segment:", dict(sorted(segment_gets.items())))
    steady = {b: w for b, w in ways.items() if b >= WARM_UP}
    assert len(steady) >= VERSIONS - WARM_UP and sum(w[0] for w in steady.values()) == 0, ways


#: Batches before this one may read state from the store: each executor's Python workers and
#: local copies fill in the first batches (both executors' first tasks, the first swap of roles).
WARM_UP = 4


def _reloads(store: ObjectStore, run: str, batches) -> dict[int, tuple[int, int, int]]:
    """Batch -> (shards that read state back from the store, from their executor's local copies,
    caught up from their worker's older copy), from the shards' reports."""
    from spark_windowing.datasource.progress import read_batch_report

    reports = {b: read_batch_report(store.uri(f"cluster/{run}/state"), b) for b in batches}
    return {b: (r.state_reloads, r.local_reloads, r.state_catch_ups) for b, r in reports.items() if r is not None}
