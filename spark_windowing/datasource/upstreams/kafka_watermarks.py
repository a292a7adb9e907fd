"""Per-partition watermarks of the Kafka upstream (Flink's ``KafkaSource`` with per-split watermarks
and ``withIdleness``; the rule is in ``kafka``'s docstring): the state lives in the offset
(``kwm``), so a replayed batch sees the same watermark."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from spark_windowing._time import MIN_TIME


def partition_max(events: pa.Table, ts: np.ndarray, valid: np.ndarray) -> dict[str, int]:
    """Max valid event time per ``"topic:partition"`` of a shard's events."""
    if not valid.any() or "partition" not in events.column_names or "topic" not in events.column_names:
        return {}
    idx = pa.array(np.flatnonzero(valid))
    t = pa.table({"topic": events.column("topic").take(idx), "partition": events.column("partition").take(idx),
                  "ts": pa.array(ts[valid], pa.int64())})
    g = t.group_by(["topic", "partition"]).aggregate([("ts", "max")])
    return {f"{a}:{b}": int(c) for a, b, c in zip(g.column("topic").to_pylist(), g.column("partition").to_pylist(),
                                                 g.column("ts_max").to_pylist())}


def partition_keys(up: dict) -> list[str]:
    return sorted(f"{t}:{p}" for t, ps in up.items() for p in ps)


def advance_partition_state(kwm: dict | None, start_up: dict, end_up: dict, reports: list[dict],
                            batch_time: int) -> dict:
    """The offset's per-partition state for the next batch: max event time per partition (from
    the shards' reports of the previous batch) and the batch time each partition last had
    records (a partition has records in a batch when its position moves)."""
    kwm = {"max": dict((kwm or {}).get("max", {})), "last": dict((kwm or {}).get("last", {})),
           "started": (kwm or {}).get("started") or batch_time}
    for r in reports:
        for k, v in (r.get("partition_max_us") or {}).items():
            kwm["max"][k] = max(int(v), kwm["max"].get(k, MIN_TIME))
    for t, ps in end_up.items():
        for p, off in ps.items():
            s = start_up.get(t, {}).get(str(p))
            if s is None or int(off) != int(s):  # moved (a new partition counts as having records)
                kwm["last"][f"{t}:{p}"] = batch_time
    return kwm


def partition_watermark(strategy, *, current: int, kwm: dict, partitions: list[str], batch_time: int,
                        max_event: int | None, last_input: int | None) -> int:
    """The source's watermark: the minimum over active partitions of (partition max − delay);
    a partition idle for ``watermarkIdleTimeout`` does not count; with every partition idle, the
    quiet-stream rule of ``strategy`` (idle time advances it). Never below ``current``. Only
    ``bounded`` watermarks are per partition; the others are the stream's as for any source."""
    if strategy.kind != "bounded" or not partitions:
        return strategy.advance(current=current, max_event=max_event, max_column=None,
                                batch_time=batch_time, last_input=last_input)
    timeout = strategy.idle_timeout
    active = [k for k in partitions
              if timeout is None or batch_time - kwm["last"].get(k, kwm["started"]) <= timeout]
    if not active:
        return strategy.advance(current=current, max_event=max_event, max_column=None,
                                batch_time=batch_time, last_input=last_input)
    per = [kwm["max"][k] - strategy.delay if k in kwm["max"] else MIN_TIME for k in active]
    return max(current, min(per))


def with_record_columns(columns: list[str] | None) -> list[str] | None:
    """A projection plus the record columns the per-partition watermark needs."""
    if columns is None:
        return None
    return columns + [c for c in ("topic", "partition") if c not in columns]
