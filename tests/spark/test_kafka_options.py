"""``source=kafka`` option errors: each names the option, the value and the accepted forms, at
load() (``stream_schema`` is what ``load()`` calls); a broker that is down and an unknown topic
fail within a bounded time, against the real broker of the ``kafka_broker`` fixture."""

from __future__ import annotations

import time

import pytest

from spark_windowing.datasource.upstreams import kafka
from spark_windowing.datasource.source.parse import parse_options
from spark_windowing.datasource.source.reader import stream_schema
from spark_windowing.errors import OptionError
from tests.spark.kafka_helpers import _mod as broker_script, new_topic

pytestmark = pytest.mark.spark


def _opts(**kw) -> dict[str, str]:
    base = {"source": "kafka", "kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
            "schema": "k string, ts long", "timestampColumn": "ts", "keyColumns": "k",
            "window": "tumbling(1 minute)", "aggregate": "count(*) AS n", "stateLocation": "/tmp/unused"}
    base.update(kw)
    return {k.lower(): v for k, v in base.items() if v is not None}


@pytest.mark.parametrize("change,option,accepted", [
    ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers", "host:port"),
    ({"subscribe": None}, "subscribe", "exactly one of subscribe"),
    ({"subscribePattern": "t.*"}, "subscribe", "exactly one of subscribe"),
    ({"subscribe": None, "subscribePattern": "t(["}, "subscribePattern", "regular expression"),
    ({"subscribe": None, "assign": "[0, 1]"}, "assign", '{"topicA": [0, 1]'),
    ({"startingOffsets": "newest"}, "startingOffsets", "earliest, latest"),
    ({"startingOffsets": '{"t": {"0": -5}}'}, "startingOffsets", "-2 earliest"),
    ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger", "an integer >= 1"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss", "true, false"),
    ({"valueFormat": "protobuf"}, "valueFormat", "json, csv, avro, raw"),
    ({"schema": None}, "schema", "the value's schema"),
    ({"valueFormat": "avro", "schema": '{"type": "record", "name": "r", "fields": [{"name": "x", "type": "map"}]}'},
     "schema", "Avro record schema"),
    ({"kafka.group.id": "g"}, "kafka.group.id", "commits nothing"),
    ({"kafka.no.such.property": "1"}, "kafka.no.such.property", "librdkafka configuration"),
    ({"kafkaConsumer.pollTimeoutMs": "soon"}, "kafkaConsumer.pollTimeoutMs", "milliseconds"),
])
def test_invalid_kafka_options_name_option_value_and_accepted_forms(change, option, accepted):
    with pytest.raises(OptionError) as e:
        parse_options(_opts(**change))
    assert e.value.option == option and accepted in e.value.accepted


def test_kafka_options_only_with_source_kafka():
    with pytest.raises(OptionError) as e:
        parse_options({"source": "generator", "window": "tumbling(1 minute)", "statelocation": "/tmp/x", "aggregate": "count(*) AS n",
                       "kafka.bootstrap.servers": "h:1"})
    assert e.value.option == "kafka.bootstrap.servers"


def test_record_columns_follow_the_value_fields():
    cfg = parse_options(_opts(schema="k string, ts long, offset long"))
    from spark_windowing.datasource.upstreams import upstream_for
    names = upstream_for(cfg).schema().names
    assert names == ["k", "ts", "offset", "key", "topic", "partition", "timestamp", "timestampType",
                     "headers", "value", "_corrupt_record"]  # the value's own `offset` field wins


def test_broker_down_fails_at_load_within_the_timeout(monkeypatch):
    monkeypatch.setattr(kafka, "METADATA_TIMEOUT_S", 2.0)
    port = broker_script.free_port()  # nothing listens there
    t0 = time.monotonic()
    with pytest.raises(OptionError) as e:
        stream_schema(_opts(**{"kafka.bootstrap.servers": f"127.0.0.1:{port}"}))
    assert time.monotonic() - t0 < 10
    assert e.value.option == "kafka.bootstrap.servers" and "no broker answered within 2 s" in e.value.why


def test_unknown_topic_fails_at_load(kafka_broker):
    known = new_topic(kafka_broker)
    with pytest.raises(OptionError) as e:
        stream_schema(_opts(**{"kafka.bootstrap.servers": kafka_broker.bootstrap, "subscribe": f"{known},nope"}))
    assert e.value.option == "subscribe" and "unknown topic(s) nope" in e.value.why and known in e.value.accepted
