"""``execution=auto`` (the default): the route of each micro-batch, chosen by the stream reader.

Both routes step the same shards from the same snapshots and write the same snapshots, reports
and late rows (``pipeline``), so a batch gives the same panes on either and the route may change
from one micro-batch to the next (``tests/spark/test_driver_execution.py`` checks it):

* ``driver`` (``source.driver``): the reader's long-lived planning process steps every shard and
  Spark takes the panes from it; no Python worker, no task per shard. It wins while one core can
  step the batch: a micro-batch's floor is lower and no shard's state moves between workers.
* ``executors`` (``source.reader``): one Spark task per shard, in parallel on the executors.

The rule (:func:`next_route`, :func:`crossover`):

1. Spark not in local mode: ``executors``, every batch. A cluster's executors add cores the
   driver's one planning process does not have, and the panes do not cross the driver. The master
   is read off the command line of the driver JVM that started the planning process
   (:func:`driver_jvm_args`); a driver JVM not started by ``SparkSubmit`` (a cluster manager's) is
   not local mode.
2. Local mode (``local…``, or ``SparkSubmit`` without a master, which pyspark's own default,
   ``local[*]``, gives): ``driver`` for the first batch of a reader (a query's start) and while
   the previous batch read at most ``above`` events (``autoExecutorsAbove``); ``executors`` once a
   batch read more, and back to ``driver`` once one read fewer than half of it (hysteresis: a
   rate near the crossover does not flip the route every batch, and the input-less batch that
   ends a large input, firing every window still open, stays where its panes are cheap). A batch
   whose events the upstream knows before reading them (``Upstream.planned_events``: the
   generators, Parquet files by their footers, Kafka by its offsets) goes to the ``executors``
   when they are more than ``above``, without a driver batch to learn the size first. ``above``
   is :data:`KRYO_CROSSOVER` with Kryo (``spark.serializer``), else :data:`JAVA_CROSSOVER`: Spark
   hands the driver route's panes to its task through the block manager
   (``PythonMicroBatchStreamBase`` puts them as a ``MEMORY_AND_DISK_SER`` block, serialized row by
   row with ``spark.serializer``; no other way exists for a Python source's planner to hand rows
   over), which Java serialization makes dearer on large batches. The reader says once, when a
   batch goes to the executors under Java serialization, which conf would keep such batches on
   the driver.

Measured (docs/performance.md, "execution=auto"): 10 micro-batches of tumbling windows, median
seconds, executors / driver: 4 k events a batch 2.81 / 2.47 (Java), 2.43 / 2.02 (Kryo); 40 k
2.90 / 2.60, 3.05 / 2.88; 200 k 3.43 / 4.66, 3.79 / 3.43.

The route of each batch is in its offset (``"route"``) and on the progress line.
"""

from __future__ import annotations

import os

#: Local mode: events per micro-batch above which the next batch steps on the executors, with
#: Kryo and with Java serialization (between the measured points: module docstring).
KRYO_CROSSOVER = 200_000
JAVA_CROSSOVER = 100_000

def crossover(argv: list[str] | None, option: int | None) -> int | None:
    """The events per batch above which local mode goes to the executors: the option when set,
    else :data:`KRYO_CROSSOVER` with Kryo, else :data:`JAVA_CROSSOVER`; None (executors only)
    when not local."""
    if not is_local(argv):
        return None
    if option is not None:
        return option
    return KRYO_CROSSOVER if uses_kryo(argv) else JAVA_CROSSOVER


def next_route(previous: str | None, last_events: int | None, *, above: int | None,
               planned: int | None = None) -> str:
    """The route of the next micro-batch (the module's rule), from the previous batch's route
    and events (``None``: this reader ran no batch yet), and its own events when the upstream
    knows them before reading (``planned``: generated events, Parquet footers, Kafka offsets):
    more than ``above`` sends it to the executors, even a query's first batch.

    >>> next_route(None, None, above=200_000), next_route(None, None, above=None)
    ('driver', 'executors')
    >>> next_route(None, None, above=100_000, planned=2_000_000)
    'executors'

    A batch of few events after large ones stays on the executors: an input-less batch at the
    end of a large input fires every window still open, and its panes are what the driver route
    pays for (Spark serializes them row by row).

    >>> next_route("executors", 900_000, above=100_000, planned=0)
    'executors'
    >>> next_route("driver", 300_000, above=200_000)
    'executors'
    >>> next_route("executors", 150_000, above=200_000)
    'executors'
    >>> next_route("executors", 90_000, above=200_000)
    'driver'
    """
    if above is None or (planned is not None and planned > above):
        return "executors"
    if previous is None or last_events is None:
        return "driver"
    if previous == "driver":
        return "executors" if last_events > above else "driver"
    return "driver" if last_events < above / 2 else "executors"


def conf_of(argv: list[str], key: str) -> str | None:
    """Spark conf ``key`` as a JVM command line gives it (``--conf key=X``, ``-Dkey=X``; for
    ``spark.master`` also ``--master X``), else None.

    >>> conf_of(["java", "org.apache.spark.deploy.SparkSubmit", "--master", "spark://h:7077", "x.py"], "spark.master")
    'spark://h:7077'
    >>> conf_of(["java", "SparkSubmit", "--conf", "spark.master=local[2]", "pyspark-shell"], "spark.master")
    'local[2]'
    >>> conf_of(["java", "SparkSubmit", "pyspark-shell"], "spark.serializer") is None
    True
    """
    for i, arg in enumerate(argv):
        if key == "spark.master" and arg == "--master" and i + 1 < len(argv):
            return argv[i + 1]
        for prefix in (f"{key}=", f"-D{key}="):
            if arg.startswith(prefix):
                return arg[len(prefix):]
    return None


def driver_jvm_args(pid: int | None = None) -> list[str] | None:
    """The command line of the JVM that started this process (the nearest ancestor whose command
    line names Spark's ``SparkSubmit``: pyspark starts its JVM so, and so does ``spark-submit``),
    or None when there is no such ancestor (no ``/proc``, a driver JVM a cluster manager started)."""
    pid = os.getppid() if pid is None else pid
    for _ in range(4):   # planner <- JVM; worker <- daemon <- JVM
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if any(a.endswith("SparkSubmit") for a in argv):
            return argv
        pid = parent
    return None


def is_local(argv: list[str] | None) -> bool:
    """Whether the driver JVM of ``argv`` (:func:`driver_jvm_args`) runs the executors itself:
    ``spark.master`` ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, or none given (pyspark's
    own default, ``local[*]``; a master in a properties file is not seen). None: not local."""
    if argv is None:
        return False
    master = conf_of(argv, "spark.master")
    return master is None or master.startswith("local")


def uses_kryo(argv: list[str] | None) -> bool:
    """Whether the driver JVM of ``argv`` serializes with Kryo (``spark.serializer``)."""
    return argv is not None and "Kryo" in (conf_of(argv, "spark.serializer") or "")
