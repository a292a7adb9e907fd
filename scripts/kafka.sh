#!/usr/bin/env bash
# A local single-node Apache Kafka broker (KRaft) for the Kafka example, on 127.0.0.1 with ports
# picked at start. The broker's jars are fetched from Maven Central on first use and cached under
# ~/.cache/spark-windowing/kafka-<version>/ (scripts/kafka_broker.py).
#   scripts/kafka.sh start [DIR]   # prints the bootstrap servers (host:port)
#   scripts/kafka.sh stop [DIR]
# DIR defaults to ./.kafka (data, broker.log, bootstrap).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"
CMD="${1:-}"; DIR="${2:-$ROOT/.kafka}"
case "$CMD" in
  start|stop) exec "$VENV/bin/python" "$ROOT/scripts/kafka_broker.py" "$CMD" "$DIR" ;;
  *) echo "usage: scripts/kafka.sh start|stop [DIR]" >&2; exit 2 ;;
esac
