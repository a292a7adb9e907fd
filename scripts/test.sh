#!/usr/bin/env bash
# Quick start, command 2: set up (virtualenv, dependencies, Java) and run the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not spark" -x
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"
cd "$ROOT"
set +e
"$VENV/bin/python" -m pytest -m "not slow" "$@"
rc=$?
set -e
exit $rc
