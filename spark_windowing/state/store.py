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

The files and the manifest (locations, checksums, summaries, reading and writing them) are
``spark_windowing.state.segments``; this module keeps the windows in memory consistent with them
(``resident``, ``dirty``, ``last_used`` per bucket) while it steps the operator.
"""

from __future__ import annotations

import base64
import pickle
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import get_column
from spark_windowing._hash import hash_columns, mix
from spark_windowing._time import MAX_TIME
from spark_windowing.errors import SnapshotError
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.windowed import EventTimes, StepResult, WindowedOperator
from spark_windowing.state.segments import SegmentFiles, checksum, manifest_uri, write_buckets
from spark_windowing.state.state_codec import (column_kinds, constant_columns, extra_state, loads,
                                         restore_extra, restore_scalars, rows_to_table, scalars, table_to_cols)

class StateStore:
    """A ``WindowedOperator`` with bucketed, lazily loaded, incrementally persisted state."""

    def __init__(self, spec: OperatorSpec, io: Any, root: str, input_schema: pa.Schema | None = None, *,
                 buckets: int = 64, max_rows: int = 2_000_000, max_files: int = 8) -> None:
        self.spec = spec
        self.n_buckets, self.max_rows, self.max_files = int(buckets), int(max_rows), int(max_files)
        self.files = SegmentFiles(io, root, self.n_buckets)
        self.root = self.files.root
        self.summary = self.files.summary   # the same array: the files update it in place
        self.op = WindowedOperator(spec, input_schema)
        self.resident = np.ones(self.n_buckets, dtype=bool)   # a fresh store has everything in memory
        self.dirty = np.zeros(self.n_buckets, dtype=bool)
        self.last_used = np.zeros(self.n_buckets, dtype=np.int64)
        self.manifest_digest: str | None = None
        self.bytes_written = 0
        self._schema: pa.Schema | None = None

    #: storage (``SegmentFiles.io``), replaceable: a later micro-batch may bring its own handle
    io = property(lambda self: self.files.io, lambda self, io: setattr(self.files, "io", io))

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
        old_op, old_loc, was_resident = self.op, self.files.loc, self.resident.copy()
        self._load_manifest(blob, uri)
        if self.op is not old_op:   # the manifest's input schema differs: nothing in memory is reusable
            self._schema = None
            return int(was_resident.sum())
        loc = self.files.loc
        keep = was_resident & np.array([old_loc.get(b) == loc.get(b) for b in range(self.n_buckets)])
        if self.op.num_windows:
            bucket = self.op.table.bucket
            self.op.drop_rows(~(keep[bucket] & (bucket >= 0)))
        self.resident |= keep
        return int((was_resident & ~keep).sum())

    def _load_manifest(self, blob: bytes, uri: str) -> None:
        m, digest = self.files.load_manifest(blob, uri, self.spec)
        op = self.op
        restore_scalars(op, m)
        if m["schema"] is not None:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(m["schema"])))
            if not op.bound or not op.input_schema.equals(schema):
                op = self.op = WindowedOperator(self.spec, schema)
                restore_scalars(op, m)
        if m.get("extra"):
            name, off, length, sha = m["extra"]
            restore_extra(op, loads(self.files.read(f"{self.root}/{name}", off, length, sha, "operator extras")))
        self.resident[:] = False
        self.resident[[b for b in range(self.n_buckets) if b not in self.files.loc]] = True  # empty buckets
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
        return merge_parts(list(self.step_parts(events, watermark=watermark, processing_time=processing_time,
                                                batch_seq=batch_seq, key_hash=key_hash, event_times=event_times)))

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
        equals one in-memory step; each part's panes are in row-id order."""
        op = self.op
        if events is not None and events.num_rows and not op.bound:
            op.bind(events.schema)
        stepped = op.seq   # the batch last stepped: a second step of it may follow (window(df)'s end of input)
        wm, proc, seq = op.next_clock(watermark, processing_time, batch_seq)
        ev_bucket = np.zeros(0, dtype=np.int64)
        per_bucket = np.zeros(self.n_buckets, dtype=np.int64)
        if events is not None and events.num_rows and op.bound:
            ev_bucket = self.bucket_of(events, key_hash)
            per_bucket = np.bincount(ev_bucket, minlength=self.n_buckets)
        need = self._needed(per_bucket > 0, wm, proc)
        load = need & ~self.resident
        if op.num_windows + int(self.summary[load, 0].sum()) + int(per_bucket.sum()) <= self.max_rows \
                or need.sum() <= 1:
            self._load(np.flatnonzero(load))
            yield self._step_part(events, event_times, need, watermark, processing_time, batch_seq)
            return
        if self.dirty.any():
            assert stepped == seq, "persist() after every batch"
            self._flush(seq)
        parts = plan_parts(np.flatnonzero(need), self.summary[:, 0] + per_bucket, self.max_rows)
        for part in parts:
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

    def _needed(self, touched: np.ndarray, wm: int, proc: int) -> np.ndarray:
        """The buckets a step at ``wm``, ``proc`` needs: those its events ``touched`` and those with a
        due timer (by their rows when resident, else by the persisted summary)."""
        op = self.op
        if op.num_windows:
            ev, pt = op.row_timers()
            rows_due = (ev <= wm) | (pt <= proc)
            if rows_due.any():
                touched = touched | (np.bincount(op.table.bucket[rows_due], minlength=self.n_buckets) > 0)
        due_out = ((self.summary[:, 1] <= wm) | (self.summary[:, 2] <= proc)) & ~self.resident
        return touched | due_out

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
        return key_buckets(self.spec.key_columns, self.n_buckets, events, key_hash)

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
        out = self.summary[~self.resident]   # buckets out of memory: their persisted timers
        return min(ev, int(out[:, 3].min(initial=MAX_TIME))), min(pt, int(out[:, 2].min(initial=MAX_TIME)))

    # ------------------------------------------------------------------ loading and spilling
    def _load(self, buckets: np.ndarray) -> None:
        """Read ``buckets`` back into the operator (``SegmentFiles.read_buckets``)."""
        parts = [table_to_cols(self.op, t) for t in self.files.read_buckets(buckets.tolist(), self._row_schema)]
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
        drop = lru_drop(np.bincount(op.table.bucket, minlength=self.n_buckets), self.resident, self.last_used,
                        op.num_windows - target)
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
        oldest = self.files.oldest_over(self.max_files)   # compaction: rewrite the oldest file's buckets
        self._load(oldest[~self.resident[oldest]])
        self.dirty[oldest] = True
        self._flush(seq, durable=durable, extras=True)
        op = self.op
        blob, self.manifest_digest = self.files.encode_manifest({
            "fingerprint": self.spec.fingerprint(), **scalars(op),
            "schema": base64.b64encode(op.input_schema.serialize().to_pybytes()).decode() if op.bound else None,
            "kinds": column_kinds(op) if op.bound else None})
        self.bytes_written = self.files.publish(seq, blob, durable=durable)
        return self.bytes_written

    def _flush(self, seq: int, *, durable: bool = True, extras: bool = False) -> int:
        """Write the dirty buckets (and, with ``extras``, the operator extras) to a new segment
        file of batch ``seq``; they are clean afterwards."""
        op, files = self.op, self.files
        name = files.next_segment(seq)
        sink = pa.BufferOutputStream()
        if extras:
            raw = pickle.dumps(extra_state(op), protocol=5) if op.bound else None
            if raw is None:
                files.extra_loc = None
            elif not (files.extra_loc and files.extra_loc[2:] == [len(raw), checksum(raw)]):
                files.extra_loc = [name, 0, len(raw), checksum(raw)]
                sink.write(raw)   # unchanged extras stay where the previous snapshot put them
        dirty = np.flatnonzero(self.dirty)
        spans = self._write_dirty(sink, name, dirty) if len(dirty) and op.bound else []
        self.dirty[:] = False
        return files.write_segment(name, sink.getvalue(), spans, durable=durable)

    def _write_dirty(self, sink: pa.BufferOutputStream, name: str, dirty: np.ndarray) -> list[tuple[int, int, int]]:
        """The rows of the ``dirty`` buckets into ``sink`` (bucket by bucket, constant columns
        left out), their summaries updated; empty buckets leave the manifest. Returns the spans."""
        op, files = self.op, self.files
        bkt = op.table.bucket if op.num_windows else np.zeros(0, np.int64)
        rows = np.flatnonzero(self.dirty[bkt]) if len(bkt) else np.zeros(0, np.int64)
        small = np.int16 if self.n_buckets <= np.iinfo(np.int16).max else np.int64  # int16: a radix sort
        rows = rows[np.argsort(bkt[rows].astype(small), kind="stable")]
        sorted_b = bkt[rows]
        lows, highs = np.searchsorted(sorted_b, dirty, side="left"), np.searchsorted(sorted_b, dirty, side="right")
        empty = highs == lows
        for b in dirty[empty].tolist():
            files.loc.pop(b, None)
        self.summary[dirty[empty]] = (0, MAX_TIME, MAX_TIME, MAX_TIME)
        if not len(rows):
            return []
        omit = constant_columns(op)
        spans = write_buckets(sink, rows_to_table(op, rows, omit), dirty, lows, highs)
        if spans and omit:
            files.omitted[name] = omit
        # the non-empty buckets' rows tile ``rows`` in order: per-bucket minima in one pass
        timers = (*op.row_timers(), op.row_timers(expiry=False)[0])
        mins = [np.minimum.reduceat(t[rows], lows[~empty]) for t in timers]
        self.summary[dirty[~empty]] = np.column_stack([(highs - lows)[~empty], *mins])
        return spans


def plan_parts(need: np.ndarray, cost: np.ndarray, max_rows: int) -> list[list[int]]:
    """The needed buckets (in bucket order) cut into parts of at most ``max_rows`` rows by
    ``cost`` (persisted rows + events); a bucket larger than that is a part of its own."""
    parts, cur, room = [], [], max_rows
    for b in need.tolist():
        if cur and cost[b] > room:
            parts.append(cur)
            cur, room = [], max_rows
        cur.append(b)
        room -= int(cost[b])
    parts.append(cur)
    return parts


def merge_parts(parts: list[StepResult]) -> StepResult:
    """The parts of one step as the single in-memory step gives them: panes in row-id order,
    metrics summed (``state_rows`` the last part's)."""
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


def lru_drop(counts: np.ndarray, resident: np.ndarray, last_used: np.ndarray, excess: int) -> np.ndarray:
    """The resident buckets to drop, least recently used first, until ``excess`` windows (of
    ``counts`` per bucket) are gone."""
    drop = np.zeros(len(counts), dtype=bool)
    for b in np.argsort(last_used, kind="stable").tolist():
        if excess <= 0:
            break
        if resident[b] and counts[b]:
            drop[b] = True
            excess -= int(counts[b])
    return drop


def key_buckets(key_columns: tuple[str, ...], n_buckets: int, events: pa.Table,
                key_hash: np.ndarray | None = None) -> np.ndarray:
    """Key bucket per row: the key hash (the same one shards use), re-mixed so buckets and
    shards are independent."""
    if not key_columns:
        return np.zeros(events.num_rows, dtype=np.int64)
    h = key_hash if key_hash is not None else hash_columns([get_column(events, k) for k in key_columns], events.num_rows)
    return (mix(h, 0xB0C4E7) % np.uint64(n_buckets)).astype(np.int64)
