#!/usr/bin/env bash
# Quick start, command 1: set up (virtualenv, dependencies, Java) and run the demo job,
# examples/clickstream_sessions.py: generated clicks -> session windows with early, on-time and
# late panes and retractions -> Delta pane tables -> Spark SQL -> a pane timeline PNG.
# Outputs under ./out/clickstream_sessions/. Extra arguments go to the example,
# e.g. scripts/demo.sh --conf spark.windowed.keys=5
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"
cd "$ROOT"
exec "$VENV/bin/python" examples/clickstream_sessions.py "$@"
