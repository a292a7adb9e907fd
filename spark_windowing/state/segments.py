"""Where a ``StateStore``'s key buckets live on storage: segment files and the manifest.

A snapshot at offset ``seq`` is a *manifest* (``<root>/<seq>.manifest``) naming, for every
non-empty key bucket, the byte range of its rows in a segment file
(``<root>/seg-<seq>-<attempt>[-<part>].bin``, a new name per attempt and never overwritten) with
its CRC-32, and a per-bucket summary (rows, earliest event-time trigger, processing-time trigger,
event-time timer), plus the operator's scalar state. The manifest is written last and carries a
SHA-256 of its body: a reader that finds it finds a complete snapshot; a missing or corrupt
manifest or segment range raises ``SnapshotError``, never a reset.

:class:`SegmentFiles` keeps that bookkeeping (``loc``, ``summary``, ``omitted``) and does the I/O:
checked ranged reads, writing a segment, encoding and checking a manifest. What the rows *mean*
(the operator's state columns) is the store's (``spark_windowing.state.store``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
import zlib
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from spark_windowing._time import MAX_TIME
from spark_windowing.errors import SnapshotError
from spark_windowing.state.state_codec import check_fingerprint

MANIFEST_MAGIC = b"SWMANIF\x01"
MANIFEST_VERSION = 2
#: Manifest versions this build reads: 1 had no ``omitted`` (every segment holds every column).
READABLE_VERSIONS = (1, 2)
#: Key buckets are LZ4-compressed Arrow IPC record batch messages (Spark's state store
#: compresses with LZ4 too): ~6x fewer bytes for window rows, and faster to write than the
#: uncompressed bytes. ``pa.ipc.read_record_batch`` reads compressed and plain messages alike.
_SEGMENT_IPC = pa.ipc.IpcWriteOptions(compression="lz4", use_threads=False)


def checksum(raw: bytes) -> str:
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


def decode_manifest(blob: bytes, uri: str) -> tuple[dict, str]:
    """The manifest's fields and its SHA-256; ``SnapshotError`` when it is not one, is corrupt or
    is of a version this build does not read."""
    if not blob.startswith(MANIFEST_MAGIC) or len(blob) < len(MANIFEST_MAGIC) + 64:
        raise SnapshotError(f"{uri}: not a spark-windowing state manifest (bad magic or truncated)")
    digest, body = blob[len(MANIFEST_MAGIC):len(MANIFEST_MAGIC) + 64].decode(), blob[len(MANIFEST_MAGIC) + 64:]
    if hashlib.sha256(body).hexdigest() != digest:
        raise SnapshotError(f"{uri}: corrupt state manifest (checksum mismatch or truncated)")
    m = json.loads(body)
    if m.get("version") not in READABLE_VERSIONS:
        raise SnapshotError(f"{uri}: manifest version {m.get('version')} is not supported "
                            f"(this build reads versions {', '.join(map(str, READABLE_VERSIONS))})")
    return m, digest


class SegmentFiles:
    """The key buckets of one store on storage (``io``, under ``root``): where each lives
    (``loc``: bucket -> (segment name, offset, length, checksum)), its summary as persisted, the
    state columns each segment leaves out, and the segment holding the operator extras."""

    def __init__(self, io: Any, root: str, n_buckets: int) -> None:
        self.io, self.root, self.n_buckets = io, root.rstrip("/"), n_buckets
        self.loc: dict[int, tuple[str, int, int, str]] = {}
        self.omitted: dict[str, frozenset[str]] = {}  # segment name -> state columns left out (constant)
        # per bucket, as persisted: [rows, event-time trigger (with expiry), processing-time trigger,
        # event-time timer (without expiry: what the source schedules batches for)]
        self.summary = np.zeros((n_buckets, 4), dtype=np.int64)
        self.summary[:, 1:] = MAX_TIME
        self.extra_loc: list | None = None
        self.pending_bytes, self._part, self._part_seq, self._attempt = 0, 0, None, ""

    # ------------------------------------------------------------------ the manifest
    def load_manifest(self, blob: bytes, uri: str, spec: Any) -> tuple[dict, str]:
        """The manifest ``blob`` (at ``uri``) and its SHA-256, checked to be written under ``spec``
        (its fingerprint) with this store's bucket count; its buckets are adopted."""
        m, digest = decode_manifest(blob, uri)
        check_fingerprint(m["fingerprint"], spec, uri)
        if m["buckets_n"] != self.n_buckets:
            raise SnapshotError(f"{uri}: state was written with {m['buckets_n']} key buckets, this query uses "
                                f"{self.n_buckets}; keep stateBuckets unchanged for a state location")
        self.adopt(m)
        return m, digest

    def adopt(self, m: dict) -> None:
        """Take the bucket locations, summaries and omitted columns of manifest ``m``."""
        self.extra_loc = list(m["extra"]) if m.get("extra") else None
        self.loc = {int(b): tuple(v[:4]) for b, v in m["buckets"].items()}  # type: ignore[misc]
        self.omitted = {name: frozenset(cols) for name, cols in m.get("omitted", {}).items()}
        self.summary[:, 0] = 0
        self.summary[:, 1:] = MAX_TIME
        for b, v in m["buckets"].items():
            self.summary[int(b)] = v[4:8]

    def encode_manifest(self, fields: dict) -> tuple[bytes, str]:
        """The manifest of ``fields`` (fingerprint, scalars, ...) plus this store's buckets and
        omitted columns, and its SHA-256."""
        m = {"version": MANIFEST_VERSION, "buckets_n": self.n_buckets, **fields, "extra": self.extra_loc,
             "buckets": {str(b): [*self.loc[b], *[int(x) for x in self.summary[b]]] for b in sorted(self.loc)},
             "omitted": {name: sorted(self.omitted[name]) for name in sorted(self.referenced_files() & set(self.omitted))}}
        body = json.dumps(m, sort_keys=True).encode()
        digest = hashlib.sha256(body).hexdigest()
        return MANIFEST_MAGIC + digest.encode() + body, digest

    def publish(self, seq: int, blob: bytes, *, durable: bool) -> int:
        """Write the manifest of batch ``seq`` (last, after its segments); returns the bytes the
        batch wrote in all and starts the next batch's count."""
        self.io.write_atomic(manifest_uri(self.root, seq), blob, durable=durable)
        self.omitted = {name: self.omitted[name] for name in self.referenced_files() & set(self.omitted)}
        written = self.pending_bytes + len(blob)
        self.pending_bytes, self._part, self._part_seq = 0, 0, None
        return written

    def referenced_files(self) -> set[str]:
        return {v[0] for v in self.loc.values()}  # plus the newest segment file (operator extras)

    def snapshot_files(self) -> set[str]:
        """Every segment file the latest snapshot reads: the key buckets' and the operator extras'."""
        return self.referenced_files() | ({self.extra_loc[0]} if self.extra_loc else set())

    def oldest_over(self, max_files: int) -> np.ndarray:
        """The buckets of the oldest segment file once more than ``max_files`` are referenced
        (to be rewritten: compaction); empty otherwise."""
        files = sorted(self.referenced_files())
        if len(files) <= max_files:
            return np.zeros(0, dtype=np.int64)
        return np.array(sorted(b for b, v in self.loc.items() if v[0] == files[0]), dtype=np.int64)

    # ------------------------------------------------------------------ reading
    def read(self, uri: str, off: int, length: int, sha: str | None, what: str) -> bytes:
        return self.read_checked(uri, off, length,
                                 lambda raw: None if sha is None or checksum(raw) == sha else what, what)

    def read_checked(self, uri: str, off: int, length: int, bad: Callable[[bytes], str | None], what: str) -> bytes:
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

    def read_buckets(self, buckets: list[int], schema_of: Callable[[frozenset[str] | None], pa.Schema]
                     ) -> list[pa.Table]:
        """The rows of ``buckets``, a table per segment file: one ranged read per file (spanning
        its wanted buckets), each bucket's bytes checked against its checksum. ``schema_of``
        gives a segment's row schema from the columns it leaves out."""
        by_file: dict[str, list[int]] = {}
        for b in buckets:
            by_file.setdefault(self.loc[b][0], []).append(b)
        tables = []
        for name, members in by_file.items():
            lo = min(self.loc[b][1] for b in members)
            hi = max(self.loc[b][1] + self.loc[b][2] for b in members)

            def first_bad(span: bytes, members: list[int] = members, lo: int = lo) -> str | None:
                for b in members:
                    _, off, length, sha = self.loc[b]
                    if sha is not None and checksum(span[off - lo:off - lo + length]) != sha:
                        return f"key bucket {b}"
                return None

            span = self.read_checked(f"{self.root}/{name}", lo, hi - lo, first_bad, "key buckets")
            schema, batches = schema_of(self.omitted.get(name)), []
            for b in members:
                _, off, length, _ = self.loc[b]
                batches.append(pa.ipc.read_record_batch(pa.py_buffer(span[off - lo:off - lo + length]), schema))
            tables.append(pa.Table.from_batches(batches, schema))
        return tables

    # ------------------------------------------------------------------ writing
    def next_segment(self, seq: int) -> str:
        """The name of the next segment file of batch ``seq`` (a new attempt id per batch)."""
        if self._part_seq != seq:
            self._part_seq, self._part, self._attempt = seq, 0, uuid.uuid4().hex[:12]
        return segment_name(seq, self._attempt, self._part)

    def write_segment(self, name: str, data: Any, spans: list[tuple[int, int, int]], *, durable: bool) -> int:
        """Write segment ``name`` (``data``; nothing when empty) and record where its buckets'
        ``spans`` (bucket, start, end) are; returns its size."""
        for b, start, end in spans:
            self.loc[b] = (name, start, end - start, checksum(data[start:end]))
        if data.size:
            self.io.write_atomic(f"{self.root}/{name}", data, durable=durable)
            self._part += 1
        self.pending_bytes += data.size
        return data.size


def write_buckets(sink: pa.BufferOutputStream, table: pa.Table, buckets: np.ndarray, lows: np.ndarray,
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
