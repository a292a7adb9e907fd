"""Rescaling through the source's reader, without Spark: the driver calls (``latestOffset``,
``partitions``, ``commit``) and every partition's ``read`` as Spark makes them, with a reader of
another ``shards`` after a "restart" (a new reader on the same state location, continuing from
the last offset). Panes per batch equal those of a run that never rescaled; a batch replayed
after a rescale gives the same panes; garbage collection removes the shard directories a rescale
down left behind, once the rescale has committed; an offset without a shard count (written
before offsets carried one) ran with the state location's recorded count."""

from __future__ import annotations

import json
import os

from spark_windowing.datasource.storage import layout
from spark_windowing.datasource.source.pipeline import GC_EVERY
from spark_windowing.datasource.source.reader import WindowedStreamReader, stream_schema


def _options(state: str, shards: int) -> dict[str, str]:
    return {"source": "generator", "eventsPerBatch": "300", "keys": "40", "eventInterval": "50 milliseconds",
            "disorder": "3 seconds", "lateFraction": "0.05", "window": "session(2 seconds)",
            "trigger": "AfterWatermark(early=AfterCount(3), late=AfterCount(1))",
            "accumulationMode": "accumulating_and_retracting", "allowedLateness": "2 seconds",
            "aggregate": "sum(amount) AS s, count(*) AS n", "timestampColumn": "event_time",
            "keyColumns": "user_id", "watermark": "bounded(1 second)", "shards": str(shards),
            "stateLocation": state}


def _batch(reader, start):
    end = json.loads(json.dumps(reader.latestOffset(start, reader.getDefaultReadLimit())))
    rows = [r for p in reader.partitions(start, end) for b in reader.read(p) for r in b.to_pylist()]
    return end, sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_time")) for r in rows)


def _run(state: str, counts: list[int]) -> tuple[list[list[str]], list[dict]]:
    """One batch per entry of ``counts`` (the shard count of that batch's reader); a new reader
    whenever the count changes. Returns each batch's panes and end offsets."""
    panes, ends, reader, start = [], [], None, None
    for shards in counts:
        if reader is None or reader.cfg.shards != shards:
            options = _options(state, shards)
            reader = WindowedStreamReader(options, stream_schema(options))
            start = start or reader.initialOffset()
        end, rows = _batch(reader, start)
        reader.commit(end)
        panes.append(rows)
        ends.append(end)
        start = end
    return panes, ends


def test_rescaled_reader_gives_the_panes_of_an_unrescaled_one(tmp_path):
    counts = [2] * 4 + [5] * 4 + [3] * 4
    plain, _ = _run(str(tmp_path / "plain"), [2] * len(counts))
    rescaled, ends = _run(str(tmp_path / "rescaled"), counts)
    assert [e["shards"] for e in ends] == counts
    assert sum(map(len, plain)) > 100 and any("RETRACTION" in r for b in plain for r in b)
    assert rescaled == plain
    assert GC_EVERY <= len(counts)  # the commit of batch GC_EVERY (3 shards) collected garbage
    assert sorted(os.listdir(tmp_path / "rescaled" / layout.SHARDS_DIR)) == ["0000", "0001", "0002"]


def test_a_replayed_rescale_batch_gives_the_same_panes(tmp_path):
    state = str(tmp_path / "state")
    _, ends = _run(state, [2, 2, 2])
    options = _options(state, 4)
    reader = WindowedStreamReader(options, stream_schema(options))
    end, first = _batch(reader, ends[-1])
    replay = [r for p in reader.partitions(ends[-1], end) for b in reader.read(p) for r in b.to_pylist()]
    assert end["shards"] == 4 and first
    assert sorted(repr(sorted((k, v) for k, v in r.items() if k != "batch_time")) for r in replay) == first


def test_an_offset_without_a_shard_count_ran_with_the_recorded_one(tmp_path):
    state = str(tmp_path / "state")
    _, ends = _run(state, [3, 3])
    legacy = {k: v for k, v in ends[-1].items() if k != "shards"}
    options = _options(state, 2)
    reader = WindowedStreamReader(options, stream_schema(options))
    end = reader.latestOffset(legacy, reader.getDefaultReadLimit())
    parts = reader.partitions(legacy, end)
    assert end["shards"] == 2 and len(parts) == 2 and parts[0].start["shards"] == 3
