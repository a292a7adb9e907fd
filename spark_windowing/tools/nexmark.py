"""Write NEXMark events (``spark_windowing.datasource.upstreams.nexmark_events``) where a streaming query reads them: Parquet
files, a Delta table or a Kafka topic, all at once or at a fixed rate of events per second.

    python -m spark_windowing.tools.nexmark --events 1000000 --to parquet:/data/bids
    python -m spark_windowing.tools.nexmark --events 1000000 --kind person --to delta:/lake/persons
    python -m spark_windowing.tools.nexmark --events 600000 --rate 10000 --to kafka:127.0.0.1:9092/bids

``--events`` stream positions are generated (46 of 50 are bids, 3 auctions, 1 person: Beam's
rules), ``--chunk`` positions at a time, vectorized; each chunk is one Parquet file (named in
stream order, modification times increasing, so a file source reads them in order), one Delta
commit, or one batch of Kafka records (JSON values, the kind's id as key: a bid's ``auction``, a
person's ``id``, an auction's ``seller``; the record timestamp is the time of writing, the event
time is the value's ``date_time``: with NEXMark's 2015 event times as record timestamps, a topic's
time-based retention would delete the records as soon as they arrive).
``--rate R`` paces the chunks so that position n is written no earlier than n / R seconds after
the start (``--chunk`` defaults to R / 10 then): a source that arrives at R events per second.
Event times follow ``--events-per-second`` from ``--start-time`` as in ``source=nexmark``, so the
same options give the same rows there and here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from spark_windowing.errors import OptionError
from spark_windowing.datasource.upstreams.nexmark_events import BASE_TIME, KINDS, NexmarkConfig, generate

TARGET_FORMS = "parquet:<directory>, delta:<table uri>, or kafka:<host:port>/<topic>"
#: The Kafka record key of each kind.
KEY_COLUMN = {"bid": "auction", "person": "id", "auction": "seller"}


def parse_target(target: str) -> tuple[str, str]:
    """``kind:where`` -> (kind, where); OptionError for anything else."""
    kind, sep, where = target.partition(":")
    if not sep or kind not in ("parquet", "delta", "kafka") or not where:
        raise OptionError("--to", target, TARGET_FORMS)
    if kind == "kafka" and ("/" not in where or not where.rsplit("/", 1)[1]):
        raise OptionError("--to", target, TARGET_FORMS, why="kafka needs <bootstrap servers>/<topic>")
    return kind, where


def write(g: NexmarkConfig, kind: str, target: str, events: int, *, chunk: int | None = None,
          rate: float | None = None, progress: Callable[[int, int], None] | None = None) -> int:
    """Write the ``kind`` events among stream positions ``0..events-1`` to ``target``
    (``TARGET_FORMS``), ``chunk`` positions at a time, paced to ``rate`` positions per second of
    wall-clock time when given. Returns the rows written; ``progress(positions, rows)`` after
    each chunk."""
    if kind not in KINDS:
        raise OptionError("--kind", kind, ", ".join(KINDS))
    if rate is not None and rate <= 0:
        raise OptionError("--rate", str(rate), "a positive number of events per second")
    form, where = parse_target(target)
    chunk = chunk or (max(1, int(rate // 10)) if rate else 100_000)
    sink = {"parquet": _ParquetFiles, "delta": _DeltaTable, "kafka": _KafkaTopic}[form](where, kind)
    started, rows = time.monotonic(), 0
    try:
        for start in range(0, events, chunk):
            end = min(events, start + chunk)
            if rate:
                wait = started + start / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            table = generate(g, start, end, kind)
            sink.write(table, start)
            rows += table.num_rows
            if progress:
                progress(end, rows)
    finally:
        sink.close()
    return rows


class _ParquetFiles:
    """One file per chunk, named and timestamped in stream order."""

    def __init__(self, directory: str, kind: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def write(self, table: pa.Table, start: int) -> None:
        path = os.path.join(self.directory, f"part-{start:012d}.parquet")
        pq.write_table(table, path + ".tmp")
        os.replace(path + ".tmp", path)   # a file source never sees half a file

    def close(self) -> None:
        pass


class _DeltaTable:
    """One append commit per chunk (delta-rs)."""

    def __init__(self, uri: str, kind: str) -> None:
        self.uri = uri

    def write(self, table: pa.Table, start: int) -> None:
        from deltalake import write_deltalake
        write_deltalake(self.uri, table, mode="append")

    def close(self) -> None:
        pass


class _KafkaTopic:
    """JSON records keyed by the kind's id (the event time in the value: see the module docstring)."""

    def __init__(self, where: str, kind: str) -> None:
        from confluent_kafka import Producer
        bootstrap, self.topic = where.rsplit("/", 1)
        self.key = KEY_COLUMN[kind]
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
        self.errors: list = []

    def write(self, table: pa.Table, start: int) -> None:
        for row in table.to_pylist():   # the client takes one record per call
            value = json.dumps(row, default=_iso).encode()
            while True:
                try:
                    self.producer.produce(self.topic, value, str(row[self.key]).encode(), on_delivery=self._delivered)
                    break
                except BufferError:       # the local queue is full: let it drain
                    self.producer.poll(0.1)
            self.producer.poll(0)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err)

    def close(self) -> None:
        left = self.producer.flush(60)
        if left or self.errors:
            raise RuntimeError(f"{left} Kafka record(s) not delivered to {self.topic!r} within 60 s, "
                               f"{len(self.errors)} refused (first: {self.errors[:1]})")


def _iso(value):
    return value.isoformat()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spark_windowing.tools.nexmark", description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, required=True, help="stream positions (46 of 50 are bids)")
    ap.add_argument("--kind", default="bid", choices=KINDS)
    ap.add_argument("--to", required=True, help=TARGET_FORMS)
    ap.add_argument("--chunk", type=int, help="positions per file / commit / batch (default 100,000; R/10 with --rate)")
    ap.add_argument("--rate", type=float, help="wall-clock events per second (default: as fast as it goes)")
    ap.add_argument("--events-per-second", type=int, default=10_000, help="event-time rate (source=nexmark's eventsPerSecond)")
    ap.add_argument("--start-time", type=int, default=BASE_TIME, help="the first event's time, µs since the epoch")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    g = NexmarkConfig(events_per_second=args.events_per_second, total_events=args.events, start_time=args.start_time,
                      seed=args.seed)

    def progress(done: int, rows: int) -> None:
        print(f"\r{done:,} / {args.events:,} positions, {rows:,} {args.kind} rows", end="", file=sys.stderr)
    try:
        rows = write(g, args.kind, args.to, args.events, chunk=args.chunk, rate=args.rate, progress=progress)
    except OptionError as e:
        ap.error(str(e))
    print(f"\nwrote {rows:,} {args.kind} rows to {args.to}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
