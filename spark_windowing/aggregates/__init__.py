"""Aggregations of the ``aggregate`` option, by life stage: ``parsing`` (the option's text into
``AggregateSpec``s; the built-ins and the custom accumulation interface are listed there),
``binding`` (bound to the upstream schema: ``BoundAggregate``), ``preaggregate`` (a batch's
(element, window) pairs into partial aggregates), ``partials`` (the partial algebra: combine,
fold into state, subtract, merge, reset) and ``outputs`` (the pane's columns). Beside them:
``ranked`` (top / bottom / most_frequent), ``process`` (process functions and evictors) and
``accumulations`` (ready-made custom accumulations). Depends on the root leaves only.
"""

from spark_windowing._lazy import lazy_getattr

#: Names of the module ``spark_windowing.aggregates`` before it was a package, imported on first use.
__getattr__ = lazy_getattr(__name__, {
    "AggregateSpec": f"{__name__}.parsing", "parse_aggregates": f"{__name__}.parsing",
    "BoundAggregate": f"{__name__}.binding", "bind_aggregates": f"{__name__}.binding"})
