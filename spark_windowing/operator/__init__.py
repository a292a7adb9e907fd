"""The windowed operator, pure Python + Arrow/NumPy (never imports pyspark): ``windowed``
(``WindowedOperator``, one ``step`` per micro-batch), ``spec`` (``OperatorSpec``, the options it
runs), ``elements`` (a batch's rows read), ``assign`` (elements into windows), ``firing`` (the
trigger driver), ``output`` (panes), ``window_table`` (the row-aligned window state), ``join``
(two streams merged per key and window) and ``watermark`` (the watermark strategies). Depends on
``windows``, ``triggers`` and ``aggregates``.
"""

from spark_windowing._lazy import lazy_getattr

#: Names of the module ``spark_windowing.operator`` before it was a package, imported on first use.
__getattr__ = lazy_getattr(__name__, {
    "WindowedOperator": f"{__name__}.windowed", "StepResult": f"{__name__}.windowed",
    "EventTimes": f"{__name__}.windowed", "OperatorSpec": f"{__name__}.spec"})
