"""Snapshots: exact restore, and every kind of bad snapshot is an error — never a reset."""

from __future__ import annotations

import pytest

from spark_windowing import OperatorSpec, WindowedOperator, restore, snapshot
from spark_windowing.errors import SnapshotError
from spark_windowing.testing import TestStream

KW = dict(window="session(10 milliseconds)", trigger="AfterWatermark(early=AfterCount(2))",
          aggregate="sum(v) AS s, collect_list(v) AS vs, min(name) AS first_name", key_columns="k",
          accumulation_mode="accumulating_and_retracting")


def _stream() -> TestStream:
    s = TestStream(**KW)
    s.add_elements([{"ts": 1, "k": "a", "v": 1, "name": "x"}, {"ts": 4, "k": "a", "v": 2, "name": "b"},
                    {"ts": 2, "k": "b", "v": 3, "name": "c"}])
    return s


def test_restore_then_continue_equals_uninterrupted():
    a, b = _stream(), TestStream.restore(_stream().snapshot(), **KW)
    for s in (a, b):
        s.take_panes()
        s.add_elements([{"ts": 12, "k": "a", "v": 5, "name": "a"}])
        s.advance_watermark_to(100)
    assert b.take_panes() == a.take_panes()


def _blob() -> tuple[OperatorSpec, bytes]:
    s = _stream()
    return s.spec, snapshot(s.operator)


@pytest.mark.parametrize("damage,message", [
    (lambda b: b[:-7], "checksum mismatch or truncated"),
    (lambda b: b[:-20] + bytes(x ^ 0xFF for x in b[-20:]), "checksum mismatch"),
    (lambda b: b"garbage" + b, "bad magic"),
    (lambda b: b"", "bad magic"),
])
def test_corrupt_snapshots_are_errors(damage, message):
    spec, blob = _blob()
    with pytest.raises(SnapshotError, match=message):
        restore(spec, damage(blob), where="/state/shards/0001/000000000007.snap")


def test_snapshot_under_another_spec_is_an_error_naming_the_place():
    _, blob = _blob()
    other = OperatorSpec.from_options(**{**{k: v for k, v in KW.items()}, "allowed_lateness": "1 second"})
    with pytest.raises(SnapshotError, match=r"/s/x.snap: snapshot was written by a different windowing spec"):
        restore(other, blob, where="/s/x.snap")


def test_snapshot_of_an_unbound_operator_restores():
    spec = OperatorSpec.from_options(window="tumbling(1 second)", aggregate="count(*) AS n")
    op = restore(spec, snapshot(WindowedOperator(spec)))
    assert not op.bound and op.num_windows == 0


def test_a_pickle_naming_a_module_path_of_release_0_1_0_loads():
    """A process function's panes are ``PaneBuffer`` cells, pickled in snapshots by class path;
    0.1.0 wrote ``spark_windowing.process.PaneBuffer`` (now ``spark_windowing.aggregates.process``)."""
    import pickle
    import sys

    import pyarrow as pa

    from spark_windowing.aggregates import process
    from spark_windowing.state.state_codec import loads

    buf = process.PaneBuffer()
    buf.fresh = [pa.table({"v": [1, 2], "__ts": [3, 4], "__arr": [0, 1]})]
    sys.modules["spark_windowing.process"], process.PaneBuffer.__module__ = process, "spark_windowing.process"
    try:
        old = pickle.dumps({"cells": [buf]}, protocol=5)
    finally:
        del sys.modules["spark_windowing.process"]
        process.PaneBuffer.__module__ = process.__name__
    assert b"spark_windowing.process" in old and b"aggregates" not in old
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    got = loads(old)["cells"][0]
    assert type(got) is process.PaneBuffer and got.fresh[0].equals(buf.fresh[0])


def test_a_custom_accumulation_target_of_release_0_1_0_still_loads():
    """``spark_windowing.accumulations:TopN`` is part of a query's spec (and fingerprint): a query
    restarted with the target it started with finds the class at its new path."""
    import pyarrow as pa

    from spark_windowing.aggregates.accumulations import TopN
    from spark_windowing.aggregates.binding import bind_aggregates
    from spark_windowing.aggregates.parsing import parse_aggregates

    schema = pa.schema([("v", pa.int64()), ("k", pa.string())])
    for target in ("spark_windowing.accumulations:TopN(2, v, k)", "spark_windowing.aggregates.accumulations:TopN(2, v, k)"):
        (bound,) = bind_aggregates(parse_aggregates(target), schema, target)
        assert isinstance(bound.custom, TopN)
