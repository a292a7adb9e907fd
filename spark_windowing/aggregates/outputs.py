"""The pane's aggregate columns: each bound aggregate's state rows turned into its output field."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa

from spark_windowing.aggregates import ranked
from spark_windowing.aggregates.binding import BoundAggregate
from spark_windowing.aggregates.process import PaneInfo


def outputs(aggs: list[BoundAggregate], cols: dict[str, np.ndarray], rows: np.ndarray,
            pane: Callable[[], PaneInfo] | None = None) -> list[pa.Array]:
    """The pane's aggregate columns for ``rows``, typed as ``output_fields``. ``pane`` describes
    the firing (process functions: evicts and calls the function, once per pane)."""
    arrays: list[pa.Array] = []
    for a in aggs:
        p, f = a.prefix, a.spec.func
        if a.spec.hidden:
            continue
        if f == "process":
            assert pane is not None, "process functions are only called by a firing"
            arrays += a.custom.fire(cols[p + "o"][rows], pane())
        elif f in ("count", "count_star"):
            arrays.append(pa.array(cols[p + "n"][rows], pa.int64()))
        elif f == "sum":
            n = cols[p + "n"][rows]
            arrays.append(pa.array(cols[p + "s"][rows], a.output_fields()[0].type, mask=n == 0))
        elif f == "avg":
            n = cols[p + "n"][rows]
            with np.errstate(invalid="ignore", divide="ignore"):
                arrays.append(pa.array(cols[p + "s"][rows] / np.maximum(n, 1), pa.float64(), mask=n == 0))
        elif f in ("min", "max", "first", "last"):
            n = cols[p + "n"][rows]
            v = cols[p + "v"][rows]
            t = a.output_fields()[0].type
            if v.dtype == object:
                vals = [x if k > 0 else None for x, k in zip(v.tolist(), n.tolist())]
                arrays.append(pa.array(vals, t))
            else:
                arrays.append(pa.array(v, mask=n == 0).cast(t))
        elif f == "collect_list":
            arrays.append(pa.array([list(x) for x in cols[p + "o"][rows]], a.output_fields()[0].type))
        elif f == "count_distinct":
            arrays.append(pa.array([len(x) for x in cols[p + "o"][rows]], pa.int64()))
        elif f in ranked.FUNCS:
            n, desc, names = a.spec.n, ranked.best_first(f), a.spec.labels
            arrays.append(pa.array([ranked.output(x, n, desc, names) for x in cols[p + "o"][rows]],
                                   a.output_fields()[0].type))
        elif f == ranked.FREQUENT:
            arrays.append(pa.array([ranked.frequent_output(x, a.spec.n, a.spec.labels) for x in cols[p + "o"][rows]],
                                   a.output_fields()[0].type))
        elif f == "custom":
            outs = [a.custom.output(x) for x in cols[p + "o"][rows]]
            for fld in a.output_fields():
                arrays.append(pa.array([o.get(fld.name) for o in outs], fld.type))
    return arrays
