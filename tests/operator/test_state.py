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

