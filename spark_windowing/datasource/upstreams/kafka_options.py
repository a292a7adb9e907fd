"""The Kafka upstream's options (``source=kafka``), parsed at ``load()``: named as Spark's Kafka
source names them; each error names the option, the value and the accepted forms."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from spark_windowing.datasource.upstreams.kafka_values import value_schema
from spark_windowing.errors import OptionError

VALUE_FORMATS = ("json", "csv", "avro", "raw")
STARTING_FORMS = 'earliest, latest, or JSON such as {"topic": {"0": 23, "1": -2}} (-2 earliest, -1 latest)'
METADATA_TIMEOUT_S = 15.0
#: Options of this upstream besides ``kafka.*`` (lower-cased, as the option parser keys them).
OPTIONS = ("subscribe", "subscribepattern", "assign", "startingoffsets", "maxoffsetspertrigger",
           "failondataloss", "valueformat", "kafkaconsumer.polltimeoutms")


@dataclass(frozen=True)
class KafkaConfig:
    """The Kafka options, parsed at load()."""

    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: dict[str, tuple[int, ...]] | None = None
    starting: Any = "earliest"                 # "earliest" | "latest" | {topic: {partition: offset}}
    fail_on_data_loss: bool = True
    value_format: str = "json"
    client: dict[str, str] = field(default_factory=dict)   # kafka.* without the prefix
    poll_timeout_ms: int = 120_000
    by_partition: bool = False                 # keyColumns=key: shards read disjoint partitions

    def client_conf(self) -> dict[str, Any]:
        return {**self.client, "bootstrap.servers": self.bootstrap}


# ---------------------------------------------------------------------- options (driver, load())
def parse_kafka_options(options: dict[str, str], key_columns: tuple[str, ...]) -> KafkaConfig:
    """Validate the Kafka options; each error names the option, the value and the accepted forms."""
    bootstrap = options.get("kafka.bootstrap.servers")
    if not bootstrap or not str(bootstrap).strip():
        raise OptionError("kafka.bootstrap.servers", bootstrap, "host:port[,host:port...]", why="required")
    given = [n for n in ("subscribe", "subscribepattern", "assign") if str(options.get(n) or "").strip()]
    if len(given) != 1:
        raise OptionError("subscribe", options.get("subscribe"),
                          "exactly one of subscribe (topic list), subscribePattern (regex), assign (JSON)",
                          why="none given" if not given else f"several given: {', '.join(given)}")
    subscribe, pattern, assign = (), None, None
    if given[0] == "subscribe":
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
    elif given[0] == "subscribepattern":
        pattern = options["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError("subscribePattern", pattern, "a regular expression over topic names", why=str(e)) from None
    else:
        assign = _parse_assign(options["assign"])
    fmt = str(options.get("valueformat") or "json").strip().lower()
    if fmt not in VALUE_FORMATS:
        raise OptionError("valueFormat", options.get("valueformat"), ", ".join(VALUE_FORMATS))
    if fmt in ("json", "csv", "avro") and not str(options.get("schema") or "").strip():
        raise OptionError("schema", None, "the value's schema: 'name type, ...' for json/csv, the Avro schema "
                          "JSON for avro", why=f"required with valueFormat={fmt}")
    value_schema(fmt, options.get("schema"))  # a bad schema fails here, naming `schema`
    fail = str(options.get("failondataloss", "true")).strip().lower()
    if fail not in ("true", "false"):
        raise OptionError("failOnDataLoss", options.get("failondataloss"), "true, false")
    poll = options.get("kafkaconsumer.polltimeoutms", "120000")
    if not str(poll).strip().isdigit() or int(poll) < 1:
        raise OptionError("kafkaConsumer.pollTimeoutMs", poll, "a positive number of milliseconds")
    client = {k[len("kafka."):]: v for k, v in options.items()
              if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
    for reserved in ("group.id", "enable.auto.commit", "auto.offset.reset", "key.deserializer",
                     "value.deserializer", "enable.partition.eof"):
        if reserved in client:
            raise OptionError(f"kafka.{reserved}", client[reserved], "not set: the source assigns partitions "
                              "and offsets itself and commits nothing", why="not supported (as in Spark)")
    cfg = KafkaConfig(bootstrap=str(bootstrap).strip(), subscribe=subscribe, pattern=pattern, assign=assign,
                      starting=_parse_starting(options.get("startingoffsets")), fail_on_data_loss=fail == "true",
                      value_format=fmt, client=client, poll_timeout_ms=int(poll),
                      by_partition=tuple(key_columns) == ("key",))
    _check_client_conf(cfg)
    return cfg


def _parse_assign(raw: str) -> dict[str, tuple[int, ...]]:
    forms = 'JSON such as {"topicA": [0, 1], "topicB": [2]}'
    try:
        d = json.loads(raw)
        out = {str(t): tuple(int(p) for p in ps) for t, ps in d.items()}
        if not out or any(not ps or any(p < 0 for p in ps) for ps in out.values()):
            raise ValueError("empty or negative")
    except (ValueError, TypeError, AttributeError) as e:
        raise OptionError("assign", raw, forms, why=str(e)) from None
    return out


def _parse_starting(raw: str | None) -> Any:
    if raw is None or not str(raw).strip():
        return "latest"  # Spark's default for streaming queries
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        d = json.loads(text)
        out = {str(t): {str(int(p)): int(o) for p, o in ps.items()} for t, ps in d.items()}
        if any(o < -2 for ps in out.values() for o in ps.values()):
            raise ValueError("offsets are >= 0, or -2 (earliest), -1 (latest)")
    except (ValueError, TypeError, AttributeError) as e:
        raise OptionError("startingOffsets", raw, STARTING_FORMS, why=str(e)) from None
    return out


def _check_client_conf(cfg: KafkaConfig) -> None:
    """Let librdkafka validate the ``kafka.*`` options now (a typo fails at load(), not in a task)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    try:
        AdminClient({**cfg.client_conf(), "log_level": 0})
    except (KafkaException, ValueError, TypeError) as e:
        bad = next((k for k in cfg.client if k in str(e)), None)
        raise OptionError(f"kafka.{bad}" if bad else "kafka.*", cfg.client.get(bad) if bad else cfg.client,
                          "librdkafka configuration properties (CONFIGURATION.md of librdkafka)",
                          why=str(e)) from None
