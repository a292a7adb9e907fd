"""A single-node Apache Kafka broker (KRaft mode) on 127.0.0.1, for the tests and the example.

The broker's jars come from Maven Central (``org.apache.kafka:kafka_2.13`` and its runtime
dependencies), resolved with the Apache Ivy jar that pyspark ships, into
``~/.cache/spark-windowing/kafka-<version>/lib`` (``SPARK_WINDOWING_CACHE`` moves the cache).
Fetching is idempotent: a finished download leaves a ``.complete`` marker and is reused.

Usage (``scripts/kafka.sh`` wraps this)::

    python scripts/kafka_broker.py start DIR   # prints the bootstrap servers, e.g. 127.0.0.1:41234
    python scripts/kafka_broker.py stop DIR

From Python: ``with KafkaBroker(dir) as b: b.bootstrap``. Ports are picked at run time; storage
is formatted on first start and kept in ``DIR`` (a restart keeps the topics and records).
"""

from __future__ import annotations

import base64
import fcntl
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

KAFKA_VERSION = os.environ.get("SPARK_WINDOWING_KAFKA_VERSION", "4.1.1")
CACHE = Path(os.environ.get("SPARK_WINDOWING_CACHE", Path.home() / ".cache" / "spark-windowing"))
START_TIMEOUT_S = 90


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else "java"


def _ivy_jar() -> str:
    import pyspark
    jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "ivy-*.jar"))
    if not jars:
        raise RuntimeError("no ivy jar in pyspark/jars: cannot resolve the Kafka broker from Maven Central")
    return jars[0]


def kafka_lib(version: str = KAFKA_VERSION) -> Path:
    """The directory of the broker's jars, fetched from Maven Central on first use. Processes that
    start at once (pytest-xdist workers, the two steps of scripts/test.sh) fetch it one at a time:
    the first fetches under an exclusive lock, the others wait for it and reuse its result."""
    lib = CACHE / f"kafka-{version}" / "lib"
    if (lib / ".complete").exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with open(lib.parent / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # released when the file closes, or the process dies
        if not (lib / ".complete").exists():
            _fetch(version, lib)
    return lib


def _fetch(version: str, lib: Path) -> None:
    tmp = lib.with_name(f"lib.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    settings = Path(__file__).resolve().parents[1] / "spark_windowing" / "tools" / "ivysettings.xml"
    cmd = [_java(), "-jar", _ivy_jar(), "-settings", str(settings), "-cache", str(CACHE / "ivy-cache-central"),
           "-dependency", "org.apache.kafka", "kafka_2.13", version,
           "-retrieve", f"{tmp}/[artifact]-[revision](-[classifier]).[ext]"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not list(tmp.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"fetching Kafka {version} from Maven Central failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    for extra in list(tmp.glob("*-javadoc.jar")) + list(tmp.glob("*-sources.jar")):
        extra.unlink()
    (tmp / ".complete").write_text(version)
    shutil.rmtree(lib, ignore_errors=True)   # an interrupted earlier fetch's leftovers
    tmp.rename(lib)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaBroker:
    """One KRaft broker+controller process with its data in ``root``."""

    def __init__(self, root: str | os.PathLike, version: str = KAFKA_VERSION) -> None:
        self.root = Path(root)
        self.version = version
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _config(self, port: int, controller: int) -> Path:
        logs = self.root / "data"
        props = {
            "process.roles": "broker,controller", "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(logs), "num.partitions": "1", "num.network.threads": "2", "num.io.threads": "2",
            "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false",
            # retention tests delete whole segments: keep them small and checked often
            "log.segment.bytes": str(1 << 20), "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "0", "log.initial.task.delay.ms": "0",
        }
        path = self.root / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def start(self) -> "KafkaBroker":
        """Start (formatting the storage on first start); return once the broker accepts connections."""
        self.root.mkdir(parents=True, exist_ok=True)
        ports = self.root / "ports"
        if ports.exists():  # a restart keeps its addresses (the KRaft voter set records the controller's)
            self.port, controller = map(int, ports.read_text().split())
        else:
            self.port, controller = free_port(), free_port()
            ports.write_text(f"{self.port} {controller}")
        config = self._config(self.port, controller)
        if not (self.root / "data" / "meta.properties").exists():
            self.format_storage(config, cluster_id())
        log = open(self.root / "broker.log", "ab")
        self.proc = subprocess.Popen(self._jvm() + ["kafka.Kafka", str(config)], stdout=log,
                                     stderr=subprocess.STDOUT, env=self._env(), start_new_session=True)
        (self.root / "broker.pid").write_text(str(self.proc.pid))
        (self.root / "bootstrap").write_text(self.bootstrap)
        self._wait_ready()
        return self

    def format_storage(self, config: Path, cluster: str) -> None:
        """Format the log directories of ``config`` for the cluster id ``cluster``. The id goes in as
        one argument, ``--cluster-id=ID``, so that an id beginning with ``-`` is not read as an option."""
        fmt = subprocess.run(self._jvm() + ["kafka.tools.StorageTool", "format", "--standalone",
                                            f"--cluster-id={cluster}", "-c", str(config)],
                             capture_output=True, text=True, env=self._env(), timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka storage format failed: {fmt.stdout}\n{fmt.stderr}")

    def _jvm(self) -> list[str]:
        return [_java(), "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true", "-cp", f"{kafka_lib(self.version)}/*"]

    @staticmethod
    def _env() -> dict[str, str]:
        return {**os.environ, "KAFKA_HEAP_OPTS": "-Xmx512m"}

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:  # the port first (quiet), then the broker's metadata
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.proc is not None and self.proc.poll() is not None:
                    break
                time.sleep(0.2)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while time.time() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"kafka broker exited ({self.proc.returncode}); see {self.root / 'broker.log'}")
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except Exception:  # KafkaException while the broker is still starting
                time.sleep(0.3)
        raise RuntimeError(f"kafka broker not ready after {START_TIMEOUT_S}s; see {self.root / 'broker.log'}")

    def stop(self, kill: bool = False) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after 20 s; ``kill``: SIGKILL at once)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def cluster_id() -> str:
    """A random KRaft cluster id as Kafka's own ``Uuid.randomUuid`` makes one: the 16 bytes of a
    version-4 UUID in URL-safe base64 without padding, drawn again while it begins with ``-``.
    (URL-safe base64 has ``-`` among its 64 letters, so one id in 64 would begin with it, and
    ``kafka-storage format -t -xyz`` reads such an id as an option. Kafka's reserved ids, 0 and 1,
    are not version-4 UUIDs, so they cannot be drawn.)"""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("start", "stop", "fetch"):
        print("usage: kafka_broker.py start|stop|fetch DIR", file=sys.stderr)
        return 2
    root = Path(argv[2])
    if argv[1] == "fetch":
        print(kafka_lib())
        return 0
    if argv[1] == "start":
        broker = KafkaBroker(root).start()
        broker.proc = None  # leave it running
        print(broker.bootstrap)
        return 0
    pid_file = root / "broker.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        pid_file.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
