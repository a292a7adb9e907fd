"""How a shard's task gets the shard's state at the start of a micro-batch, cheapest first.

1. **Continued**: its Python worker holds the shard's store exactly as of the batch's start (the
   same offset, and the same manifest on ``stateLocation``: one manifest read).
2. **Caught up**: its worker holds the shard's store as of an earlier batch (Spark ran the batches
   in between in other workers: with a Python sink, a task's reading and writing workers swap
   every batch). The manifest says which key buckets were written since; only those are dropped
   and read back when a step needs them (``StateStore.catch_up``).
3. **Reopened**: opened from the manifest; every bucket a step needs is read back. On an object
   store the segments come from the executor's local copies where it wrote them
   (``local_copies``), else from ``stateLocation``.
4. **Redistributed**: the batch changes the shard count (``rescale``).

``affinity`` makes a task claim the shard it can get most cheaply; the shard's report says which
way it went (``reload_counts``: ``state_catch_ups``, ``local_reloads``, ``state_reloads``).
"""

from __future__ import annotations

import pyarrow as pa

from spark_windowing.datasource import storage
from spark_windowing.datasource.options.config import SourceConfig
from spark_windowing.datasource.source import rescale
from spark_windowing.datasource.source.affinity import take_open
from spark_windowing.datasource.storage import layout, local_copies
from spark_windowing.state.segments import manifest_digest, manifest_uri
from spark_windowing.state.store import StateStore

__all__ = ["open_store", "reload_counts", "CONTINUED", "CAUGHT_UP", "REOPENED"]


#: How ``open_store`` got a shard's state: this worker's store was exactly it; this worker's older
#: store was brought up to it (``StateStore.catch_up``: buckets changed since are read back); or it
#: was opened from the snapshot (every bucket a step needs is read back).
CONTINUED, CAUGHT_UP, REOPENED = "continued", "caught_up", "reopened"


def open_store(cfg: SourceConfig, shard: int, seq: int, schema: pa.Schema, *, old_shards: int | None = None,
               shards: int | None = None, router: rescale.Router | None = None) -> tuple[StateStore, str]:
    """Shard ``shard``'s state as of offset ``seq`` (input ``schema``), and how it was had (the
    module docstring's order; empty at 0). When the batch changes the shard count (``old_shards``
    at ``seq``, ``shards`` after it), redistributed from every old shard's snapshot. A missing or
    corrupt snapshot raises SnapshotError. ``router``: how the route sends keys to shards
    (``rescale.routed_rows``)."""
    root = layout.store_root(cfg.state_location, shard)
    kw = dict(buckets=cfg.state_buckets, max_rows=cfg.state_memory_rows)
    io = local_copies.io_for(cfg.state_location, shard, root)
    if old_shards is not None and shards is not None and old_shards != shards and seq > 0:
        old_roots = [layout.store_root(cfg.state_location, i) for i in range(old_shards)]
        return rescale.redistribute(cfg.spec, io, old_roots, seq, shard, shards, root, schema, router=router,
                                    **kw), REOPENED
    cached = take_open(cfg.state_location, shard)
    if cached is not None and 0 < cached.op.seq <= seq and cached.spec == cfg.spec \
            and cached.n_buckets == cfg.state_buckets:
        uri = manifest_uri(root, seq)
        blob = storage.read_bytes(uri, missing_ok=True)
        if blob is not None:
            cached.max_rows = cfg.state_memory_rows
            if isinstance(cached.io, local_copies.LocalCopies):
                cached.io.reset_counts()
            if cached.op.seq == seq and manifest_digest(blob) == cached.manifest_digest:
                return cached, CONTINUED
            cached.catch_up(blob, uri)
            return cached, CAUGHT_UP
    return StateStore.open(cfg.spec, io, root, seq, schema, **kw), REOPENED if seq > 0 else CONTINUED


def reload_counts(store: StateStore, how: str) -> dict[str, int]:
    """The report's ``state_reloads`` (1: the shard read buckets back from ``stateLocation``
    because its worker did not hold the current state), ``local_reloads`` (1: it read them back,
    but only from this executor's copies, ``local_copies``), and ``state_catch_ups`` (1: its
    worker held an older state and read only the buckets changed since)."""
    counts = {"state_reloads": 0}
    if how == CONTINUED:
        return counts
    io = store.io
    if how == CAUGHT_UP:
        counts["state_catch_ups"] = 1
    elif isinstance(io, local_copies.LocalCopies) and io.remote_reads == 0:
        counts["local_reloads"] = 1
    else:
        counts["state_reloads"] = 1
    return counts
