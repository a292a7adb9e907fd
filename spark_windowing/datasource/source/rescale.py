"""Rescaling: the shard count of a state location may change between runs of a query.

Every offset records the shard count its micro-batch ran with (``"shards"``; an offset without
one, written before offsets carried it, ran with the count in the state location's
``spec.json``). When a restart changes ``shards``, the first micro-batch after the change starts
at an offset of the old count and ends at one of the new count; each of its new shards builds its
state from the old shards' snapshots at the start offset:

* it reads every old shard's snapshot (manifest and all key buckets) at the start offset,
* keeps the windows whose key the new count routes to it (``key hash % shards``, the rule
  ``spark_windowing.datasource.source.sharding`` routes events by; without key columns everything is
  shard 0's),
* gives them new row ids in the order (old row id, old shard) and takes the largest watermark and
  processing time of the old shards (they are equal: every shard runs every batch),
* writes them, in their unchanged key buckets, to a new segment of its own store and then runs
  the batch's step, whose snapshot (the manifest at the end offset) makes the new layout current.

The result depends only on the old snapshots and the new count, so a replay of that batch (a
killed task or driver) rebuilds the same state. The old snapshots are not touched: the new
layout's manifests are at the end offset, the old ones at the start offset, and garbage
collection removes the old layout only after the batch has committed (shard directories beyond
the current count included). A key bucket's number depends only on the key and ``stateBuckets``,
not on the shard, which is why ``stateBuckets`` (the bucket layout) cannot change while ``shards``
can.

Windows whose state is kept outside the window rows cannot be redistributed yet: count windows
(``count(n[, step])``: per-key element counts) and Storm's count/time mixes
(``count(n, <duration>)``, ``sliding(<duration>, n elements)``, ``record_sliding``); nor can the
shards of an upstream that routes events to shards itself (Kafka with ``keyColumns=key``). For
those a changed ``shards`` is refused, naming the option.

>>> shards_of({"seq": 3, "shards": 5}, recorded=2), shards_of({"seq": 3}, recorded=2)
(5, 2)
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import get_column
from spark_windowing._hash import hash_columns
from spark_windowing.errors import OptionError, SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.state.state_codec import restore_scalars
from spark_windowing.state.store import StateStore
from spark_windowing.windows.kinds import CountWindow


#: How a route sends keys to shards: the key columns and the shard count -> each row's shard.
#: ``window(df)``'s is Spark's ``pmod(xxhash64(keys), shards)`` (``datasource.spark_hash``).
Router = Callable[[list, int], np.ndarray]


def shards_of(offset: dict, recorded: int) -> int:
    """The shard count micro-batches ending at ``offset`` ran with (``recorded``: the state
    location's count, for offsets written before offsets carried theirs)."""
    return int(offset.get("shards") or recorded)


def not_rescalable(spec: OperatorSpec, disjoint_upstream: bool) -> str | None:
    """Why the shards of a query with ``spec`` cannot be redistributed, or None when they can."""
    if spec.window.mixed or isinstance(spec.window, CountWindow):
        return (f"window {spec.window.spec()} keeps per-key state outside the window rows, which a rescale "
                "does not redistribute yet")
    if disjoint_upstream:
        return "the upstream routes events to shards itself (Kafka partitions keyed by the window key)"
    return None


def check_rescale(spec: OperatorSpec, disjoint_upstream: bool, state: str, old: int, new: int) -> None:
    """Raise ``OptionError`` naming ``shards`` when state written with ``old`` shards cannot be
    redistributed to ``new`` ones."""
    if old == new:
        return
    why = not_rescalable(spec, disjoint_upstream)
    if why is not None:
        raise OptionError("shards", str(new), f"{old} (stateLocation {state} was written with shards={old}; "
                          "keep it, or start with a new stateLocation and checkpoint)",
                          why=f"shards can change on restart, but not here: {why}")


def routed_rows(op: Any, spec: OperatorSpec, shard: int, shards: int, router: Router | None = None) -> np.ndarray:
    """Positions of the windows of ``op`` (all in memory) whose key ``shards`` shards route to
    ``shard``: by ``router`` (the key columns, the shard count -> each row's shard), by default the
    reader's rule (``sharding``: the stable key hash modulo the count)."""
    n = op.num_windows
    if not n:
        return np.zeros(0, dtype=np.int64)
    if not spec.key_columns or shards == 1:
        return np.arange(n, dtype=np.int64) if shard == 0 else np.zeros(0, dtype=np.int64)
    keys = op.table.key_rows(np.arange(n, dtype=np.int64))
    columns = [get_column(keys, k) for k in spec.key_columns]
    if router is not None:
        return np.flatnonzero(router(columns, shards) == shard)
    h = hash_columns(columns, n)
    return np.flatnonzero(h % np.uint64(shards) == shard)


def redistribute(spec: OperatorSpec, io: Any, old_roots: list[str], seq: int, shard: int, shards: int,
                 new_root: str, input_schema: pa.Schema | None, router: Router | None = None,
                 **kw: Any) -> StateStore:
    """Shard ``shard`` of ``shards`` as of offset ``seq``, built from the snapshots at ``seq`` of
    the old shards (``old_roots``, in shard order) and written (rows only, no manifest) as a
    segment of batch ``seq + 1`` under ``new_root``. Raises ``SnapshotError`` when an old
    snapshot is missing or corrupt."""
    keys: list[pa.Table] = []
    cols: list[dict[str, np.ndarray]] = []
    rids, origin, clocks, schema = [], [], [], None
    for i, root in enumerate(old_roots):
        old = StateStore.open(spec, io, root, seq, input_schema, **kw)
        op = old.op
        if op.key_counts or (op.mixed is not None and op.num_windows):
            raise SnapshotError(f"{root}: state at batch {seq} holds per-key state outside the window rows; "
                                "it cannot be redistributed to another shard count")
        clocks.append((op.wm, op.proc, op.seq, op.next_rid))
        if not op.bound:
            continue
        schema = schema or op.input_schema
        old.load_all()
        rows = routed_rows(op, spec, shard, shards, router)
        if len(rows):
            keys.append(op.table.key_rows(rows))
            cols.append({c: v[rows] for c, v in op.table.cols.items()})
            rids.append(op.table.rid[rows])
            origin.append(np.full(len(rows), i, dtype=np.int64))
    seqs = {c[2] for c in clocks}
    if len(seqs) > 1:
        raise SnapshotError(f"the shards' snapshots at batch {seq} disagree on their batch ({sorted(seqs)}): "
                            f"{old_roots}")
    new = StateStore(spec, io, new_root, schema or input_schema, **kw)
    n = sum(len(r) for r in rids)
    restore_scalars(new.op, {"wm": max(c[0] for c in clocks), "proc": max(c[1] for c in clocks),
                             "seq": seqs.pop(), "next_rid": max([n] + [c[3] for c in clocks])})
    if n:
        order = np.lexsort((np.concatenate(origin), np.concatenate(rids)))  # by old row id, then old shard
        merged = {c: np.concatenate([part[c] for part in cols])[order] for c in cols[0]}
        merged["rid"] = np.arange(n, dtype=np.int64)
        new.op.import_rows(pa.concat_tables(keys).take(pa.array(order)), merged)
        new.write_imported(seq + 1)
    return new
