"""``endOfInput=fire`` in ``window(df)`` as in ``format("windowed")``: a bounded input read with
``trigger(availableNow=True)`` ends, every window still open fires and the query stops, with no
closing event appended to the input.

``window(df)`` learns the end from Spark's offset log in the query's checkpoint (``source.ticks``,
``source.offset_log``), never from an empty batch: the DataFrame here filters out every row of one
file in the middle, so one of its batches reaches the shards empty though input is left."""

from __future__ import annotations

import json
import os
import random
from datetime import datetime, timedelta, timezone

import pytest
from deltalake import DeltaTable

import spark_windowing
from pyspark.errors import StreamingQueryException

pytestmark = pytest.mark.spark
SCHEMA = "k string, ts timestamp, keep boolean"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
GAP = 5


def _events(seed: int) -> list[list[dict]]:
    """Four files, 20 s apart; every row of file 2 has ``keep`` false (the filtered-out batch)."""
    rnd = random.Random(seed)
    return [[{"k": rnd.choice("abc"), "ts": (T0 + timedelta(seconds=f * 20 + rnd.randrange(12))).isoformat(),
              "keep": f != 2} for _ in range(15)] for f in range(4)]


def _sessions(events: list[dict]) -> list[tuple[str, int]]:
    """Reference: (key, count) per session of ``GAP`` seconds, every session (the input ended);
    sessions that touch (events exactly ``GAP`` apart) merge, as in Beam and Spark."""
    out = []
    for k in sorted({e["k"] for e in events}):
        times = sorted(datetime.fromisoformat(e["ts"]).timestamp() for e in events if e["k"] == k)
        n = 1
        for a, b in zip(times, times[1:]):
            if b - a > GAP:
                out.append((k, n))
                n = 0
            n += 1
        out.append((k, n))
    return sorted(out)


def _start(spark, tmp_path, api: str, files: list[list[dict]], **extra):
    """The query of ``api`` over ``files`` (one a batch), started with availableNow."""
    data = tmp_path / f"events-{api}"
    data.mkdir()
    for f, rows in enumerate(files):
        (data / f"{f}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(data / f"{f}.json", (1_700_000_000 + f, 1_700_000_000 + f))   # Spark reads files by their time
    chk, state = str(tmp_path / f"chk-{api}"), str(tmp_path / f"state-{api}")
    options = {"window": f"session({GAP} seconds)", "timestampColumn": "ts", "keyColumns": "k",
               "aggregate": "count(*) AS n", "endOfInput": "fire", "stateLocation": state,
               "lateDataPath": str(tmp_path / f"late-{api}")}
    if api == "format":
        reader = spark.readStream.format("windowed")
        for key, value in {"source": "json", "path": str(data), "schema": SCHEMA, "maxFilesPerTrigger": "1",
                           **options}.items():
            reader = reader.option(key, value)
        panes = reader.load()
    else:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(data)).filter("keep")
        panes = spark_windowing.window(df, checkpointLocation=extra.get("checkpoint", chk), **options)
    q = (panes.writeStream.format("windowed").option("path", str(tmp_path / f"panes-{api}"))
         .option("checkpointLocation", chk).trigger(availableNow=True).start())
    return q


def _run(spark, tmp_path, api: str, files: list[list[dict]]) -> list[tuple[str, int]]:
    """(key, count) of the sessions the query of ``api`` fired; none late."""
    q = _start(spark, tmp_path, api, files)
    q.awaitTermination(300)
    assert not q.isActive and q.exception() is None, q.exception()
    assert DeltaTable(str(tmp_path / f"late-{api}")).to_pyarrow_table().num_rows == 0   # nothing came too late
    rows = DeltaTable(str(tmp_path / f"panes-{api}" / "triggers")).to_pyarrow_table().to_pylist()
    return sorted((r["k"], r["n"]) for r in rows)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_end_of_a_bounded_input_fires_every_window_in_both_apis(spark, tmp_path, seed):
    files = _events(seed)
    kept = [e for rows in files for e in rows if e["keep"]]
    want = _sessions(kept)
    assert sum(n for _, n in want) == 45
    got_df = _run(spark, tmp_path, "window_df", files)
    got_format = _run(spark, tmp_path, "format", [rows for rows in files if rows[0]["keep"]])
    assert got_df == want and got_format == want     # the last file's sessions too: every kept event counted


def test_a_checkpoint_location_that_is_not_the_query_s_fails_it_naming_the_option(spark, tmp_path):
    other = tmp_path / "other-chk" / "offsets"
    other.mkdir(parents=True)
    (other / "0").write_text('v1\n{}\n{"logOffset":0}\n{"ticks": 1, "wm": null, "token": "x"}\n')
    q = _start(spark, tmp_path, "window_df", _events(3), checkpoint=str(tmp_path / "other-chk"))
    with pytest.raises(StreamingQueryException, match="checkpointLocation(.|\n)*not planned with this query's offsets"):
        q.awaitTermination(300)
