"""``execution=driver``: the windowed operator in the driver's planning process, no Python worker
in the source's tasks.

With ``execution=executors`` (the default, ``reader.WindowedStreamReader``) a micro-batch runs one
Spark task per key shard, each starting a read session in a pooled Python worker on an executor.
With ``execution=driver`` the reader's own long-lived Python process on the driver (the one Spark
keeps for ``latestOffset``, ``partitions`` and ``commit``) steps every shard itself, and Spark takes
the panes as Arrow batches into one in-memory partition: the source's task runs no Python at all.
This is Spark's route for a ``SimpleDataSourceStreamReader`` (its prefetch-and-cache wrapper, which
this class extends: Spark's planner runner hands a wrapper's cached rows to the JVM and only to it).

Per micro-batch::

    latestOffset(start)  the end offset (as WindowedStreamReader), returned at once; every shard's
                         step over its events runs in a thread meanwhile (while Spark writes the
                         offset to its log), panes kept in memory, nothing written yet
    partitions(s, e)     Spark has logged offset e: the step awaited, then each shard's late rows,
                         snapshot @e and report written (as a task's read() writes them), before
                         Spark runs the batch's job (so before its commit log can name the batch);
                         one partition
    getCache(s, e)       the panes, handed to the JVM
    read(partition)      only when the panes are not cached (a restart replays a logged batch):
                         a task steps every shard from the snapshot @s, as executors would
    commit(e)            the cached panes dropped, then WindowedStreamReader.commit

Nothing is written before Spark logs the offset, so a batch computed for an offset that is never
logged (the query stopped in between) leaves no trace, and its recomputation for another offset
starts from the same snapshot. A replay gives the same panes and writes the same snapshot: the
snapshot at ``s``, the events between the logged offsets and the batch time in ``e`` decide them.
"""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource_internal import SimpleInputPartition, _SimpleStreamReaderWrapper
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

from spark_windowing.datasource.source import auto
from spark_windowing.datasource.source.reader import ShardPartition, UpstreamShard, WindowedStreamReader


@dataclass
class _Stepped:
    """A micro-batch stepped from ``latestOffset``: its offsets (as JSON, Spark's own way to compare
    them) and its step, running or done: every shard's run (state in memory, not yet written) and
    the panes."""
    start: str
    end: str
    step: Future
    written: bool = False

    def result(self) -> tuple[list[UpstreamShard], list[pa.RecordBatch]]:
        """The step's runs and panes, once it has finished (its error raised here)."""
        return self.step.result()


#: The Arrow field metadata key Spark reads a column's Spark metadata from (``ArrowUtils``).
SPARK_METADATA_KEY = b"SPARK::metadata::json"


def with_spark_metadata(batch: pa.RecordBatch, schema: StructType) -> pa.RecordBatch:
    """``batch`` with each column's Spark metadata (from ``schema``) in its Arrow field's
    metadata, where Spark's Arrow reader takes it from; the columns are not copied."""
    meta = {f.name: f.metadata for f in schema.fields if f.metadata}
    if not meta:
        return batch
    fields = [f.with_metadata({SPARK_METADATA_KEY: json.dumps(meta[f.name]).encode()}) if f.name in meta else f
              for f in batch.schema]
    return pa.RecordBatch.from_arrays(batch.columns, schema=pa.schema(fields))


def _key(offset: dict) -> str:
    """An offset as JSON (Spark's own way to compare them), without the route ``auto`` adds."""
    return json.dumps({k: v for k, v in offset.items() if k != "route"})


def _stepper() -> ThreadPoolExecutor:
    """The thread the steps run in: one, so a step starts after the one before it has finished
    with the shards' stores."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="windowed-driver-step")


class DriverStreamReader(_SimpleStreamReaderWrapper):
    """The stream reader of ``execution=driver`` (the module docstring). Offsets, limits,
    availableNow and commits are ``WindowedStreamReader``'s; only where the step runs differs."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.inner = WindowedStreamReader(options, schema)
        # Spark's runner asks ``simple_reader`` whether availableNow is supported, and prepares it
        super().__init__(self.inner)
        self._batch: _Stepped | None = None
        self._stepper = _stepper()

    def __getstate__(self) -> dict:
        """Spark pickles the reader for the tasks' ``read`` (a replay): without the step thread
        and the batch in memory, which live in this process only."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_stepper", "_batch")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _batch=None, _stepper=_stepper())

    def initialOffset(self) -> dict:
        return self.inner.initialOffset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return self.inner.getDefaultReadLimit()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The next offset; when it is new, the batch is stepped here, on the driver."""
        self._settle(start)
        end = self.inner.latestOffset(start, limit)
        if end == start:
            return start
        self._submit(start, end)
        return end

    def _settle(self, start: dict) -> None:
        """The batch stepped last, when Spark went on from it without planning it: it was logged."""
        if self._batch is not None and self._batch.end == _key(start) and not self._batch.written:
            self._write(self._batch)

    def _submit(self, start: dict | None, end: dict | None) -> None:
        """The batch ``start`` → ``end`` stepped in the step thread (None: none), once the one
        before has finished. A batch stepped for an offset Spark did not log is dropped with its
        in-memory state (its stores were taken from the process's held ones): the next step
        reopens the snapshot."""
        if self._batch is not None:
            wait([self._batch.step])
        self._batch = None if start is None or end is None else \
            _Stepped(_key(start), _key(end), self._stepper.submit(self._step, start, end))

    def _step(self, start: dict, end: dict) -> tuple[list[UpstreamShard], list[pa.RecordBatch]]:
        runs, panes = [], []
        with self.inner.one_read_per_batch():
            for partition in self.inner.shard_partitions(start, end, spare_slots=False):
                run = self.inner.start_shard(partition, claim=False)
                assert run is not None
                panes.extend(self.inner.step_shard(run))
                runs.append(run)
        return runs, panes

    def _write(self, batch: _Stepped) -> None:
        for run in batch.result()[0]:
            self.inner.finish_shard(run)
        batch.written = True

    def partitions(self, start: dict, end: dict) -> list[SimpleInputPartition]:
        """Spark has logged ``end``: the stepped batch's writes happen now."""
        batch = self._batch
        if batch is not None and (batch.start, batch.end) == (_key(start), _key(end)) \
                and not batch.written:
            self._write(batch)
        return [SimpleInputPartition(start, end)]

    def getCache(self, start: dict, end: dict) -> Iterator[pa.RecordBatch] | None:
        """The batch's panes when this process stepped and wrote it; None makes Spark's task call
        ``read`` (a replay after a restart). Each column carries its Spark metadata (the
        producing spec on ``window_start``) as Spark reads it back from Arrow
        (``ArrowUtils``' ``SPARK::metadata::json``): Spark compares the handed-over schema with the
        source's, metadata included."""
        batch = self._batch
        if batch is not None and batch.written and (batch.start, batch.end) == (_key(start), _key(end)):
            return (with_spark_metadata(b, self.inner.schema) for b in batch.result()[1])
        return None

    def read(self, partition: SimpleInputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        """A task's replay of a logged batch: every shard from its snapshot at the start offset."""
        with self.inner.one_read_per_batch():
            for shard_partition in self.inner.shard_partitions(partition.start, partition.end, spare_slots=False):
                run = self.inner.start_shard(shard_partition, claim=False)
                assert run is not None
                yield from self.inner.step_shard(run)
                self.inner.finish_shard(run)

    def commit(self, end: dict) -> None:
        if self._batch is not None and self._batch.end == _key(end):
            self._batch = None
        self.inner.commit(end)

    def stop(self) -> None:
        if self._batch is not None:
            wait([self._batch.step])
        self._stepper.shutdown()
        self.inner.stop()


_WARNED: list[bool] = []


def _warn_java_serialization(events: int | None) -> None:
    """Once per process: ``auto`` moved a local-mode query to the executors under Java serialization."""
    if _WARNED:
        return
    _WARNED.append(True)
    import logging
    logging.getLogger("spark_windowing").warning(
        "execution=auto: a micro-batch of %s events goes to the executors: under Java serialization the "
        "driver route steps at most %d events a batch (Spark serializes its panes row by row). With "
        "spark.serializer=org.apache.spark.serializer.KryoSerializer (set when the session starts) batches of "
        "up to %d events stay on the driver (docs/performance.md, execution=auto).",
        f"{events:,}" if events is not None else "more", auto.JAVA_CROSSOVER, auto.KRYO_CROSSOVER)


def _binds_here(reader: WindowedStreamReader) -> bool:
    """Whether this process can bind the operator: a custom class shipped to the executors only
    (``addPyFile`` after the source was registered, ``--py-files`` the driver's planning process
    does not see) binds there and not here; ``auto`` then keeps every batch on the executors."""
    from spark_windowing.datasource.source.reader import input_schema
    from spark_windowing.errors import OptionError
    from spark_windowing.operator.windowed import WindowedOperator
    try:
        WindowedOperator(reader.cfg.spec, input_schema(reader.cfg))
    except OptionError as e:
        import logging
        logging.getLogger("spark_windowing").info(
            "execution=auto: every micro-batch on the executors: the driver's planning process cannot bind "
            "the operator (%s)", e)
        return False
    return True


class AutoStreamReader(DriverStreamReader):
    """The stream reader of ``execution=auto`` (``source.auto``): each micro-batch on the route
    ``auto.next_route`` picks, written into its offset (``"route"``). A driver batch is stepped
    here as ``DriverStreamReader``'s; an executors batch is planned as ``WindowedStreamReader``'s
    (one partition per shard, ``getCache`` None so Spark's tasks call ``read``). A logged batch
    replayed after a restart takes the route its offset names; either gives the same panes."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        argv = auto.driver_jvm_args()
        self._above = auto.crossover(argv, self.inner.cfg.auto_executors_above)
        if self._above is not None and not _binds_here(self.inner):
            self._above = None
        self._java = auto.is_local(argv) and not auto.uses_kryo(argv)
        self._route: str | None = None   # the route of the last batch this reader planned

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The next offset, its route decided from the batch ``start`` ends (its events, read in
        the shards' reports by ``inner.latestOffset``); a driver batch is stepped here."""
        self._settle(start)
        end = self.inner.latestOffset(start, limit)
        if end == start:
            return start
        planned = self._planned_events(start, end)
        route = auto.next_route(self._route, self.inner.last_events, above=self._above, planned=planned)
        if route == "executors" and self._java:
            _warn_java_serialization(planned if planned is not None else self.inner.last_events)
        self._route = route
        if self._route == "driver":
            self._submit(start, end)
        else:
            self._submit(None, None)
        return {**end, "route": self._route}

    def _planned_events(self, start: dict, end: dict) -> int | None:
        """The batch's events when its upstream knows them before reading (local mode only: the
        route does not depend on them elsewhere; a join's: unknown)."""
        if self._above is None or self.inner.up2 is not None:
            return None
        return self.inner.up.planned_events(start["up"], end["up"])

    def partitions(self, start: dict, end: dict) -> list:  # type: ignore[override]
        if end.get("route") == "executors":
            return self.inner.partitions(start, end)
        return super().partitions(start, end)

    def read(self, partition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if isinstance(partition, ShardPartition):
            return self.inner.read(partition)
        return super().read(partition)
