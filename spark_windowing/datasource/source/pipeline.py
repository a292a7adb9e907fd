"""One key shard's micro-batch: the steps every route runs, written once.

Three routes run a shard's micro-batch. They differ in where it runs, how its events arrive and
where its panes go; the steps and their order are these functions, and only these functions call
the state store's step and snapshot, the late table's append and the report's write
(``tests/project/test_architecture.py`` checks it):

==========================  ======================  ===========================  ==================
route                       where                   events                       panes
==========================  ======================  ===========================  ==================
``format("windowed")``      a task's ``read``       the upstream's read, the     Spark's task
(``execution=executors``)   (``reader``)            shard's keys kept
``execution=driver``        the driver's planning   the same                     an in-memory block
                            process (``driver``)
``window(df)``              a ``mapInArrow`` task   Spark's Arrow batches after  the task's output
                            (``window_df``)         a shuffle by key shard
==========================  ======================  ===========================  ==================

The steps::

    open_shard     the shard's state at the batch's start (``shard_state``: continued, caught up,
                   reopened, redistributed); a missing or corrupt snapshot raises SnapshotError
    step_shard     StateStore.step_parts over the events at the batch's watermark and batch time:
                   yields the panes, keeps the late rows and counts in the ``ShardRun``; nothing
                   written (a route may step twice: window(df)'s end of input)
    finish_shard   the late rows (one exactly-once Delta append per shard and batch), the snapshot
                   at the batch's end (atomic), the store kept open for this worker's next batch,
                   the report the next batch's watermark and timers are planned from
    collect_shard_garbage
                   snapshots older than a batch (every ``GC_EVERY`` batches, after Spark's commit)

State versions: a route names the snapshot a batch starts from and the one it writes
(``format("windowed")``: the offsets' ``seq``; ``window(df)``: Spark's batch id and id + 1). The
late rows' Delta application transaction is ``<late_writer>:shard-<n>`` at the written version,
so a replayed batch appends nothing twice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from spark_windowing._time import MIN_TIME
from spark_windowing.datasource import storage, trace
from spark_windowing.datasource._memory import release_arrow_memory
from spark_windowing.datasource.options.config import SourceConfig
from spark_windowing.datasource.source import shard_reports, shard_state
from spark_windowing.datasource.source.affinity import keep_open
from spark_windowing.datasource.storage import layout, local_copies
from spark_windowing.datasource.tables.late import append_late_rows
from spark_windowing.state.segments import collect_garbage

__all__ = ["ShardRun", "open_shard", "step_shard", "finish_shard", "collect_shard_garbage", "GC_EVERY", "ms"]

#: Older snapshots (and reports, claims) are dropped every this many batches: one listing per shard
#: per ``GC_EVERY`` batches instead of every batch.
GC_EVERY = 10


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


@dataclass
class ShardRun:
    """One shard's micro-batch between ``open_shard`` and ``finish_shard``: its state (in memory,
    stepped but not yet written) and what the steps left for the writes."""
    shard: int
    version: int                    # the snapshot the batch writes (its start is the one opened)
    store: Any
    how: str                        # how its state was had (shard_state: continued, caught up, reopened)
    t0: float = field(default_factory=time.perf_counter)
    t0_wall: float = field(default_factory=time.time)
    t_read: float = 0.0             # the route's events are in hand
    t_step: float = 0.0
    events_in: int = 0
    metrics: dict = field(default_factory=dict)
    late: list = field(default_factory=list)
    report: dict = field(default_factory=dict)   # the route's own report fields (its input's maxima)


def open_shard(cfg: SourceConfig, shard: int, start: int, version: int, schema: pa.Schema, *,
               old_shards: int | None = None, shards: int | None = None, router: Any = None) -> ShardRun:
    """Shard ``shard``'s state as of snapshot ``start`` (input ``schema``), for a batch that writes
    snapshot ``version``; redistributed when the batch changes the shard count (``old_shards`` →
    ``shards``; keys routed by ``router``, by default the reader's rule)."""
    t0, t0_wall = time.perf_counter(), time.time()
    store, how = shard_state.open_store(cfg, shard, start, schema, old_shards=old_shards, shards=shards,
                                        router=router)
    return ShardRun(shard=shard, version=version, store=store, how=how, t0=t0, t0_wall=t0_wall)


def step_shard(run: ShardRun, events: pa.Table | None, *, watermark: int | None, processing_time: int,
               batch_seq: int, key_hash: np.ndarray | None = None, event_times: Any = None
               ) -> Iterator[pa.RecordBatch]:
    """The shard's step over ``events`` (None: none) at ``watermark`` and ``processing_time``:
    yields the panes (in parts when the buckets a batch needs exceed ``stateMemoryRows``); keeps
    the late rows and counts in ``run``. Nothing is written."""
    if not run.t_read:
        run.t_read = time.perf_counter()
    for part in run.store.step_parts(events if events is not None and events.num_rows else None,
                                     watermark=watermark, processing_time=processing_time, batch_seq=batch_seq,
                                     key_hash=key_hash, event_times=event_times):
        for k, v in part.metrics.items():
            run.metrics[k] = run.metrics.get(k, 0) + v if k != "state_rows" else v
        if part.late.num_rows:
            run.late.append(part.late)
        if part.panes.num_rows:
            yield from part.panes.to_batches()
    run.events_in += 0 if events is None else events.num_rows
    run.t_step = time.perf_counter()


def finish_shard(run: ShardRun, cfg: SourceConfig, *, late_writer: str) -> dict:
    """What the shard's steps decided, written: its late rows to ``cfg.late_data_path`` (Delta
    application transaction ``<late_writer>:shard-<n>``, version ``run.version``), its snapshot
    ``run.version`` (atomic), the store kept open for this worker, its report of the batch for the
    driver (or the next batch's tasks). Returns the report."""
    store, version = run.store, run.version
    t_write = time.perf_counter()
    if cfg.late_data_path and run.late:
        append_late_rows(cfg.late_data_path, f"{late_writer}:shard-{run.shard}", version, pa.concat_tables(run.late))
    written = store.persist(version)
    local_copies.after_snapshot(store.io, version, store.files.snapshot_files())
    store.evict()
    keep_open(cfg.state_location, run.shard, store)
    report = _report(run, written)
    report.update(read_ms=ms(run.t_read - run.t0), step_ms=ms(run.t_step - run.t_read),
                  snapshot_ms=ms(time.perf_counter() - t_write), **shard_state.reload_counts(store, run.how))
    shard_reports.write_report(cfg.state_location, version, run.shard, report)
    release_arrow_memory()
    trace.record("source.read", run.t0_wall, time.time(), shard=run.shard, batch=version)
    return report


def _report(run: ShardRun, written: int) -> dict:
    """The shard's report of a micro-batch (``shard_reports``): counts for the progress line, the
    next timers, and the route's own fields (``run.report``: its input's maxima, which the next
    batch's watermark is planned from)."""
    store, m = run.store, run.metrics
    ev_timer, pt_timer = store.next_timers()
    wm = store.op.wm
    return {
        "events_in": int(run.events_in), "panes_trigger": m.get("panes_trigger", 0),
        "panes_retraction": m.get("panes_retraction", 0), "late_dropped": m.get("late_dropped", 0),
        "malformed": m.get("malformed", 0), "future": m.get("future", 0),
        "watermark_us": None if wm <= MIN_TIME else int(wm),
        "state_rows": store.num_windows, "state_bytes": written,
        "duration_ms": ms(time.perf_counter() - run.t0),
        "next_event_timer": int(ev_timer), "next_proc_timer": int(pt_timer),
        **run.report,
    }


def collect_shard_garbage(state_location: str, shard: int, seq: int) -> None:
    """Drop shard ``shard``'s snapshots older than ``seq`` (never the one at ``seq``)."""
    collect_garbage(storage, layout.store_root(state_location, shard), seq)
