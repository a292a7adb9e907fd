"""spark_windowing: Beam/Flink-style event-time windowing on Arrow — the operator behind the
``windowed`` Spark data source. Pure Python + Arrow/NumPy; never imports pyspark.

>>> from spark_windowing import OperatorSpec, WindowedOperator
>>> spec = OperatorSpec.from_options(window="sliding(10 minutes, 2 minutes)", aggregate="count(*) AS n",
...                                  trigger="AfterWatermark(early=AfterCount(100))")
>>> op = WindowedOperator(spec)

See ``spark_windowing.testing.TestStream`` to test a configuration without Spark.
"""

from spark_windowing.errors import OptionError, ProcessError, SnapshotError, WindowingError
from spark_windowing.operator import StepResult, WindowedOperator
from spark_windowing.process import ProcessContext
from spark_windowing.spec import OperatorSpec
from spark_windowing.state import restore, snapshot

__all__ = ["OperatorSpec", "WindowedOperator", "StepResult", "snapshot", "restore", "OptionError",
           "SnapshotError", "WindowingError", "ProcessContext", "ProcessError"]
__version__ = "0.1.0"
