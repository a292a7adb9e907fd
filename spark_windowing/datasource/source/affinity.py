"""Shard affinity: a task runs the shard whose state its Python worker already holds.

Each Python worker keeps the state stores it has open (``keep_open``, ``take_open``): the next
micro-batch of a shard that lands on the same worker continues from memory instead of reading
the shard's state back (Spark's state store providers do the same on executors). A store is
reused as it is when its offset and manifest match the batch's start, and brought up to it when it
is older (``spark_windowing.datasource.source.shard_state.open_store``, ``StateStore.catch_up``: only the key
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

**Waiting for the holder** (object-store state, ``claimWait`` > 0). A Python source cannot give
its partitions preferred locations, so Spark can hand one executor more of a batch's tasks than it
holds shards while another executor is still busy; the extra task would read a shard's state back
from the store although the other executor holds it. So on an object store a batch has ``2 *
shards`` slots (``slots``), and a claim names its executor (``executor_tag``). A slot that gets
none of the shards its executor holds looks at the unclaimed ones (one listing): a shard that
another executor ran in the previous batch (its claim there names it) is left to that executor for
up to ``claimWait``, polling; the spare slots give the holder a task to claim it with when its
current one ends. A slot that finds every shard claimed runs nothing. After ``claimWait`` (the
holder was lost, or is busy that long) the slot claims the shard and reads its state from the
store, as before. Shards nobody held (the first batch, a new executor's) are claimed at once. With
a local ``stateLocation`` or ``claimWait`` 0 a batch has ``shards`` slots and nobody waits.

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

import hashlib
import os
import socket
import time
from typing import TYPE_CHECKING, Callable

from spark_windowing.datasource import storage
from spark_windowing.datasource.storage import layout, local_copies

if TYPE_CHECKING:  # pragma: no cover
    from spark_windowing.state.store import StateStore

__all__ = ["shard_to_run", "slots", "claim_shard", "claim_shard_conditional", "held_shards", "keep_open", "take_open",
           "executor_tag"]

#: This worker's open state stores by (state location, shard), least recently used first.
_STORES: dict[tuple[str, int], "StateStore"] = {}
MAX_OPEN_STORES = 4
#: How often a slot waiting for another executor's shard looks at the claims again, seconds.
POLL_SECONDS = 0.1


def slots(state: str, shards: int, claim_wait: float) -> int:
    """The partitions of a micro-batch of ``shards`` shards: ``2 * shards`` where slots wait for
    the executor holding a shard (an object-store ``state`` with claims, ``claim_wait`` > 0: the
    spare slots give that executor a task to claim it with), else ``shards``."""
    waits = shards > 1 and claim_wait > 0 and not storage.is_local(storage.filesystem(state)[0]) \
        and storage.exclusive_create_available(state)
    return 2 * shards if waits else shards


def executor_tag() -> str:
    """This Python worker's executor, as a claim names it: a hash of the host and the executor's
    local directory (``SPARK_LOCAL_DIRS``, one per executor); '' outside a Spark task."""
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    if not local_dirs:
        return ""
    return hashlib.sha256(f"{socket.gethostname()}|{local_dirs}".encode()).hexdigest()[:12]


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
                 prefer_held: bool = True, claim_wait: float = 0.0) -> int | None:
    """The shard partition ``partition`` of micro-batch ``seq`` (starting at offset ``start_seq``)
    runs, or None (a spare slot: every shard is claimed): where claims work
    (``storage.exclusive_create_available``: a local state location ``state``, or an object store
    with its client), the one it claims, preferring those this worker holds (unless not
    ``prefer_held``: the batch changes the shard count, so no held store is one of its shards) and
    leaving those another executor held to it for up to ``claim_wait`` seconds (object stores,
    when the batch has ``slots`` > ``shards``); else the shard of its own number."""
    fs, root = storage.filesystem(state)
    if shards == 1 or not storage.exclusive_create_available(state):
        return partition
    held = held_shards(state, start_seq) + local_copies.local_shards(state, start_seq) if prefer_held else []
    if storage.is_local(fs):
        return claim_shard(layout.claims_dir(root, seq), partition=partition, preferred=held, shards=shards)
    waits = prefer_held and slots(state, shards, claim_wait) > shards
    return claim_shard_conditional(layout.claims_dir(state, seq), partition=partition, preferred=held, shards=shards,
                                   previous=layout.claims_dir(state, start_seq) if waits and start_seq > 0 else None,
                                   claim_wait=claim_wait if waits else 0.0)


def claim_shard_conditional(directory: str, *, partition: int, preferred: list[int], shards: int,
                            previous: str | None = None, claim_wait: float = 0.0) -> int | None:
    """``claim_shard`` on an object store (``directory`` a URI), by conditional writes: a claim
    ``shard-<s>`` holding the partition's number and ``executor_tag`` is created only if absent
    (``storage.create_exclusive``). Before each attempt the partition records the shard it is
    about to claim (``partition-<p>``, a plain PUT only it writes), so a retry finds the shard it
    claimed without reading every claim: 3 requests for a first attempt that gets its first
    choice (its intent read, found absent; the intent; the claim), 4 more per shard already taken
    (a read is a HEAD and a GET), 4 for a retry.

    With ``claim_wait`` > 0 (the batch has spare slots; ``previous`` the claims of the batch
    before), a partition that gets none of ``preferred`` lists the claims, leaves shards another
    executor claimed in ``previous`` to it for up to ``claim_wait`` seconds, and returns None once
    every shard is claimed (module docstring)."""
    intent = f"{directory}/partition-{partition}"
    before = storage.read_bytes(intent, missing_ok=True)
    if before is not None and _owner(directory, int(before)) == partition:
        return int(before)
    body = _claim_body(partition)

    def claim(shard: int) -> bool:
        storage.write_atomic(intent, str(shard).encode(), durable=False)
        return storage.create_exclusive(f"{directory}/shard-{shard}", body) or _owner(directory, shard) == partition

    order = list(dict.fromkeys([*(s for s in preferred if s < shards), partition % shards, *range(shards)]))
    if claim_wait > 0:
        for shard in dict.fromkeys(s for s in preferred if s < shards):
            if claim(shard):
                return shard
        return _claim_or_wait(directory, shards, order, previous, claim_wait, claim)
    for shard in order:
        if claim(shard):
            return shard
    raise RuntimeError(f"{directory}: every shard of this micro-batch is claimed by another partition, none by "
                       f"partition {partition}; the claims were changed while the query ran")


def _claim_or_wait(directory: str, shards: int, order: list[int], previous: str | None, claim_wait: float,
                   claim: Callable[[int], bool]) -> int | None:
    """The first unclaimed shard of ``order`` that ``claim`` gets, leaving those held elsewhere
    (``_held_elsewhere``) to their executor for ``claim_wait`` seconds; None once every shard is
    claimed."""
    elsewhere: set[int] | None = None   # read once, when a shard is found unclaimed
    deadline = time.monotonic() + claim_wait
    while True:
        free = [s for s in order if s not in _claimed(directory)]
        if not free:
            return None
        if elsewhere is None:
            elsewhere = _held_elsewhere(previous, shards)
        late = time.monotonic() >= deadline
        for shard in free if late else [s for s in free if s not in elsewhere]:
            if claim(shard):
                return shard
        if not late:
            time.sleep(POLL_SECONDS)


def _held_elsewhere(previous: str | None, shards: int) -> set[int]:
    """The shards another executor ran in the batch whose claims are in ``previous``, if this
    executor ran one there too (so those executors are alive as far as anyone knows); none if it
    ran none (a new executor, or every executor after a restart: it waits for nobody)."""
    tags = _claimers(previous, shards) if previous else {}
    me = executor_tag()
    return {s for s, tag in tags.items() if tag != me} if me and me in tags.values() else set()


def _claimed(directory: str) -> set[int]:
    """The shards claimed in ``directory`` (a URI): one listing."""
    names = (info.base_name for info in storage.list_dir(directory))
    return {int(n[6:]) for n in names if n.startswith("shard-") and n[6:].isdigit()}


def _claim_body(partition: int) -> bytes:
    """A claim's content: the partition's number, then this worker's ``executor_tag`` if any."""
    tag = executor_tag()
    return f"{partition} {tag}".encode() if tag else str(partition).encode()


def _claimers(directory: str, shards: int) -> dict[int, str]:
    """Shard -> the ``executor_tag`` its claim in ``directory`` names (claims read in parallel;
    shards without a claim, or whose claim names no executor, left out)."""
    raws = storage.read_many([f"{directory}/shard-{s}" for s in range(shards)], missing_ok=True)
    tags = {s: raw.decode().partition(" ")[2] for s, raw in enumerate(raws) if raw is not None}
    return {s: tag for s, tag in tags.items() if tag}


def _owner(directory: str, shard: int) -> int | None:
    """The partition that claimed ``shard`` (claims in ``directory``, a URI), or None."""
    raw = storage.read_bytes(f"{directory}/shard-{shard}", missing_ok=True)
    return None if raw is None else int(raw.split()[0])


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
