"""The NumPy pre-aggregation (``aggregates._preaggregate_numpy`` over ``_groups.Groups``) gives
what Arrow's hash group-by path gives, for counts, sums, averages, minima and maxima of integer
and float columns with nulls, and for the watermark holds."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_windowing._groups import Groups, Ranges
from spark_windowing.aggregates import preaggregate as preaggregate_module
from spark_windowing.aggregates.binding import bind_aggregates
from spark_windowing.aggregates.parsing import parse_aggregates
from spark_windowing.aggregates.partials import numpy_groupable, numpy_partials
from spark_windowing.aggregates.preaggregate import preaggregate

TEXT = "sum(i) AS a, min(i) AS b, max(i) AS c, count(i) AS d, avg(f) AS e, min(f) AS g, max(f) AS h, count(*) AS n"
SCHEMA = pa.schema([("i", pa.int64()), ("f", pa.float64())])
BIG = np.iinfo(np.int64).max


@st.composite
def batches(draw):
    n = draw(st.integers(1, 60))
    labels = draw(st.lists(st.integers(0, 25), min_size=n, max_size=n))
    ints = draw(st.lists(st.one_of(st.none(), st.integers(-10 ** 9, 10 ** 9)), min_size=n, max_size=n))
    floats = draw(st.lists(st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)), min_size=n, max_size=n))
    ts = draw(st.lists(st.integers(0, 10 ** 12), min_size=n, max_size=n))
    holds = draw(st.lists(st.one_of(st.just(BIG), st.integers(0, 10 ** 12)), min_size=n, max_size=n))
    return labels, ints, floats, ts, holds


def _as_dict(rows, res, partials):
    order = np.argsort(rows)
    out = {"rows": np.asarray(rows)[order].tolist()}
    for name, values in {**res, **partials}.items():
        values = values.to_pylist() if isinstance(values, (pa.Array, pa.ChunkedArray)) else np.asarray(values).tolist()
        out[name] = [values[i] for i in order]
    return out


@settings(max_examples=200, deadline=None)
@given(batch=batches())
def test_numpy_preaggregation_equals_the_arrow_group_by(batch):
    labels, ints, floats, ts, holds = batch
    aggs = bind_aggregates(parse_aggregates(TEXT), SCHEMA, TEXT)
    pairs = pa.table({"i": pa.array(ints, pa.int64()), "f": pa.array(floats, pa.float64())})
    g, t, h = np.array(labels, np.int64), np.array(ts, np.int64), np.array(holds, np.int64)
    assert numpy_groupable(aggs, pairs)
    fast = _as_dict(*numpy_partials(aggs, pairs, Groups(g), t, h))
    known = _as_dict(*numpy_partials(aggs, pairs, _shuffled_grouping(g), t, h))
    assert known == fast
    original = preaggregate_module.numpy_groupable
    preaggregate_module.numpy_groupable = lambda *a: False  # the Arrow path of the same function
    try:
        arrow = _as_dict(*preaggregate(aggs, pairs, g, t, h))
    finally:
        preaggregate_module.numpy_groupable = original
    assert fast.keys() == arrow.keys()
    for name in fast:
        assert [None if v is None else pytest.approx(v, rel=1e-12, abs=1e-9) for v in arrow[name]] == fast[name], name


def _shuffled_grouping(labels: np.ndarray) -> Groups:
    """``labels``' grouping as ``assign_fixed`` hands it over: groups numbered in an order of
    their own (here: reversed first appearance), not by ascending label."""
    uniq, first = np.unique(labels[::-1], return_index=True)
    order = np.argsort(first)  # last-appearing label first
    rows = uniq[order]
    number = np.empty(len(uniq), dtype=np.int64)
    number[order] = np.arange(len(uniq))
    ids = number[np.searchsorted(uniq, labels)]
    return Groups.known(ids, rows, np.bincount(ids, minlength=len(rows)))


@st.composite
def ranged_batches(draw):
    """A buffer's columns and windows over it as ranges ``[lo, hi)`` (overlapping, as the buffered
    window kinds' windows are), floats with NaN (which ``Ranges`` skips in min / max)."""
    ints, floats, ts, _ = draw(batches())[1:]
    n = len(ts)
    floats = [draw(st.sampled_from([v, float("nan")])) if v is not None else None for v in floats]
    m = draw(st.integers(1, 12))
    lo = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    hi = np.array([draw(st.integers(int(a) + 1, n)) for a in lo], np.int64)
    return ints, floats, ts, lo, hi


@settings(max_examples=200, deadline=None)
@given(batch=ranged_batches())
def test_ranges_fold_as_the_expanded_pairs_do(batch):
    """The buffered kinds' partials (``Ranges``) equal the operator's (``Groups``) over the same
    windows' (element, window) pairs; min / max of floats skip NaN unless all are NaN."""
    ints, floats, ts, lo, hi = batch
    aggs = bind_aggregates(parse_aggregates(TEXT), SCHEMA, TEXT)
    pairs = pa.table({"i": pa.array(ints, pa.int64()), "f": pa.array(floats, pa.float64())})
    t = np.array(ts, np.int64)
    ranged = _as_dict(*numpy_partials(aggs, pairs, Ranges(lo, hi), t, None))
    win = np.repeat(np.arange(len(lo)), hi - lo)
    src = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)])
    no_nan = pa.table({"i": pairs.column("i").take(pa.array(src)),
                       "f": pa.array([None if v is None or v != v else v for v in np.array(floats, dtype=object)[src]],
                                     pa.float64())})
    expanded = _as_dict(*numpy_partials(aggs, no_nan, Groups(win), t[src], None))
    assert ranged.keys() == expanded.keys()
    for name in ranged:
        if name in ("a5:v", "a6:v"):  # min(f), max(f): NaN skipped, a window of NaN only gives NaN
            want = [v if v is not None or not n else float("nan") for v, n in zip(expanded[name], ranged[name[:3] + "n"])]
            assert [("nan" if v != v else v) if v is not None else None for v in ranged[name]] == \
                [("nan" if v != v else v) if v is not None else None for v in want], name
        elif name in ("a4:s", "a4:n", "a5:n", "a6:n"):   # avg(f)'s sum; counts of f include NaN values
            continue
        else:
            assert ranged[name] == expanded[name], name
    for w, (a, b) in enumerate(zip(lo, hi)):
        fs = [v for v in floats[a:b] if v is not None]
        assert ranged["a4:n"][w] == ranged["a5:n"][w] == ranged["a6:n"][w] == len(fs)
        if fs and all(v == v for v in fs):
            assert ranged["a4:s"][w] == pytest.approx(sum(fs), rel=1e-12, abs=1e-9)
        elif fs:
            assert ranged["a4:s"][w] != ranged["a4:s"][w]  # a NaN value makes the sum NaN
