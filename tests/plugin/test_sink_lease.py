"""The sink's writer lease (``sink.lease``) without Spark: renewals its own query made moments
ago are not written again, yet a lease released or held by another query is always seen."""

from __future__ import annotations

import json

import pytest

from spark_windowing.datasource.sink import lease

MINUTE_US = 60_000_000


def _doc(root):
    return json.loads((root / "_writer.json").read_text())


def _take(root, app, lease_us=5 * MINUTE_US, batch=None):
    lease.take(str(root), app, lease_us=lease_us, checkpoint="/chk/" + app, batch_id=batch, query_id=None)


def test_a_fresh_own_lease_is_not_rewritten(tmp_path):
    day = 24 * 60 * MINUTE_US   # "moments ago" is within a tenth of it however slow the machine
    _take(tmp_path, "a", lease_us=day, batch=0)
    first = _doc(tmp_path)
    _take(tmp_path, "a", lease_us=day, batch=1)
    assert _doc(tmp_path) == first                        # renewed moments ago: left as it was


def test_an_own_lease_older_than_the_fraction_is_renewed(tmp_path):
    _take(tmp_path, "a", batch=0)
    doc = _doc(tmp_path)
    doc["renewedAtMs"] -= 5 * 60_000 // lease.RENEW_FRACTION + 1000   # older than a tenth of 5 minutes
    (tmp_path / "_writer.json").write_text(json.dumps(doc))
    _take(tmp_path, "a", batch=7)
    assert _doc(tmp_path)["batchId"] == 7


def test_another_query_is_refused_and_a_released_lease_is_taken_again(tmp_path, monkeypatch):
    monkeypatch.setattr(lease, "RELEASE_GRACE_S", 0.0)
    _take(tmp_path, "a")
    with pytest.raises(RuntimeError, match="another query \\(appId 'a'"):
        _take(tmp_path, "b")
    (tmp_path / "_writer.json").unlink()                  # released (the listener deletes it)
    _take(tmp_path, "b")
    assert _doc(tmp_path)["appId"] == "b"
    with pytest.raises(RuntimeError, match="another query \\(appId 'b'"):
        _take(tmp_path, "a")                               # a's own recent renewal does not let it back in


def test_writer_lease_zero_writes_every_time(tmp_path):
    _take(tmp_path, "a", lease_us=0, batch=0)
    _take(tmp_path, "a", lease_us=0, batch=1)
    assert _doc(tmp_path)["batchId"] == 1


def test_a_pipeline_full_refresh_is_told_to_remove_the_tables(tmp_path, monkeypatch):
    """SDP gives a sink's flow a new checkpoint ``<flow>/<N+1>`` on a full refresh and never
    truncates the sink: the refusal says so, and what to do."""
    monkeypatch.setattr(lease, "RELEASE_GRACE_S", 0.0)   # refused at once
    flow = "/storage/_checkpoints/pane_tables/to_tables"
    lease.take(str(tmp_path), "a", lease_us=MINUTE_US, checkpoint=f"{flow}/0", batch_id=0, query_id=None)
    with pytest.raises(RuntimeError) as refused:
        lease.take(str(tmp_path), "b", lease_us=MINUTE_US, checkpoint=f"{flow}/1", batch_id=None, query_id=None)
    assert "full refresh" in str(refused.value) and f"remove {tmp_path} before the full refresh" in str(refused.value)
    with pytest.raises(RuntimeError) as other:   # two unrelated queries: no such advice
        lease.take(str(tmp_path), "c", lease_us=MINUTE_US, checkpoint="/elsewhere/chk", batch_id=None, query_id=None)
    assert "full refresh" not in str(other.value)
