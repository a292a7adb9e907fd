"""What Spark's planning process of a windowed query imports: it starts one per query (the
stream reader's), and a query's start waits for its imports. pandas (~0.2 s) is not among them:
the step imports it where its hashing serves (``_arrow.pd``), and pyarrow's
``Schema.empty_table`` would import it (``_arrow.empty_table`` does not)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

_PLAN = """
import sys
from pyspark.sql.types import StructType
from spark_windowing.datasource._plugin import WindowedDataSource
source = WindowedDataSource({{"source": "parquet", "path": {path!r}, "timestampcolumn": "ts", "keycolumns": "k",
                             "window": "tumbling(1 minute)", "aggregate": "sum(v) AS total, count(*) AS n",
                             "statelocation": {state!r}}})
reader = source.streamReader(source.schema())
reader.latestOffset(reader.initialOffset(), reader.getDefaultReadLimit())
print("pandas" in sys.modules)
"""


def test_planning_a_windowed_query_does_not_import_pandas(tmp_path):
    data = tmp_path / "events"
    data.mkdir()
    pq.write_table(pa.table({"k": [1, 2], "ts": pa.array([0, 1], pa.timestamp("us")), "v": [1.0, 2.0]}),
                   data / "0.parquet")
    code = _PLAN.format(path=str(data), state=str(tmp_path / "state"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
