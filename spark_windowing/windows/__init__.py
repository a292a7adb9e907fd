"""The window kinds: ``kinds`` (the ``window`` option: ``WindowFn`` and its subclasses, and
``parse_window``), and the buffered kinds, whose windows close on element counts rather than on
time alone: ``buffered`` (their common buffer), ``mixed`` (``count(n, every m)``, ``sliding(d, n
elements)``) and ``record_sliding``. Depends on ``aggregates`` (a closed buffered window is
aggregated when it closes).
"""

from spark_windowing._lazy import lazy_getattr

#: The ``kinds`` names, as ``spark_windowing.windows.<name>`` (the module's path before it was a
#: package), imported on first use.
__getattr__ = lazy_getattr(__name__, {name: f"{__name__}.kinds" for name in (
    "WindowFn", "Tumbling", "Sliding", "Cumulate", "Session", "CountWindow", "TimestampCount", "CountEvery",
    "SlidingEvery", "RecordSliding", "GlobalWindow", "Inherit", "parse_window")})
