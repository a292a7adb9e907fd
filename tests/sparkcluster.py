"""A Spark standalone cluster on 127.0.0.1 for the tests: a master and workers started from the
pyspark distribution's own ``bin/spark-class`` (the pip package ships no ``sbin/start-master.sh``),
each its own JVM on free ports, each worker with its own work and local directories (no state
shared on a local disk). Executors are JVMs the workers start, and their Python workers are
processes those executors start, so tests can kill either, or a whole worker with all of them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

import pyspark

from tests.objectstore import free_port

SPARK_HOME = os.path.dirname(os.path.abspath(pyspark.__file__))


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    by_parent: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        by_parent.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class SparkCluster:
    """A master and ``workers`` workers (``cores`` and ``memory`` each)."""

    def __init__(self, workdir: str, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                 env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.env = {**os.environ, **(env or {}), "SPARK_HOME": SPARK_HOME, "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_DAEMON_MEMORY": "384m", "SPARK_NO_DAEMONIZE": "1"}
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master = self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                              "--port", str(self.port), "--webui-port", str(self.ui_port)])
        self.workers: list[subprocess.Popen] = []
        self.cores, self.memory = cores, memory
        try:
            self._wait_master()
            for i in range(workers):
                self.start_worker(i)
            self.wait_workers(workers)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, args: list[str], extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(os.path.join(self.workdir, f"{name}.log"), "ab")
        return subprocess.Popen([os.path.join(SPARK_HOME, "bin", "spark-class"), *args],
                                env={**self.env, **(extra_env or {})}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)

    def start_worker(self, i: int) -> None:
        work = os.path.join(self.workdir, f"worker-{i}")
        os.makedirs(os.path.join(work, "local"), exist_ok=True)
        proc = self._start(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                          "--webui-port", str(free_port()), "--cores", str(self.cores),
                                          "--memory", self.memory, "--work-dir", os.path.join(work, "work"),
                                          self.url],
                           {"SPARK_LOCAL_DIRS": os.path.join(work, "local")})
        if i < len(self.workers):
            self.workers[i] = proc
        else:
            self.workers.append(proc)

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            return json.loads(r.read())

    def _wait_master(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while True:
            try:
                self.state()
                return
            except OSError:
                if time.time() > deadline or self.master.poll() is not None:
                    raise RuntimeError(f"Spark master did not start (see {self.workdir}/master.log)")
                time.sleep(0.3)

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def wait_workers(self, n: int, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while self.alive_workers() < n:
            if time.time() > deadline:
                raise RuntimeError(f"{n} Spark workers did not register (see {self.workdir}/worker-*.log)")
            time.sleep(0.3)

    # ------------------------------------------------------------------ faults
    def python_workers(self, i: int) -> list[int]:
        """Pids of the Python processes under worker ``i``'s executors that run tasks: the
        processes the ``pyspark.daemon`` forked (they keep its command line), or, without a
        daemon, the executors' Python children."""
        python = [p for e in self.executors(i) for p in _children(e) if "python" in _cmdline(p)]
        daemons = {p for p in python if _parent(p) in self.executors(i) and "pyspark.daemon" in _cmdline(p)}
        forked = [p for p in python if _parent(p) in daemons]
        return forked or [p for p in python if p not in daemons]

    def executors(self, i: int) -> list[int]:
        return [p for p in _children(self.workers[i].pid) if "CoarseGrainedExecutorBackend" in _cmdline(p)]

    def kill_worker(self, i: int) -> None:
        """``kill -9`` worker ``i``, its executors and their Python processes, all at once."""
        victims = [self.workers[i].pid, *_children(self.workers[i].pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.workers[i].wait()

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc.poll() is None:
                for pid in [*_children(proc.pid), proc.pid]:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                proc.wait()
