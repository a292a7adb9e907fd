#!/usr/bin/env bash
# Quick start, command 1: set up (virtualenv, dependencies, Java) and run the demo job,
# examples/clickstream_sessions.py: generated clicks -> session windows with early, on-time and
# late panes and retractions -> Delta pane tables -> Spark SQL -> a pane timeline PNG.
# Outputs under ./out/clickstream_sessions/. Extra arguments go to the example,
# e.g. scripts/demo.sh --conf spark.windowed.keys=5
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"
cd "$ROOT"
# The JVM class archive (spark_windowing.tools.jvm_archive), when written: Spark starts faster.
ARCHIVE="${SPARK_WINDOWING_JVM_ARCHIVE:-$VENV/spark-classes.jsa}"
if [ -f "$ARCHIVE" ]; then
  export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:+$SPARK_SUBMIT_OPTS }-XX:SharedArchiveFile=$ARCHIVE"
else
  echo "[demo] tip: '$VENV/bin/python -m spark_windowing.tools.jvm_archive $ARCHIVE' (once, ~1 min)" \
       "makes every later Spark start here ~5 s faster (docs/performance.md)"
fi
exec "$VENV/bin/python" examples/clickstream_sessions.py "$@"
