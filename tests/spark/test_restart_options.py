"""A restart from a checkpoint with another window spec or ``stateBuckets`` fails naming the option:
the saved state was built under the old ones, and reading it under new ones would give other panes
silently. ``shards`` may change (the state is redistributed: tests/spark/test_rescale.py) except
for windows whose per-key state a rescale does not redistribute (count windows)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.spark._helpers import run_noop
from tests.spark.test_source import SEC, T0, _ts

pytestmark = pytest.mark.spark


def _options(tmp_path, **over: str) -> dict[str, str]:
    opts = {"source": "delta", "path": str(tmp_path / "events"), "timestampColumn": "ts", "keyColumns": "k",
            "window": "tumbling(10 seconds)", "aggregate": "sum(v) AS total", "shards": "2",
            "stateLocation": str(tmp_path / "state")}
    opts.update(over)
    return opts


@pytest.mark.parametrize("option, value, named, base", [
    ("window", "tumbling(20 seconds)", "window", {}),
    ("stateBuckets", "16", "stateBuckets", {}),
    ("shards", "3", "shards", {"window": "count(2)"}),  # count windows: per-key counts are not redistributed
])
def test_restart_with_another_option_fails_naming_it(spark, tmp_path, option, value, named, base):
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    write_deltalake(str(tmp_path / "events"), pa.table(
        {"k": ["a", "b", "c"], "ts": [_ts(T0 + i * SEC) for i in range(3)], "v": [1, 2, 3]}, schema=schema))
    run_noop(spark, _options(tmp_path, **base), str(tmp_path / "chk"))
    write_deltalake(str(tmp_path / "events"), pa.table(
        {"k": ["a"], "ts": [_ts(T0 + 4 * SEC)], "v": [4]}, schema=schema), mode="append")
    with pytest.raises(Exception, match=f"invalid option '{named}'.*stateLocation .* was written with"):
        run_noop(spark, _options(tmp_path, **{**base, option: value}), str(tmp_path / "chk"))
    run_noop(spark, _options(tmp_path, **base), str(tmp_path / "chk"))   # unchanged options go on
