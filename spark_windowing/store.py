"""The state store: an operator whose windows live in key buckets on storage.

Windows are grouped into ``buckets`` by a stable hash of their key. A snapshot at offset ``seq``
is a *manifest* (``<root>/<seq>.manifest``) naming, for every non-empty bucket, the byte range of
its rows in a segment file (``<root>/seg-<seq>-<attempt>.bin``, a new name per attempt), plus the
operator's scalar state. Writing a snapshot writes only the buckets the step changed — one segment
file with those buckets, and the manifest, last — so its cost follows the changed state, not the
total state (incremental snapshots); a step that changed nothing writes the manifest only.

Publication needs neither rename nor listing: a segment is never overwritten (its name is new),
and a manifest, one whole object, refers only to segments written before it. A reader that finds
the manifest of batch ``seq`` therefore finds a complete snapshot; one that does not gets an
error. Two attempts of one batch (a retried task, a straggler) each publish a complete manifest
of the same state, whichever lands last.
Segments accumulate; once the manifest refers to more than ``max_files`` segment files, the
buckets of the oldest one are rewritten with the next snapshot (compaction), and files no
manifest refers to any more are deleted by ``collect_garbage``.

Buckets need not be in memory. A store opened from a manifest loads nothing; a step loads the
buckets of its events' keys, and those whose windows have a timer due (the manifest keeps, per
bucket, the earliest event-time and processing-time at which a step could change it). After a
snapshot, buckets not used recently are dropped from memory while more than ``max_rows`` windows
are resident (spilling: open windows that do not fit in memory stay on storage and are read back
when needed). Results do not depend on what is resident: panes are ordered by row id, and row ids
are assigned in an order that depends only on the events.

A segment leaves out the state columns in which every window holds the column's default (fresh
windows have no pane yet, no hold, nothing closed: about half the columns); the manifest names
them per segment file (``omitted``) and loading puts the defaults back.

Every segment range carries a CRC-32 and the manifest a SHA-256: a missing or corrupt snapshot raises
``SnapshotError``, never a reset.

Storage goes through ``io``, an object with ``read_bytes(uri, missing_ok=)``,
``read_range(uri, offset, length)``, ``write_atomic(uri, data, durable=)``, ``exists(uri)``,
``list_dir(uri)`` and ``delete(uri)`` (``spark_windowing.datasource.storage``: local paths and any
``pyarrow.fs`` URI).

Long module: opening, stepping, spilling and persisting all keep the same per-bucket bookkeeping
(``resident``, ``dirty``, ``summary``, ``loc``) consistent; split over modules, that one invariant
would be spread over several.
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import uuid
import zlib
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import get_column
from spark_windowing._hash import hash_columns, mix
from spark_windowing._time import MAX_TIME
from spark_windowing.errors import SnapshotError
from spark_windowing.operator import EventTimes, StepResult, WindowedOperator
from spark_windowing.spec import OperatorSpec
from spark_windowing.state_codec import (check_fingerprint, column_kinds, constant_columns, extra_state,
                                         restore_extra, restore_scalars, rows_to_table, scalars, table_to_cols)

MANIFEST_MAGIC = b"SWMANIF\x01"
MANIFEST_VERSION = 2
#: Manifest versions this build reads: 1 had no ``omitted`` (every segment holds every column).
READABLE_VERSIONS = (1, 2)


def _checksum(raw: bytes) -> str:
    """CRC-32C-class integrity check of a segment range (corruption, truncation), cheap enough
    to run on every byte read and written."""
    return f"crc32:{zlib.crc32(raw):08x}"


def manifest_uri(root: str, seq: int) -> str:
    return f"{root}/{seq:012d}.manifest"


def manifest_digest(blob: bytes) -> str:
    """The SHA-256 a manifest's bytes carry (what ``StateStore.manifest_digest`` is compared with)."""
    return blob[len(MANIFEST_MAGIC):len(MANIFEST_MAGIC) + 64].decode(errors="replace")


def segment_name(seq: int, attempt: str, part: int = 0) -> str:
    """The segment file a snapshot of batch ``seq`` writes: unique per attempt (a retried or
    duplicate task never overwrites a segment another attempt's manifest refers to)."""
    return f"seg-{seq:012d}-{attempt}" + (f"-{part}" if part else "") + ".bin"


class StateStore:
    """A ``WindowedOperator`` with bucketed, lazily loaded, incrementally persisted state."""

    def __init__(self, spec: OperatorSpec, io: Any, root: str, input_schema: pa.Schema | None = None, *,
                 buckets: int = 64, max_rows: int = 2_000_000, max_files: int = 8) -> None:
        self.spec, self.io, self.root = spec, io, root.rstrip("/")
        self.n_buckets, self.max_rows, self.max_files = int(buckets), int(max_rows), int(max_files)
        self.op = WindowedOperator(spec, input_schema)
        self.resident = np.ones(self.n_buckets, dtype=bool)   # a fresh store has everything in memory
        self.dirty = np.zeros(self.n_buckets, dtype=bool)
        self.last_used = np.zeros(self.n_buckets, dtype=np.int64)
        # per bucket, as persisted: [rows, event-time trigger (with expiry), processing-time trigger,
        # event-time timer (without expiry: what the source schedules batches for)]
        self.summary = np.zeros((self.n_buckets, 4), dtype=np.int64)
        self.summary[:, 1:] = MAX_TIME
        self.loc: dict[int, tuple[str, int, int, str]] = {}  # bucket -> (segment name, offset, length, sha256)
        self.omitted: dict[str, frozenset[str]] = {}  # segment name -> state columns left out (constant)
        self.manifest_digest: str | None = None
        self.bytes_written = 0
        self._schema: pa.Schema | None = None
        self._extra_loc: list | None = None
        self._pending_bytes, self._part, self._part_seq, self._attempt = 0, 0, None, ""

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, spec: OperatorSpec, io: Any, root: str, seq: int, input_schema: pa.Schema | None = None,
             **kw: Any) -> "StateStore":
        """The store as of offset ``seq`` (empty at 0); nothing but the manifest is read."""
        store = cls(spec, io, root, input_schema, **kw)
        if seq == 0:
            return store
        uri = manifest_uri(store.root, seq)
        blob = io.read_bytes(uri, missing_ok=True)
        if blob is None:
            raise SnapshotError(f"missing state snapshot {uri} (batch {seq}): the state location must not be "
                                "cleaned or changed while the query's checkpoint refers to it")
        store._load_manifest(blob, uri)
        return store

    def catch_up(self, blob: bytes, uri: str) -> int:
        """Bring this store, which holds an earlier snapshot of the same shard, to the snapshot
        whose manifest is ``blob`` (at ``uri``), reading nothing else up front: a key bucket whose
        segment range the manifest still names holds the same rows, so it stays in memory; the
        others are dropped from memory and read back when a step needs them, as spilled buckets
        are. Scalars and operator extras come from the manifest. Returns the buckets dropped.

        For a Python worker whose copy of a shard is older than the batch's start (Spark ran the
        batches in between in another worker): it reads what those batches changed, not the whole
        state. Any segment range it still names is exactly what this store wrote or read, because
        segments are never overwritten."""
        assert not self.dirty.any(), "catch_up() on a store with unsaved changes"
        old_op, old_loc, was_resident = self.op, self.loc, self.resident.copy()
        self._load_manifest(blob, uri)
        if self.op is not old_op:   # the manifest's input schema differs: nothing in memory is reusable
            self._schema = None
            return int(was_resident.sum())
        keep = was_resident & np.array([old_loc.get(b) == self.loc.get(b) for b in range(self.n_buckets)])
        if self.op.num_windows:
            bucket = self.op.table.bucket
            self.op.drop_rows(~(keep[bucket] & (bucket >= 0)))
        self.resident |= keep
        return int((was_resident & ~keep).sum())

    def _load_manifest(self, blob: bytes, uri: str) -> None:
        if not blob.startswith(MANIFEST_MAGIC) or len(blob) < len(MANIFEST_MAGIC) + 64:
            raise SnapshotError(f"{uri}: not a spark-windowing state manifest (bad magic or truncated)")
        digest, body = blob[len(MANIFEST_MAGIC):len(MANIFEST_MAGIC) + 64].decode(), blob[len(MANIFEST_MAGIC) + 64:]
        if hashlib.sha256(body).hexdigest() != digest:
            raise SnapshotError(f"{uri}: corrupt state manifest (checksum mismatch or truncated)")
        m = json.loads(body)
        if m.get("version") not in READABLE_VERSIONS:
            raise SnapshotError(f"{uri}: manifest version {m.get('version')} is not supported "
                                f"(this build reads versions {', '.join(map(str, READABLE_VERSIONS))})")
        check_fingerprint(m["fingerprint"], self.spec, uri)
        if m["buckets_n"] != self.n_buckets:
            raise SnapshotError(f"{uri}: state was written with {m['buckets_n']} key buckets, this query uses "
                                f"{self.n_buckets}; keep stateBuckets unchanged for a state location")
        op = self.op
        restore_scalars(op, m)
        if m["schema"] is not None:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(m["schema"])))
            if not op.bound or not op.input_schema.equals(schema):
                op = self.op = WindowedOperator(self.spec, schema)
                restore_scalars(op, m)
        self._extra_loc = list(m["extra"]) if m.get("extra") else None
        if m.get("extra"):
            name, off, length, sha = m["extra"]
            restore_extra(op, pickle.loads(self._read(f"{self.root}/{name}", off, length, sha, "operator extras")))
        self.loc = {int(b): tuple(v[:4]) for b, v in m["buckets"].items()}  # type: ignore[misc]
        self.omitted = {name: frozenset(cols) for name, cols in m.get("omitted", {}).items()}
        self.summary[:, 0] = 0
        self.summary[:, 1:] = MAX_TIME
        for b, v in m["buckets"].items():
            self.summary[int(b)] = v[4:8]
        self.resident[:] = False
        self.resident[[b for b in range(self.n_buckets) if b not in self.loc]] = True  # empty buckets
        self.manifest_digest = digest

    # ------------------------------------------------------------------ the step
    @property
    def num_windows(self) -> int:
        return self.op.num_windows + int(self.summary[~self.resident, 0].sum())

    def step(self, events: pa.Table | None, *, watermark: int | None = None,
             processing_time: int | None = None, batch_seq: int | None = None,
             key_hash: np.ndarray | None = None, event_times: EventTimes | None = None) -> StepResult:
        """``WindowedOperator.step`` over the whole state: the parts of ``step_parts`` merged
        into the order a single in-memory step gives."""
        parts = list(self.step_parts(events, watermark=watermark, processing_time=processing_time,
                                     batch_seq=batch_seq, key_hash=key_hash, event_times=event_times))
        if len(parts) == 1:
            return parts[0]
        panes = pa.concat_tables([p.panes for p in parts])
        order = np.concatenate([p.order for p in parts])
        metrics = dict(parts[0].metrics)
        for p in parts[1:]:
            for k, v in p.metrics.items():
                if k not in ("state_rows", "parts"):
                    metrics[k] = metrics.get(k, 0) + v
        metrics["state_rows"] = parts[-1].metrics["state_rows"]
        sort = np.argsort(order, kind="stable")
        late = pa.concat_tables([p.late for p in parts])
        return StepResult(panes.take(pa.array(sort)), late, metrics, order[sort])

    def step_parts(self, events: pa.Table | None, *, watermark: int | None = None,
                   processing_time: int | None = None, batch_seq: int | None = None,
                   key_hash: np.ndarray | None = None, event_times: EventTimes | None = None
                   ) -> Iterator[StepResult]:
        """One micro-batch. When the buckets it needs (those of its events' keys and those with a
        due timer) fit in ``max_rows`` with what is in memory, one step. Otherwise in parts, a
        memory-full of buckets at a time (in bucket order, sized from the persisted row counts and
        the events per bucket, so the parts do not depend on what happened to be in memory): each
        part steps its buckets' events with the same watermark and batch, then its buckets are
        written to storage and dropped from memory. The union of the parts' panes and late rows
        equals one in-memory step; each part's panes are in row-id order. (Long: the parts are
        planned by a short loop kept next to the one-step path it falls back from.)"""
        op = self.op
        if events is not None and events.num_rows and not op.bound:
            op.bind(events.schema)
        wm, proc, seq = op.next_clock(watermark, processing_time, batch_seq)
        ev_bucket = np.zeros(0, dtype=np.int64)
        per_bucket = np.zeros(self.n_buckets, dtype=np.int64)
        if events is not None and events.num_rows and op.bound:
            ev_bucket = self.bucket_of(events, key_hash)
            per_bucket = np.bincount(ev_bucket, minlength=self.n_buckets)
        touched = per_bucket > 0
        if op.num_windows:  # resident rows are the truth for resident buckets
            ev, pt = op.row_timers()
            rows_due = (ev <= wm) | (pt <= proc)
            if rows_due.any():
                touched |= np.bincount(op.table.bucket[rows_due], minlength=self.n_buckets) > 0
        due_out = ((self.summary[:, 1] <= wm) | (self.summary[:, 2] <= proc)) & ~self.resident
        need = touched | due_out
        load = need & ~self.resident
        if op.num_windows + int(self.summary[load, 0].sum()) + int(per_bucket.sum()) <= self.max_rows \
                or need.sum() <= 1:
            self._load(np.flatnonzero(load))
            yield self._step_part(events, event_times, need, watermark, processing_time, batch_seq)
            return
        assert not self.dirty.any(), "persist() after every batch"
        cost = self.summary[:, 0] + per_bucket
        parts, cur, room = [], [], self.max_rows
        for b in np.flatnonzero(need).tolist():
            if cur and cost[b] > room:
                parts.append(cur)
                cur, room = [], self.max_rows
            cur.append(b)
            room -= int(cost[b])
        parts.append(cur)
        for i, part in enumerate(parts):
            in_part = np.zeros(self.n_buckets, dtype=bool)
            in_part[part] = True
            self._flush(seq)
            self._keep_only(in_part)
            self._load(np.flatnonzero(in_part & ~self.resident))
            part_events, part_times = None, None
            if len(ev_bucket):
                sel = np.flatnonzero(in_part[ev_bucket])
                part_events = events.take(pa.array(sel)) if len(sel) else None
                if event_times is not None and len(sel):
                    part_times = (event_times[0][sel], event_times[1][sel])
            result = self._step_part(part_events, part_times, in_part, watermark, processing_time, batch_seq)
            result.metrics["parts"] = len(parts)
            yield result

    def _step_part(self, events, event_times, touched, watermark, processing_time, batch_seq) -> StepResult:
        op = self.op
        result = op.step(events, watermark=watermark, processing_time=processing_time, batch_seq=batch_seq,
                         event_times=event_times)
        self._assign_buckets()
        self.dirty |= touched
        self.last_used[touched] = op.seq
        result.metrics["state_rows"] = self.num_windows
        return result

    def _keep_only(self, keep: np.ndarray) -> None:
        """Drop every (clean) bucket not in ``keep`` from memory."""
        op = self.op
        drop = self.resident & ~keep
        if op.num_windows and drop.any():
            op.drop_rows(drop[op.table.bucket])
        self.resident[drop & (self.summary[:, 0] > 0)] = False

    def bucket_of(self, events: pa.Table, key_hash: np.ndarray | None = None) -> np.ndarray:
        """Key bucket per row: the key hash (the same one shards use), re-mixed so buckets and
        shards are independent."""
        keys = self.spec.key_columns
        if not keys:
            return np.zeros(events.num_rows, dtype=np.int64)
        h = key_hash if key_hash is not None else \
            hash_columns([get_column(events, k) for k in keys], events.num_rows)
        return (mix(h, 0xB0C4E7) % np.uint64(self.n_buckets)).astype(np.int64)

    def _assign_buckets(self) -> None:
        op = self.op
        if not op.num_windows:
            return
        new = op.table.bucket < 0
        if new.any():
            rows = np.flatnonzero(new)
            op.table.bucket[rows] = self.bucket_of(op.table.key_rows(rows))

    def next_timers(self) -> tuple[int, int]:
        ev, pt = self.op.next_timers()
        out = ~self.resident
        ev = min(ev, int(self.summary[out, 3].min(initial=MAX_TIME)))
        pt = min(pt, int(self.summary[out, 2].min(initial=MAX_TIME)))
        return ev, pt

    # ------------------------------------------------------------------ loading and spilling
    def _read(self, uri: str, off: int, length: int, sha: str | None, what: str) -> bytes:
        return self._read_checked(uri, off, length,
                                  lambda raw: None if sha is None or _checksum(raw) == sha else what, what)

    def _read_checked(self, uri: str, off: int, length: int, bad: Any, what: str) -> bytes:
        """Bytes ``off``..``off + length`` of ``uri``; ``bad(raw)`` names what fails its checksum
        (None: intact). An ``io`` that serves copies (``spark_windowing.datasource.storage.local_copies``)
        may drop a copy that fails (``io.drop_copy(uri)`` returns True); the range is then read
        once more from the source."""
        for retry in (False, True):
            try:
                raw = self.io.read_range(uri, off, length)
            except FileNotFoundError:
                raise SnapshotError(f"missing state segment {uri} ({what}): the state location must not "
                                    "be cleaned or changed while the query's checkpoint refers to it") from None
            problem = what if len(raw) != length else bad(raw)
            if problem is None:
                return raw
            if retry or not getattr(self.io, "drop_copy", lambda _uri: False)(uri):
                break
        raise SnapshotError(f"{uri}: corrupt state segment ({problem}: checksum mismatch or truncated)")

    def _load(self, buckets: np.ndarray) -> None:
        """Read ``buckets`` back: one ranged read per segment file (spanning its wanted buckets),
        each bucket's bytes checked against its checksum."""
        parts: list[tuple[pa.Table, dict[str, np.ndarray]]] = []
        by_file: dict[str, list[int]] = {}
        for b in buckets.tolist():
            by_file.setdefault(self.loc[b][0], []).append(b)
        for name, members in by_file.items():
            lo = min(self.loc[b][1] for b in members)
            hi = max(self.loc[b][1] + self.loc[b][2] for b in members)

            def first_bad(span: bytes, members: list[int] = members, lo: int = lo) -> str | None:
                for b in members:
                    _, off, length, sha = self.loc[b]
                    if sha is not None and _checksum(span[off - lo:off - lo + length]) != sha:
                        return f"key bucket {b}"
                return None

            span = self._read_checked(f"{self.root}/{name}", lo, hi - lo, first_bad, "key buckets")
            schema, batches = self._row_schema(self.omitted.get(name)), []
            for b in members:
                _, off, length, _ = self.loc[b]
                batches.append(pa.ipc.read_record_batch(pa.py_buffer(span[off - lo:off - lo + length]), schema))
            parts.append(table_to_cols(self.op, pa.Table.from_batches(batches, schema)))
        if parts:
            keys = pa.concat_tables([k for k, _ in parts])
            cols = parts[0][1] if len(parts) == 1 else \
                {c: np.concatenate([cols[c] for _, cols in parts]) for c in parts[0][1]}
            self.op.import_rows(keys, cols)
        self.resident[buckets] = True

    def _row_schema(self, omitted: frozenset[str] | None) -> pa.Schema:
        """The schema of a segment's rows: every state column but the ``omitted`` ones."""
        if self._schema is None:
            self._schema = rows_to_table(self.op, np.zeros(0, dtype=np.int64)).schema
        if not omitted:
            return self._schema
        return pa.schema([f for f in self._schema if not (f.name.startswith("s:") and f.name[2:] in omitted)])

    def evict(self, target: int | None = None) -> int:
        """Drop least recently used (clean) buckets from memory while more than ``target``
        (default ``max_rows``) windows are resident; returns the windows dropped. Call after
        ``persist``."""
        op = self.op
        target = self.max_rows if target is None else target
        if op.num_windows <= target:
            return 0
        assert not self.dirty.any(), "evict() after persist()"
        counts = np.bincount(op.table.bucket, minlength=self.n_buckets)
        order = [b for b in np.argsort(self.last_used, kind="stable").tolist() if self.resident[b] and counts[b]]
        drop = np.zeros(self.n_buckets, dtype=bool)
        left = op.num_windows
        for b in order:
            if left <= target:
                break
            drop[b] = True
            left -= int(counts[b])
        mask = drop[op.table.bucket]
        op.drop_rows(mask)
        self.resident[drop] = False
        return int(mask.sum())

    def load_all(self) -> None:
        """Read every bucket this store's manifest names into memory (a rescale reads whole shards)."""
        self._load(np.flatnonzero(~self.resident))

    def write_imported(self, seq: int) -> int:
        """Write every window in memory (rows imported into a fresh store, e.g. by a rescale) to a
        new segment file of batch ``seq`` and drop what exceeds ``max_rows`` from memory; the
        manifest naming the segment is written by the batch's ``persist(seq)``. Returns bytes written."""
        op = self.op
        if not op.num_windows:
            return 0
        self._assign_buckets()
        self.dirty[np.unique(op.table.bucket)] = True
        written = self._flush(seq)
        self.evict()
        return written

    # ------------------------------------------------------------------ persisting
    def persist(self, seq: int, *, durable: bool = True) -> int:
        """Write the snapshot for offset ``seq``: changed buckets + manifest; returns bytes written
        for this batch (including parts written between ``step_parts``)."""
        self._compact()
        written = self._flush(seq, durable=durable, extras=True)
        blob = self._manifest(seq, self._extra_loc)
        self.io.write_atomic(manifest_uri(self.root, seq), blob, durable=durable)
        self.omitted = {name: self.omitted[name] for name in self.referenced_files() & set(self.omitted)}
        self.bytes_written = self._pending_bytes + len(blob)
        self._pending_bytes, self._part, self._part_seq = 0, 0, None
        return self.bytes_written

    def _flush(self, seq: int, *, durable: bool = True, extras: bool = False) -> int:
        """Write the dirty buckets (and, with ``extras``, the operator extras) to a new segment
        file of batch ``seq``; they are clean afterwards."""
        if self._part_seq != seq:
            self._part_seq, self._part, self._attempt = seq, 0, uuid.uuid4().hex[:12]
        op = self.op
        dirty = np.flatnonzero(self.dirty)
        sink = pa.BufferOutputStream()
        name = segment_name(seq, self._attempt, self._part)
        if extras:
            raw = pickle.dumps(extra_state(op), protocol=5) if op.bound else None
            if raw is None:
                self._extra_loc = None
            elif not (self._extra_loc and self._extra_loc[2:] == [len(raw), _checksum(raw)]):
                self._extra_loc = [name, 0, len(raw), _checksum(raw)]
                sink.write(raw)   # unchanged extras stay where the previous snapshot put them
        spans: list[tuple[int, int, int]] = []  # (bucket, start, end) in the segment
        if len(dirty) and op.bound:
            bkt = op.table.bucket if op.num_windows else np.zeros(0, np.int64)
            rows = np.flatnonzero(self.dirty[bkt]) if len(bkt) else np.zeros(0, np.int64)
            small = np.int16 if self.n_buckets <= np.iinfo(np.int16).max else np.int64  # int16: a radix sort
            rows = rows[np.argsort(bkt[rows].astype(small), kind="stable")]
            sorted_b = bkt[rows]
            lows, highs = np.searchsorted(sorted_b, dirty, side="left"), np.searchsorted(sorted_b, dirty, side="right")
            empty = highs == lows
            for b in dirty[empty].tolist():
                self.loc.pop(b, None)
            self.summary[dirty[empty]] = (0, MAX_TIME, MAX_TIME, MAX_TIME)
            if len(rows):
                omit = constant_columns(op)
                spans = _write_buckets(sink, rows_to_table(op, rows, omit), dirty, lows, highs)
                if spans and omit:
                    self.omitted[name] = omit
                # the non-empty buckets' rows tile ``rows`` in order: per-bucket minima in one pass
                timers = (*op.row_timers(), op.row_timers(expiry=False)[0])
                mins = [np.minimum.reduceat(t[rows], lows[~empty]) for t in timers]
                self.summary[dirty[~empty]] = np.column_stack([(highs - lows)[~empty], *mins])
        self.dirty[:] = False
        data = sink.getvalue()
        for b, start, end in spans:
            self.loc[b] = (name, start, end - start, _checksum(data[start:end]))
        if data.size:
            self.io.write_atomic(f"{self.root}/{name}", data, durable=durable)
            self._part += 1
        self._pending_bytes += data.size
        return data.size

    def _compact(self) -> None:
        """Past ``max_files`` segment files, rewrite the live buckets of the oldest one."""
        files = sorted({v[0] for v in self.loc.values()})
        if len(files) <= self.max_files:
            return
        oldest = files[0]
        buckets = np.array(sorted(b for b, v in self.loc.items() if v[0] == oldest), dtype=np.int64)
        self._load(buckets[~self.resident[buckets]])
        self.dirty[buckets] = True

    def _manifest(self, seq: int, extra_loc: list | None) -> bytes:
        op = self.op
        m = {
            "version": MANIFEST_VERSION, "fingerprint": self.spec.fingerprint(), "buckets_n": self.n_buckets,
            **scalars(op),
            "schema": base64.b64encode(op.input_schema.serialize().to_pybytes()).decode() if op.bound else None,
            "kinds": column_kinds(op) if op.bound else None,
            "extra": extra_loc,
            "buckets": {str(b): [*self.loc[b], *[int(x) for x in self.summary[b]]] for b in sorted(self.loc)},
            "omitted": {name: sorted(self.omitted[name]) for name in sorted(self.referenced_files() & set(self.omitted))},
        }
        body = json.dumps(m, sort_keys=True).encode()
        digest = hashlib.sha256(body).hexdigest()
        self.manifest_digest = digest
        return MANIFEST_MAGIC + digest.encode() + body

    def referenced_files(self) -> set[str]:
        return {v[0] for v in self.loc.values()}  # plus the newest segment file (operator extras)

    def snapshot_files(self) -> set[str]:
        """Every segment file the latest snapshot reads: the key buckets' and the operator extras'."""
        return self.referenced_files() | ({self._extra_loc[0]} if self._extra_loc else set())


#: Key buckets are LZ4-compressed Arrow IPC record batch messages (Spark's state store
#: compresses with LZ4 too): ~6x fewer bytes for window rows, and faster to write than the
#: uncompressed bytes. ``pa.ipc.read_record_batch`` reads compressed and plain messages alike.
_SEGMENT_IPC = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)


def _write_buckets(sink: pa.BufferOutputStream, table: pa.Table, buckets: np.ndarray, lows: np.ndarray,
                   highs: np.ndarray) -> list[tuple[int, int, int]]:
    """Write rows ``lows[i]:highs[i]`` of ``table`` (bucket ``buckets[i]``; empty ones skipped) to
    ``sink`` as one IPC record batch message each; returns (bucket, start, end) byte spans. The
    messages go through one stream writer, whose schema message precedes them unreferenced."""
    batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
    if batch is None:
        return []
    spans = []
    with pa.ipc.new_stream(sink, batch.schema, options=_SEGMENT_IPC) as writer:
        writer.write_batch(batch.slice(0, 0))  # the stream's schema goes out here, before the first span
        for b, lo, hi in zip(buckets.tolist(), lows.tolist(), highs.tolist()):
            if hi > lo:
                start = sink.tell()
                writer.write_batch(batch.slice(lo, hi - lo))
                spans.append((b, start, sink.tell()))
    return spans


def collect_garbage(io: Any, root: str, keep_from: int) -> None:
    """Delete manifests older than ``keep_from`` and segment files written before ``keep_from``
    that the manifest at ``keep_from`` does not refer to (newer manifests refer only to those or
    to newer files). Segments of batch ``keep_from`` itself are left alone: an attempt of that
    batch still running somewhere (a task Spark gave up on) may yet publish a manifest that
    refers to them. Listing is used only here, to find garbage; no reader depends on it."""
    blob = io.read_bytes(manifest_uri(root, keep_from), missing_ok=True)
    if blob is None:
        return
    body = blob[len(MANIFEST_MAGIC) + 64:]
    m = json.loads(body)
    live = {v[0] for v in m["buckets"].values()} | ({m["extra"][0]} if m.get("extra") else set())
    for info in io.list_dir(root):
        name = info.base_name
        if name.endswith(".manifest") and name[:-9].isdigit() and int(name[:-9]) < keep_from:
            io.delete(f"{root}/{name}")
        elif name.startswith("seg-") and name.endswith(".bin") and name[4:-4].split("-")[0].isdigit() \
                and int(name[4:-4].split("-")[0]) < keep_from and name not in live:
            io.delete(f"{root}/{name}")
