"""The trigger algebra (Beam's vocabulary, plus Flink's continuous triggers), evaluated vectorized:
``tree`` (the hooks every node has, and what they see), ``leaves`` (``Default``, ``AfterCount``,
...), ``composites`` (``AfterWatermark``, ``Repeatedly``, ``AfterAny``, ...) and ``grammar`` (the
``trigger`` option's parser, ``parse_trigger``). Depends on the root leaves only.
"""

from spark_windowing._lazy import lazy_getattr

#: The trigger classes and ``parse_trigger``, as ``spark_windowing.triggers.<name>`` (the module's
#: path before it was a package), imported on first use.
__getattr__ = lazy_getattr(__name__, {
    **{name: f"{__name__}.tree" for name in ("Trigger", "Ctx", "NONE", "TRIGGER_FORMS")},
    **{name: f"{__name__}.leaves" for name in ("Default", "Never", "AfterCount", "AfterProcessingTime",
                                                "ContinuousEventTime", "ContinuousProcessingTime")},
    **{name: f"{__name__}.composites" for name in ("Repeatedly", "AfterWatermark", "AfterAny", "OrFinally",
                                                    "AfterAll", "AfterEach")},
    "parse_trigger": f"{__name__}.grammar"})
