"""Shard claims and state on ``gs://`` and ``abfss://`` (issue #29), against real emulators
(``tests/cloud_emulators.py``: fake-gcs-server, Azurite), as ``test_claims_object_store.py`` does
for S3: a conditional create (GCS ``ifGenerationMatch=0``, Azure ``If-None-Match: *``) creates a
claim only once, so racing partitions run every shard exactly once, a retried partition runs the
shard it claimed, and a ``StateStore`` keeps its state on the store through ``pyarrow.fs``."""

from __future__ import annotations

import re
import sys
import uuid

import pytest

from spark_windowing.datasource import storage
from spark_windowing.datasource.source.affinity import claim_shard_conditional, shard_to_run
from spark_windowing.datasource.storage import conditional_writes
from spark_windowing.state.segments import collect_garbage
from spark_windowing.state.store import StateStore
from tests.plugin.test_affinity import race_partitions
from tests.plugin.test_local_copies import BUCKETS, SCHEMA, SPEC, _events, _step_panes

#: The client module each store's conditional writes need.
CLIENT = {"gcs": "google.cloud.storage", "azure": "azure.storage.blob"}


@pytest.fixture(params=["gcs", "azure"])
def store(request):
    """The emulator of each store kind (session-scoped: started once, on first use)."""
    return request.getfixturevalue(f"{request.param}_store")


def _dir(store) -> str:
    return store.uri(f"claims-{uuid.uuid4().hex[:8]}")


def test_a_conditional_create_creates_an_object_only_once(store):
    uri = f"{_dir(store)}/shard-0"
    assert storage.exclusive_create_available(uri)
    assert storage.create_exclusive(uri, b"3") is True
    assert storage.create_exclusive(uri, b"4") is False
    assert storage.read_bytes(uri) == b"3"


def test_claims_prefer_held_shards_then_the_own_number_and_a_retry_keeps_its_shard(store):
    d = _dir(store)
    assert claim_shard_conditional(d, partition=0, preferred=[2], shards=3) == 2
    assert claim_shard_conditional(d, partition=1, preferred=[2], shards=3) == 1
    assert claim_shard_conditional(d, partition=0, preferred=[1], shards=3) == 2  # a retry elsewhere
    assert claim_shard_conditional(d, partition=2, preferred=[5], shards=3) == 0  # 5: not a shard of 3
    assert claim_shard_conditional(d, partition=2, preferred=[], shards=3) == 0   # a retry
    assert [storage.read_bytes(f"{d}/shard-{s}") for s in range(3)] == [b"2", b"1", b"0"]


def test_partitions_racing_on_the_store_cover_every_shard_once(store):
    d, n = _dir(store), 8
    got = race_partitions(n, lambda p: claim_shard_conditional(d, partition=p, preferred=[3], shards=n))
    assert sorted(got.values()) == list(range(n))
    assert {int(storage.read_bytes(f"{d}/shard-{s}")): s for s in range(n)} == got
    # every retry finds the shard it claimed
    assert [claim_shard_conditional(d, partition=p, preferred=[], shards=n) for p in range(n)] == \
        [got[p] for p in range(n)]


def test_shard_to_run_claims_on_the_store(store):
    state = _dir(store)
    first = shard_to_run(state, 4, partition=1, start_seq=0, seq=1)
    second = shard_to_run(state, 4, partition=2, start_seq=0, seq=1)
    assert (first, second) == (1, 2)
    assert storage.read_bytes(f"{state}/claims/1/shard-1") == b"1"


def test_without_the_client_a_partition_runs_its_own_number(store, monkeypatch):
    monkeypatch.setitem(sys.modules, CLIENT["gcs" if store.uri("").startswith("gs:") else "azure"], None)
    state = _dir(store)
    assert not storage.exclusive_create_available(state)
    assert [shard_to_run(state, 4, partition=p, start_seq=0, seq=1) for p in (3, 1)] == [3, 1]
    assert not storage.exists(f"{state}/claims/1/shard-3")
    with pytest.raises(RuntimeError, match="exclusive create"):
        storage.create_exclusive(f"{state}/x", b"1")


def _run(root: str, batches: range) -> StateStore:
    """Step and snapshot one shard's store at ``root`` through ``batches``."""
    store = None
    for b in batches:
        if store is None:
            store = StateStore.open(SPEC, storage, root, b, SCHEMA, buckets=BUCKETS)
        store.step(_events(b), watermark=b * 10 - 30, processing_time=0, batch_seq=b + 1)
        store.persist(b + 1)
    return store


def _names(root: str) -> list[str]:
    """The files at ``root``, the random attempt id in segment names left out."""
    return sorted(re.sub(r"-[0-9a-f]{12}\.bin$", ".bin", i.base_name) for i in storage.list_dir(root))


def test_a_state_store_round_trip_on_the_store(store, tmp_path):
    """Four snapshots written to the store, read back by a new store, equal to the same run on a
    local path; garbage collection lists and deletes there as it does locally."""
    root, local = f"{_dir(store)}/state/shard-0", str(tmp_path / "shard-0")
    _run(root, range(4)), _run(local, range(4))
    back, expected = (StateStore.open(SPEC, storage, r, 4, SCHEMA, buckets=BUCKETS) for r in (root, local))
    back.load_all()
    expected.load_all()
    assert back.op.num_windows == expected.op.num_windows > 0
    assert _step_panes(back) == _step_panes(expected)
    assert "000000000001.manifest" in _names(root)
    collect_garbage(storage, root, 4)
    collect_garbage(storage, local, 4)
    assert _names(root) == _names(local)
    assert "000000000001.manifest" not in _names(root)


def test_listed_paths_map_back_to_uris_of_the_same_objects(store):
    d = _dir(store)
    for i in range(3):
        storage.write_atomic(f"{d}/in/{i}.json", str(i).encode())
    fs, root = storage.filesystem(f"{d}/in")
    uris = sorted(storage.join_uri(f"{d}/in", root, i.path) for i in storage.list_dir(f"{d}/in"))
    assert uris == [f"{d}/in/{i}.json" for i in range(3)]
    assert storage.read_many(uris) == [b"0", b"1", b"2"]
    storage.delete(uris[0])
    assert storage.read_bytes(uris[0], missing_ok=True) is None


def test_the_short_azure_form_names_the_same_container(azure_store):
    d = _dir(azure_store)
    storage.write_atomic(f"{d}/x", b"7")
    short = "abfss://" + d.split("@", 1)[0][len("abfss://"):] + "/" + d.split("/", 3)[3] + "/x"
    assert short.startswith("abfss://lake/claims-")
    assert storage.read_bytes(short) == b"7"
    assert storage.create_exclusive(short, b"8") is False


def test_the_clients_are_made_once_per_process(store):
    d = _dir(store)
    storage.create_exclusive(f"{d}/a", b"1")
    before = dict(conditional_writes._CLIENTS)
    storage.create_exclusive(f"{d}/b", b"1")
    assert conditional_writes._CLIENTS == before and len(before) >= 1


def test_an_azure_account_without_a_key_needs_azure_identity(monkeypatch):
    """No key, SAS token or connection string: the claim client signs in with
    ``DefaultAzureCredential``, so claims need ``azure-identity`` too (else own-number shards)."""
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY",
                 "AZURE_STORAGE_SAS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    uri = "abfss://lake@someaccount.dfs.core.windows.net/state/claims/1/shard-0"
    pytest.importorskip("azure.storage.blob")
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    assert not conditional_writes.supported(uri)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "a2V5")
    assert conditional_writes.supported(uri)
    assert not conditional_writes.supported("abfss://lake@someaccount.dfs.core.windows.net:1/x?sv=1")
