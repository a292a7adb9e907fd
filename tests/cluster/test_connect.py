"""The same windowed query submitted from a Spark Connect client: a Connect server (pyspark's own
``sbin/start-connect-server.sh``, its jar ships in the pip package) driving the standalone cluster,
and a client process (``tests/cluster/_job.py`` with an ``sc://`` URL) that registers the
``windowed`` format, starts the query and reads its progress. The tables equal the uninterrupted
run's of ``test_cluster.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.cluster.test_cluster import JOB, _config, _content, clean, cluster, upstream  # noqa: F401 (fixtures)
from tests.objectstore import free_port
from tests.sparkcluster import SPARK_HOME, _children

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    import socket
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


def test_query_from_a_spark_connect_client(object_store, cluster, upstream, clean, connect_server, tmp_path):
    config = _config(object_store, cluster, upstream, "connect", tmp_path)
    cfg = json.loads(open(config).read())
    cfg["master"] = connect_server
    open(config, "w").write(json.dumps(cfg))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run([sys.executable, JOB, config], capture_output=True, text=True, env=env, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    progress = [json.loads(line.split(" ", 1)[1]) for line in out.stdout.splitlines() if line.startswith("PROGRESS ")]
    assert len(progress) >= 10 and sum(p["numInputRows"] for p in progress) == 400
    assert _content(object_store, "connect") == clean["content"]
