"""A custom aggregate class (``aggregate=module:Class``) from a module that is on no Python path:
``spark.sparkContext.addPyFile`` ships it to every Python process that imports it — the driver's
``load()``, the data source's planning process and the task workers — as ``docs/windows.md``
("Your own aggregate class") says."""

from __future__ import annotations

import textwrap
import uuid

import pytest

pytestmark = pytest.mark.spark


def test_an_aggregate_class_shipped_with_add_py_file(spark, tmp_path):
    module = "my_aggs_" + uuid.uuid4().hex[:8]   # a name no process has imported before
    path = tmp_path / f"{module}.py"
    path.write_text(textwrap.dedent('''
        import pyarrow as pa
        import pyarrow.compute as pc

        class Spread:
            """max(v) - min(v) of a window."""
            output_fields = [("spread", pa.float64())]

            def initial(self):
                return (None, None)

            def add(self, acc, elements):
                lo, hi = pc.min(elements.column("amount")).as_py(), pc.max(elements.column("amount")).as_py()
                return (lo if acc[0] is None else min(acc[0], lo), hi if acc[1] is None else max(acc[1], hi))

            def merge(self, accs):
                los = [a[0] for a in accs if a[0] is not None]
                his = [a[1] for a in accs if a[1] is not None]
                return (min(los) if los else None, max(his) if his else None)

            def output(self, acc):
                return {"spread": None if acc[0] is None else acc[1] - acc[0]}
    '''))
    name = "q_" + uuid.uuid4().hex[:8]

    def load():
        return (spark.readStream.format("windowed").option("source", "generator").option("totalEvents", "400")
                .option("eventsPerBatch", "200").option("keys", "3").option("timestampColumn", "event_time")
                .option("keyColumns", "user_id").option("window", "tumbling(10 seconds)")
                .option("aggregate", f"{module}:Spread, max(amount) AS hi, min(amount) AS lo")
                .option("endOfInput", "fire").option("stateLocation", str(tmp_path / "state")).load())

    with pytest.raises(Exception, match="addPyFile"):   # not shipped yet: refused at load(), saying how
        load()
    spark.sparkContext.addPyFile(str(path))
    q = (load().writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    q.awaitTermination(240)
    assert not q.isActive and q.exception() is None, q.exception()
    got = spark.table(name).collect()
    assert got and all(r.spread == r.hi - r.lo for r in got)
