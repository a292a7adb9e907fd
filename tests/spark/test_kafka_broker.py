"""The test broker's harness (``scripts/kafka_broker.py``): the cluster id it formats the storage
with. One URL-safe base64 letter in 64 is ``-``, and an id beginning with it was once read by
``kafka-storage format -t ID`` as an option, failing the session's broker at random."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.spark.kafka_helpers import _mod as broker_script


def test_cluster_ids_are_random_kafka_uuids_that_never_begin_with_a_dash():
    ids = [broker_script.cluster_id() for _ in range(20_000)]  # ~312 would begin with "-" by chance
    assert len(set(ids)) == len(ids)
    for text in ids:
        assert not text.startswith("-"), text
        raw = base64.urlsafe_b64decode(text + "==")
        assert len(raw) == 16 and uuid.UUID(bytes=raw).version == 4, text


@pytest.mark.spark
def test_the_storage_is_formatted_for_an_id_that_begins_with_a_dash(tmp_path):
    broker = broker_script.KafkaBroker(tmp_path)
    config = broker._config(broker_script.free_port(), broker_script.free_port())
    raw = bytes([0xF8]) + uuid.uuid4().bytes[1:]  # first six bits 111110: base64 letter 62, "-"
    dashed = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert dashed.startswith("-")
    broker.format_storage(config, dashed)
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert f"cluster.id={dashed}\n" in meta
