"""The pane sink's writer lease: one streaming query writes one pane table set.

``P/_writer.json`` names the query writing the tables under ``P`` (its app id, checkpoint, the
time of its last renewal). The sink takes it when Spark creates the sink's writer as the query
starts (before batch 0 runs: the query id is read from ``<checkpointLocation>/metadata``, which
Spark writes first), and renews it at every commit, empty batches included. Another query finding
a lease renewed less than ``writerLease`` ago fails at once, before it writes anything.

* A restart from the same checkpoint has the same query id, hence the same app id: its own lease
  never refuses it (a crashed query restarts at once).
* A query with another checkpoint is another query: refused until the lease is released or stale.
* The lease is released when the query terminates (stopped, finished or failed): the listener
  ``spark_windowing.register`` adds removes the leases the query took (they are listed, per query
  id, in a directory of the driver's temp dir; the sink's writer and commits run on the driver).
  A driver that died releases nothing: its lease goes stale ``writerLease`` after its last batch
  (``.option("writerLease", "0 seconds")`` takes a path over at once).
"""

from __future__ import annotations

import atexit
import json
import os
import tempfile
import time
from typing import Any

from spark_windowing.datasource import storage
from spark_windowing.datasource.storage.layout import writer_lease_uri

#: How long a query refused by a lease re-reads it, in case its holder is just terminating (Spark
#: reports a query's termination to listeners asynchronously).
RELEASE_GRACE_S = 3.0

#: A lease its own query renewed less than this part of ``writerLease`` ago is not written again
#: (Spark creates the sink's writer twice per micro-batch and commits once: three renewals a batch
#: otherwise, each an atomic write). It is still read every time, so a lease released or taken over
#: in between is seen; and it stays far younger than ``writerLease``.
RENEW_FRACTION = 10


def registry_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "spark-windowing-leases")


def take(root: str, app_id: str, *, lease_us: int, checkpoint: str | None, batch_id: int | None,
         query_id: str | None) -> None:
    """Take or renew the lease of the tables under ``root`` for ``app_id``; raise ``RuntimeError``
    naming the holder when another query renewed it less than ``lease_us`` ago."""
    uri = writer_lease_uri(root)
    deadline = time.monotonic() + RELEASE_GRACE_S
    while True:
        lease = _read_lease(uri)
        if lease is not None and lease.get("appId") == app_id and _age_us(lease) < lease_us / RENEW_FRACTION:
            if query_id:
                _remember(query_id, uri, app_id)
            return     # ours, renewed moments ago
        holder = _fresh_holder(lease, app_id, lease_us)
        if holder is None:
            break
        if time.monotonic() >= deadline:
            owner, age_s, where = holder
            raise RuntimeError(
                f"windowed sink: the pane tables at {root} are written by another query (appId {owner!r}, "
                f"checkpoint {where}, last batch {age_s:.0f} s ago); this query ({app_id!r}) may not write them "
                "too. One query writes one pane table set: stop the other query, or write to another path. "
                f"A query that has stopped gives the path up at once (a driver that died: writerLease, "
                f"{lease_us / 1e6:.0f} s, after its last batch; .option('writerLease', '0 seconds') takes it "
                "over at once)." + _pipeline_refresh_hint(root, where, checkpoint))
        time.sleep(0.25)
    doc = {"appId": app_id, "checkpoint": checkpoint, "renewedAtMs": int(time.time() * 1000), "batchId": batch_id,
           "queryId": query_id}
    storage.write_atomic(uri, json.dumps(doc, sort_keys=True).encode(), durable=False)
    if query_id:
        _remember(query_id, uri, app_id)


def _pipeline_refresh_hint(root: str, held: Any, checkpoint: str | None) -> str:
    """What to do when the holder's checkpoint and this query's are siblings ``<flow>/<N>`` and
    ``<flow>/<M>``: a Spark Declarative Pipelines full refresh, which gives a sink's flow a new
    checkpoint and never truncates a sink (docs/declarative-pipelines.md)."""
    if not (isinstance(held, str) and checkpoint):
        return ""
    old, new = held.rstrip("/").rsplit("/", 1), checkpoint.rstrip("/").rsplit("/", 1)
    if len(old) != 2 or len(new) != 2 or old[0] != new[0] or not (old[1].isdigit() and new[1].isdigit()):
        return ""
    return (f" This query's checkpoint {checkpoint} is a new one of the same flow: a declarative pipeline's full "
            f"refresh, which never truncates a sink. To rebuild the pane tables from the start, remove {root} "
            "before the full refresh; to keep them, leave the sink's flow and its sources out of the refresh.")


def _read_lease(uri: str) -> dict | None:
    raw = storage.read_bytes(uri, missing_ok=True)
    return None if raw is None else json.loads(raw)


def _age_us(lease: dict) -> float:
    return (time.time() * 1000 - int(lease.get("renewedAtMs", 0))) * 1000


def _fresh_holder(lease: dict | None, app_id: str, lease_us: int) -> tuple[str, float, Any] | None:
    """(app id, age in s, checkpoint) of another query holding a lease younger than ``lease_us``."""
    if lease is None:
        return None
    owner, age_us = lease.get("appId"), _age_us(lease)
    if owner == app_id or age_us >= lease_us:
        return None
    return owner, age_us / 1e6, lease.get("checkpoint")


def _remember(query_id: str, uri: str, app_id: str) -> None:
    """List ``uri`` among the leases query ``query_id`` holds (for :func:`release`)."""
    try:
        os.makedirs(registry_dir(), exist_ok=True)
        path = os.path.join(registry_dir(), f"{query_id}.json")
        held = _read_json(path)
        if held.get(uri) != app_id:
            held[uri] = app_id
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(held, f)
            os.replace(tmp, path)
    except OSError:   # no release at stop then: the lease goes stale after writerLease
        pass


def release(query_id: str) -> list[str]:
    """Delete the leases query ``query_id`` holds (those still naming it); return their URIs."""
    path = os.path.join(registry_dir(), f"{query_id}.json")
    released = []
    for uri, app_id in _read_json(path).items():
        try:
            raw = storage.read_bytes(uri, missing_ok=True)
            if raw is not None and json.loads(raw).get("appId") == app_id:
                storage.delete(uri)
                released.append(uri)
        except Exception:   # a lease that cannot be read or deleted goes stale instead
            continue
    try:
        os.remove(path)
    except OSError:
        pass
    return released


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def add_release_listener(spark: Any) -> None:
    """Release the leases of every query on ``spark`` when it terminates (once per session)."""
    if getattr(spark, "_windowed_lease_listener", None) is not None:
        return
    from pyspark.sql.streaming import StreamingQueryListener

    class LeaseReleaser(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            pass

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            try:
                release(str(event.id))
            except Exception:   # a listener must not break the listener bus
                pass

    listener = LeaseReleaser()
    try:
        spark.streams.addListener(listener)
    except Exception:   # e.g. a session without listener support: leases go stale instead
        return
    spark._windowed_lease_listener = listener
    atexit.register(_remove_listener, spark, listener)


def _remove_listener(spark: Any, listener: Any) -> None:
    """At interpreter exit, while the Py4J gateway still answers: Spark's listener bus delivers
    events after the fact, and one for a query stopped just before exit would call back into a
    gone interpreter (``Connection refused`` and a Java stack trace on the console). So the bus is
    let deliver what it holds (up to 10 s: the last query's termination releases its lease), then
    the listener is removed."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    except Exception:   # Spark Connect (no SparkContext here), or a bus that did not drain in time
        pass
    try:
        spark.streams.removeListener(listener)
    except Exception:   # the session or its gateway already stopped: nothing left to call back
        pass
