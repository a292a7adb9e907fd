"""Spark's Python processes import the installed pyspark, not the zip copy Spark puts first on
their ``PYTHONPATH``, once the environment opted in as the project's set-up does
(``python -m spark_windowing_pyspark_zip install``: a zip holds no bytecode, so every process would
compile pyspark from source). A streaming source reports, from the stream reader's planning
process (``partitions``) and from a task's worker (``read``), the file pyspark was imported from
and the ``PYTHONPATH`` Spark gave the process."""

from __future__ import annotations

import os
import sys

import pyspark
import pytest
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

pytestmark = pytest.mark.spark


def _where() -> str:
    import pyspark as imported
    return f"{imported.__file__}|{os.environ.get('PYTHONPATH', '')}"


class _Reader(DataSourceStreamReader):
    def initialOffset(self):
        return {"n": 0}

    def latestOffset(self):
        return {"n": 1}

    def partitions(self, start, end):
        return [InputPartition(_where())]

    def read(self, partition):
        yield (partition.value, _where())


class WhereSource(DataSource):
    @classmethod
    def name(cls):
        return "pyspark_where"

    def schema(self):
        return "planner string, worker string"

    def streamReader(self, schema):
        return _Reader()


def test_the_planner_and_the_workers_import_the_installed_pyspark(spark, tmp_path):
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(WhereSource)
    q = (spark.readStream.format("pyspark_where").load().writeStream.format("memory").queryName("pyspark_where")
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    q.awaitTermination()
    (planner, worker), = spark.table("pyspark_where").collect()
    installed = os.path.dirname(pyspark.__file__)
    for process in (planner, worker):
        imported, pythonpath = process.split("|", 1)
        assert os.path.join(installed, "python", "lib", "pyspark.zip") in pythonpath.split(os.pathsep)
        assert os.path.dirname(imported) == installed, imported
