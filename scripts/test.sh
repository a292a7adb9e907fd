#!/usr/bin/env bash
# Quick start, command 2: set up (virtualenvs, dependencies, Java) and run the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not spark" -x
#
# Two steps, one command:
#   1. the whole suite on the newest pyspark (.venv); tests/delta is skipped there (no delta-spark);
#   2. the Delta interoperability tests (tests/delta: delta-spark, DuckDB's Delta extension) in
#      .venv-delta, on the newest pyspark that delta-spark supports (see scripts/_setup_delta.sh).
#      Step 2 runs when no arguments are given, or with SPARK_WINDOWING_DELTA_TESTS=1 (same args).
#
# Step 1 runs in SPARK_WINDOWING_TEST_WORKERS (default 2) pytest-xdist processes, a test file per
# process at a time (--dist loadfile: a file's module fixtures are built once), the longest files
# first (tests/conftest.py LONGEST_FIRST, --no-loadscope-reorder); much of it waits
# on JVMs, brokers and killed processes, so two processes on two cores finish sooner (34:51 ->
# 25:40 on 2026-11-25). SPARK_WINDOWING_TEST_WORKERS=0 runs it in one process. Step 2 runs in one
# process: its delta-spark queries keep the JVM busy, and two of them at once took 9:07 against 7:21.
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"
cd "$ROOT"
DELTA_STEP=""
if [ $# -eq 0 ] || [ "${SPARK_WINDOWING_DELTA_TESTS:-}" = 1 ]; then
  DELTA_STEP=1   # its virtualenv is set up in the background while step 1 runs
  DELTA_SETUP_LOG="$(mktemp)"
  # at the lowest CPU priority: installing it compiles pyspark's and pandas' bytecode, which on 2
  # cores delayed step 1's first Python workers past Spark's fixed 10 s connect-back timeout
  # ("Python worker failed to connect back", 2 of ~12 runs on 2026-11-26/27)
  ( renice -n 19 "$BASHPID" > /dev/null 2>&1 || true; source "$ROOT/scripts/_setup_delta.sh" ) > "$DELTA_SETUP_LOG" 2>&1 &
  DELTA_SETUP_PID=$!
fi
PARALLEL=(-n "${SPARK_WINDOWING_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder)
# Step 1's Spark driver JVMs (its session's and those of the jobs its tests start as processes of
# their own: spark-submit passes SPARK_SUBMIT_OPTS to the JVM it starts) compile with C1 only and
# one GC thread: they live seconds to minutes on small data, where C2's compiler threads cost more
# CPU than they win (test_source.py: 138 CPU-s instead of 164; two fresh-process tests: 28 user-s
# instead of 43). Not in step 2: delta-spark's queries ran 40-100% longer with it (2026-11-25).
C1_JVM="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# ... and map Spark's classes from a class-data-sharing archive made once per virtualenv
# (scripts/_spark_cds.py): a fresh local job with one query took 11-13 CPU-s instead of 19-22, and
# test_window_df_crash.py (three fresh jobs) 84 CPU-s / 61 s instead of 115 / 88 (2026-12-07).
# A SPARK_SUBMIT_OPTS of the caller's is used as it is, and no archive is made for it.
if [ -z "${SPARK_SUBMIT_OPTS+set}" ]; then
  CDS_ARCHIVE="$("$VENV/bin/python" "$ROOT/scripts/_spark_cds.py" "$VENV" "$C1_JVM" || true)"
  SPARK_SUBMIT_OPTS="$C1_JVM${CDS_ARCHIVE:+ -XX:SharedArchiveFile=$CDS_ARCHIVE -Xlog:cds*=off}"
fi
set +e
SPARK_SUBMIT_OPTS="$SPARK_SUBMIT_OPTS" "$VENV/bin/python" -m pytest -m "not slow" "${PARALLEL[@]}" "$@"
rc=$?
set -e
if [ -n "$DELTA_STEP" ]; then
  if ! wait "$DELTA_SETUP_PID"; then
    cat "$DELTA_SETUP_LOG"
    echo "[setup] setting up the Delta virtualenv failed (scripts/_setup_delta.sh)" >&2
    exit 1
  fi
  cat "$DELTA_SETUP_LOG"
  source "$ROOT/scripts/_setup_delta.sh"   # done already: sets DELTA_VENV
  export PYSPARK_PYTHON="$DELTA_VENV/bin/python" PYSPARK_DRIVER_PYTHON="$DELTA_VENV/bin/python"
  set +e
  if [ $# -eq 0 ]; then
    "$DELTA_VENV/bin/python" -m pytest -m "not slow" -p no:xdist tests/delta
  else
    "$DELTA_VENV/bin/python" -m pytest -m "not slow" -p no:xdist "$@"
  fi
  rc_delta=$?
  set -e
  [ $rc -ne 0 ] || rc=$rc_delta
fi
exit $rc
