"""Shard affinity: a task runs the shard whose state its Python worker already holds.

Each Python worker keeps the state stores it has open (``keep_open``, ``take_open``): the next
micro-batch of a shard that lands on the same worker continues from memory instead of reading
the shard's state back (Spark's state store providers do the same on executors). A store is
reused as it is when its offset and manifest match the batch's start, and brought up to it when it
is older (``spark_windowing.datasource.shard_state.open_store``, ``StateStore.catch_up``: only the key
buckets written since are read back).

Spark hands the tasks of a micro-batch to whichever Python workers are idle, in the order the
workers came free. So the worker that ran shard 0 in one batch runs shard 1 in the next about
as often as not, and must then read that shard's state back from ``stateLocation`` (a 20 M-event
tumbling benchmark reloaded in 14 of 20 shard-batches). Spark's own state stores avoid this with
preferred locations; a Python source cannot set them, so the task chooses instead: a partition is
a slot, and each slot *claims* one shard for its micro-batch, preferring one the worker holds.

A claim is ``<state>/claims/<seq>/shard-<s>``, a symbolic link to the partition's number, created
exclusively (the first writer wins). The ``shards`` partitions of a batch claim the ``shards``
shards one each:

* a partition that has claimed a shard in this batch before (a retried task, a replayed batch)
  runs that shard again;
* otherwise it tries the shards its worker holds as of the batch's start, then those it holds as
  of an earlier batch, then those whose snapshot at the batch's start its executor wrote (on an
  object store: ``local_copies``), then the shard of its own number, then the others in order, and
  runs the first it gets.

Everything a shard writes (its snapshot, report and late rows) is named by the shard, not the
partition, so which slot runs it changes nothing downstream. Claims need an exclusive create: a
local ``stateLocation`` (a symbolic link), or an object store's conditional write
(``claim_shard_conditional``, ``storage.create_exclusive``, ``conditional_writes``): ``s3://``
with ``botocore`` (a PUT with ``If-None-Match: *``), ``gs://`` with ``google-cloud-storage`` (the
precondition ``ifGenerationMatch=0``), ``abfss://`` / ``abfs://`` with ``azure-storage-blob`` (a Put
Blob with ``If-None-Match: *``) installed (the ``s3``, ``gcs``, ``azure`` extras). Elsewhere
(``hdfs://``, or an object store without its client) a partition runs the shard of its own number.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> claim_shard(d, partition=0, preferred=[1], shards=2), claim_shard(d, partition=1, preferred=[1], shards=2)
(1, 0)
>>> claim_shard(d, partition=1, preferred=[], shards=2)  # a retry of partition 1: the same shard
0
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from spark_windowing.datasource import layout, local_copies, storage

if TYPE_CHECKING:  # pragma: no cover
    from spark_windowing.store import StateStore

__all__ = ["shard_to_run", "claim_shard", "claim_shard_conditional", "held_shards", "keep_open", "take_open"]

#: This worker's open state stores by (state location, shard), least recently used first.
_STORES: dict[tuple[str, int], "StateStore"] = {}
MAX_OPEN_STORES = 4


def keep_open(state: str, shard: int, store: "StateStore") -> None:
    """Keep ``store`` (shard ``shard`` of state location ``state``) for this worker's next batch."""
    _STORES.pop((state, shard), None)
    _STORES[(state, shard)] = store
    while len(_STORES) > MAX_OPEN_STORES:
        _STORES.pop(next(iter(_STORES)))


def take_open(state: str, shard: int) -> "StateStore | None":
    """The store this worker kept for the shard (removed from the cache), or None."""
    return _STORES.pop((state, shard), None)


def held_shards(state: str, seq: int) -> list[int]:
    """The shards of ``state`` whose store this worker holds as of offset ``seq`` (> 0), then
    those it holds as of an earlier offset (``StateStore.catch_up`` reads only what changed since)."""
    mine = [(shard, store.op.seq) for (where, shard), store in _STORES.items() if where == state]
    return [s for s, at in mine if at == seq > 0] + [s for s, at in mine if 0 < at < seq]


def shard_to_run(state: str, shards: int, *, partition: int, start_seq: int, seq: int,
                 prefer_held: bool = True) -> int:
    """The shard partition ``partition`` of micro-batch ``seq`` (starting at offset ``start_seq``)
    runs: where claims work (``storage.exclusive_create_available``: a local state location
    ``state``, or an object store with its client), the one it claims, preferring those this worker
    holds (unless not ``prefer_held``: the batch changes the shard count, so no held store is one
    of its shards); else the shard of its own number."""
    fs, root = storage.filesystem(state)
    if shards == 1 or not storage.exclusive_create_available(state):
        return partition
    held = held_shards(state, start_seq) + local_copies.local_shards(state, start_seq) if prefer_held else []
    if storage.is_local(fs):
        return claim_shard(layout.claims_dir(root, seq), partition=partition, preferred=held, shards=shards)
    return claim_shard_conditional(layout.claims_dir(state, seq), partition=partition, preferred=held, shards=shards)


def claim_shard_conditional(directory: str, *, partition: int, preferred: list[int], shards: int) -> int:
    """``claim_shard`` on an object store (``directory`` a URI), by conditional writes: a claim
    ``shard-<s>`` holding the partition's number is created only if absent
    (``storage.create_exclusive``). Before each attempt the partition records the shard it is
    about to claim (``partition-<p>``, a plain PUT only it writes), so a retry finds the shard it
    claimed without reading every claim: 3 requests for a first attempt that gets its first
    choice (its intent read, found absent; the intent; the claim), 4 more per shard already taken
    (a read is a HEAD and a GET), 4 for a retry."""
    intent = f"{directory}/partition-{partition}"
    before = storage.read_bytes(intent, missing_ok=True)
    if before is not None and _owner(directory, int(before)) == partition:
        return int(before)
    for shard in dict.fromkeys([*(s for s in preferred if s < shards), partition % shards, *range(shards)]):
        storage.write_atomic(intent, str(shard).encode(), durable=False)
        if storage.create_exclusive(f"{directory}/shard-{shard}", str(partition).encode()) \
                or _owner(directory, shard) == partition:
            return shard
    raise RuntimeError(f"{directory}: every shard of this micro-batch is claimed by another partition, none by "
                       f"partition {partition}; the claims were changed while the query ran")


def _owner(directory: str, shard: int) -> int | None:
    """The partition that claimed ``shard`` (claims in ``directory``, a URI), or None."""
    raw = storage.read_bytes(f"{directory}/shard-{shard}", missing_ok=True)
    return None if raw is None else int(raw)


def claim_shard(directory: str, *, partition: int, preferred: list[int], shards: int) -> int:
    """The shard partition ``partition`` runs in the batch whose claims are in ``directory`` (a
    local path), claiming it if it has none yet (see the module docstring for the order)."""
    os.makedirs(directory, exist_ok=True)
    held = _claims(directory)
    mine = [s for s, p in held.items() if p == partition]
    if mine:
        return mine[0]
    for shard in dict.fromkeys([*(s for s in preferred if s < shards), partition % shards, *range(shards)]):
        if shard not in held and _create_exclusive(os.path.join(directory, f"shard-{shard}"), partition):
            return shard
    raise RuntimeError(f"{directory}: every shard of this micro-batch is claimed by another partition "
                       f"({_claims(directory)}), none by partition {partition}; the claims directory was "
                       "changed while the query ran")


def _claims(directory: str) -> dict[int, int]:
    """shard -> the partition that claimed it, from the claims in ``directory``."""
    return {int(name[6:]): int(os.readlink(os.path.join(directory, name)))
            for name in os.listdir(directory) if name.startswith("shard-") and name[6:].isdigit()}


def _create_exclusive(path: str, partition: int) -> bool:
    """Create the claim ``path`` for ``partition`` unless it exists (then False). A claim is a
    symbolic link whose target is the partition number: created atomically and exclusively, and
    never seen half-written. It need not outlive a crash: any partition may run any shard in a
    replay (what a shard writes is named by the shard), so no flush to disk."""
    try:
        os.symlink(str(partition), path)
        return True
    except FileExistsError:
        return False
