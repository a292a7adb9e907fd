"""Test-only streaming DataSource ``format("test_panes")``: hand-made, deterministic pane rows.

Source batch ``b`` (0-based) is a pure function of ``b`` and the options, so a replayed offset
range yields the same rows (what the real windowed source guarantees). The rows
imitate ``accumulating_and_retracting`` panes of two kinds of keys::

    tumbling keys u<k>, 1-minute windows, window w covers source batches 3w, 3w+1, 3w+2
      batch:   0        1        2        3
      u0:      T0       R0 T1    .        R1 T2(final, ON_TIME)   T0 (next window) ...
    session keys s<k>, a 4-batch cycle shifted by k
      phase 0: T0 for a new session [t, t+30s)
      phase 1: the session grows to [t, t+60s): RETRACTION of the old window only (so the sink
               deletes its current row) + T0 for the new window
      phase 2: R0 T1 in the grown window;    phase 3: nothing

Options: ``batches`` (total source batches, default 12), ``keys`` (tumbling keys, default 4;
session keys: half as many, at least 1), ``shards`` (Spark partitions, default 2),
``perTrigger`` (source batches per micro-batch, default 1), ``scatter`` (``true``: rows are dealt to
partitions round-robin instead of by key, so a key's RETRACTION and TRIGGER land in different
tasks).

Offsets are ``{"batch": n}``: n source batches consumed. :func:`expected_tables` is the model the
sink tests compare the Delta tables with.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

EPOCH = datetime(2024, 1, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
US = timedelta(microseconds=1)

SCHEMA_DDL = ("user_id string, window_start timestamp, window_end timestamp, total double, n bigint, "
              "kind string, pane_timing string, pane_index bigint, is_final boolean, "
              "pane_timestamp timestamp, watermark timestamp, batch_time timestamp, batch_seq bigint")
COLUMNS = [c.split()[0] for c in SCHEMA_DDL.split(", ")]
KEY_WINDOW = ["user_id", "window_start", "window_end"]

TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    ("user_id", pa.string()), ("window_start", TS), ("window_end", TS), ("total", pa.float64()),
    ("n", pa.int64()), ("kind", pa.string()), ("pane_timing", pa.string()), ("pane_index", pa.int64()),
    ("is_final", pa.bool_()), ("pane_timestamp", TS), ("watermark", TS), ("batch_time", TS),
    ("batch_seq", pa.int64()),
])


def simulate(num_batches: int, num_keys: int) -> list[list[tuple]]:
    """The pane rows (tuples in ``COLUMNS`` order) of source batches ``0 .. num_batches-1``."""
    fired: dict[tuple, tuple] = {}          # (key, ws, we) -> last TRIGGER row
    acc: dict[tuple, tuple[float, int]] = {}
    sessions: dict[str, tuple[datetime, datetime]] = {}
    out: list[list[tuple]] = []
    for b in range(num_batches):
        rows: list[tuple] = []
        meta = (EPOCH + b * MINUTE / 3 - MINUTE if b else None, EPOCH + b * timedelta(seconds=20), b)

        def fire(key, ws, we, timing, final, _rows=rows, _meta=meta):
            prev = fired.get((key, ws, we))
            if prev is not None:
                _rows.append(prev[:5] + ("RETRACTION",) + prev[6:10] + _meta)
            total, n = acc[(key, ws, we)]
            index = 0 if prev is None else prev[7] + 1
            row = (key, ws, we, total, n, "TRIGGER", timing, index, final, we - US) + _meta
            _rows.append(row)
            fired[(key, ws, we)] = row

        for k in range(num_keys):
            key = f"u{k}"
            ws = EPOCH + (b // 3) * MINUTE
            if b % 3 == 0 and b:
                old = (key, ws - MINUTE, ws)
                if old in acc:
                    fire(*old, "ON_TIME", True)
                    del acc[old], fired[old]
            if (b + k) % 3 != 2:
                total, n = acc.get((key, ws, ws + MINUTE), (0.0, 0))
                acc[(key, ws, ws + MINUTE)] = (total + (k + 1) * (b + 1) * 0.5, n + 1)
                fire(key, ws, ws + MINUTE, "EARLY", False)
        for k in range(max(1, num_keys // 2)):
            key, phase = f"s{k}", (b + k) % 4
            if phase == 0:
                ws = EPOCH + b * MINUTE
                sessions[key] = (ws, ws + MINUTE / 2)
                acc[(key, *sessions[key])] = (float(k), 1)
                fire(key, *sessions[key], "EARLY", False)
            elif phase == 1 and key in sessions:
                ws, we = sessions[key]
                gone = fired.pop((key, ws, we))
                rows.append(gone[:5] + ("RETRACTION",) + gone[6:10] + meta)
                total, n = acc.pop((key, ws, we))
                sessions[key] = (ws, we + MINUTE / 2)
                acc[(key, *sessions[key])] = (total + 1.0, n + 1)
                fire(key, *sessions[key], "EARLY", False)
            elif phase == 2 and key in sessions:
                total, n = acc[(key, *sessions[key])]
                acc[(key, *sessions[key])] = (total + 2.0, n + 1)
                fire(key, *sessions[key], "EARLY", False)
        out.append(rows)
    return out


def expected_tables(num_batches: int, num_keys: int) -> dict[str, pa.Table]:
    """What the sink must leave in ``triggers``, ``retractions`` and ``current``."""
    batches = simulate(num_batches, num_keys)
    flat = [r for rows in batches for r in rows]
    current: dict[tuple, tuple] = {}
    for rows in batches:
        triggered = {r[:3] for r in rows if r[5] == "TRIGGER"}
        for r in rows:
            if r[5] == "TRIGGER":
                current[r[:3]] = r
            elif r[:3] not in triggered:
                current.pop(r[:3], None)

    def table(rows):
        return pa.Table.from_pylist([dict(zip(COLUMNS, r)) for r in rows], schema=ARROW_SCHEMA)

    return {"triggers": table([r for r in flat if r[5] == "TRIGGER"]),
            "retractions": table([r for r in flat if r[5] == "RETRACTION"]),
            "current": table(list(current.values()))}


class _Reader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.total = int(options.get("batches", "12"))
        self.keys = int(options.get("keys", "4"))
        self.shards = int(options.get("shards", "2"))
        self.per_trigger = int(options.get("pertrigger", "1"))
        self.scatter = options.get("scatter", "false").lower() == "true"

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.per_trigger)        # one "row" = one source batch

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if isinstance(limit, ReadAllAvailable):
            return {"batch": self.total}
        step = limit.max_rows if isinstance(limit, ReadMaxRows) else self.per_trigger
        return {"batch": min(self.total, start["batch"] + step)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if start["batch"] >= end["batch"]:
            return []
        return [InputPartition((start["batch"], end["batch"], s)) for s in range(self.shards)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        start, end, shard = partition.value
        rows = [r for batch in simulate(end, self.keys)[start:end] for r in batch]
        for i, row in enumerate(rows):
            owner = i if self.scatter else sum(row[0].encode())
            if owner % self.shards == shard:
                yield row


class PaneSource(DataSource):
    """``format("test_panes")`` (see the module docstring)."""

    @classmethod
    def name(cls) -> str:
        return "test_panes"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema) -> DataSourceStreamReader:
        return _Reader({k.lower(): v for k, v in self.options.items()})


def register(spark) -> None:
    """Register ``test_panes`` on ``spark``; the module is pickled by value (workers cannot import
    it: tests/spark is not a package on their path)."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(PaneSource)
