"""Input-less micro-batches through Spark against the reference model (issue 13, defect 4).

Random keyed events over Delta versions, one version per micro-batch (``maxFilesPerTrigger=1``,
``availableNow``), then the micro-batches the source schedules without input because a timer is
due. Spark's panes must equal what ``tests/operator/reference.py`` — an independent
element-at-a-time model — gives for the same micro-batches (events, watermark, batch time from the
offset log), and every session whose end the final watermark passed must have fired.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_windowing._time import MIN_TIME
from tests.spark._helpers import offsets, rows, run_panes
from tests.spark.test_source import SEC, T0, _ts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
from reference import ReferenceStream  # noqa: E402

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
AGG = "count(*) AS n, sum(v) AS s"


def _bundles(seed: int, versions: int = 4, per: int = 60) -> list[list[dict]]:
    """Events 100 ms apart on 6 keys, disorder up to 1.5 s (below the watermark's 2 s bound)."""
    rnd = random.Random(seed)
    out, i = [], 0
    for _ in range(versions):
        bundle = []
        for _ in range(per):
            i += 1
            bundle.append({"k": f"k{rnd.randrange(6)}", "ts": T0 + i * 100_000 - rnd.randrange(1_500_000),
                           "v": rnd.randrange(1, 50)})
        out.append(bundle)
    return out


@pytest.mark.parametrize("seed,window,trigger,extra", [
    (1, "session(1 second)", "Default()", {}),
    (2, "session(700 milliseconds)", "AfterWatermark(early=AfterCount(3))", {"shards": "1"}),
    (3, "session(1 second)", "ContinuousEventTime(500 milliseconds)",
     {"stateMemoryRows": "4", "stateBuckets": "8"}),
])
def test_input_less_batches_fire_what_the_reference_model_fires(spark, tmp_path, seed, window, trigger, extra):
    bundles = _bundles(seed)
    for b in bundles:
        write_deltalake(str(tmp_path / "events"), pa.Table.from_pylist(
            [{**r, "ts": _ts(r["ts"])} for r in b], schema=SCHEMA), mode="append")
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": window, "trigger": trigger, "aggregate": AGG, "watermark": "bounded(2 seconds)",
            "accumulationMode": "accumulating", "maxFilesPerTrigger": "1",
            "stateLocation": str(tmp_path / "state"), **extra}
    chk = str(tmp_path / "chk")
    got = run_panes(spark, opts, chk)

    ref = ReferenceStream(window=window, trigger=trigger, aggregate=AGG, key_columns="k",
                          accumulation_mode="accumulating", timestamp_unit="us")
    batches = offsets(chk)
    input_less = []
    for start, end in batches:
        first = 0 if start is None else start["up"] + 1
        events = [r for v in range(first, end["up"] + 1) for r in bundles[v]]
        if start is not None and not events:
            input_less.append(end["seq"])
        ref.add_elements(events, watermark=None if end["wm"] <= MIN_TIME else end["wm"],
                         processing_time=end["bt"])
    want = pa.Table.from_pylist([{c: p[c] for c in got.column_names} for p in ref.take_panes()])
    assert rows(got, drop=("batch_seq",)) == rows(want, drop=("batch_seq",))

    # the path under test was taken: an input-less batch fired panes
    fired = set(got.column("batch_seq").to_pylist())
    assert input_less and fired & set(input_less)
    # every session whose end the final watermark passed has fired (sessions from all events)
    final_wm = batches[-1][1]["wm"]
    fired_windows = {(r["k"], r["window_end"]) for r in rows(got)}
    everything = ReferenceStream(window=window, aggregate=AGG, key_columns="k", timestamp_unit="us")
    everything.add_elements([r for b in bundles for r in b])
    everything.advance_watermark_to(final_wm)
    closed = [(p["k"], p["window_end"]) for p in everything.take_panes()]
    assert closed and set(closed) <= fired_windows
