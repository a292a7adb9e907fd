#!/usr/bin/env bash
# A virtualenv with PyFlink for benchmarks/flink_sql.py (the Flink side of
# benchmarks/spark_vs_native.py --engines ...,flink); not needed by the tests or the demo.
# PyFlink (apache-flink) from PyPI into $ROOT/.venv-flink, and Flink's Parquet format
# (org.apache.flink:flink-sql-parquet, not part of PyFlink) from Maven Central into the project's
# cache, with the Hadoop client jars it needs. Idempotent: re-running only fetches what is missing.
# Prints the jars' paths, one a line.
source "$(dirname "${BASH_SOURCE[0]}")/_setup.sh"   # uv, make_venv, SPARK_WINDOWING_CACHE
FLINK_VERSION="2.3.0"
FLINK_VENV="${SPARK_WINDOWING_FLINK_VENV:-$ROOT/.venv-flink}"
make_venv "$FLINK_VENV" >&2
if [ ! -f "$FLINK_VENV/.flink-$FLINK_VERSION" ]; then
  echo "[setup] installing apache-flink $FLINK_VERSION into $FLINK_VENV" >&2
  "$UV" pip install --quiet --python "$FLINK_VENV/bin/python" "apache-flink==$FLINK_VERSION" >&2
  touch "$FLINK_VENV/.flink-$FLINK_VERSION"
fi
# fetch GROUP_PATH ARTIFACT VERSION: a jar from Maven Central into the cache (once); prints its path
fetch() {
  local jar="$SPARK_WINDOWING_CACHE/flink/$2-$3.jar"
  if [ ! -f "$jar" ]; then
    echo "[setup] fetching $2 $3 from Maven Central" >&2
    mkdir -p "$(dirname "$jar")"
    curl -fsSL -o "$jar.part" "https://repo1.maven.org/maven2/$1/$2/$3/$2-$3.jar"
    mv "$jar.part" "$jar"
  fi
  echo "$jar"
}
# Flink's Parquet format, and the Hadoop classes it reads Parquet with (Flink ships none)
fetch org/apache/flink flink-sql-parquet "$FLINK_VERSION"
fetch org/apache/hadoop hadoop-client-api 3.4.2
fetch org/apache/hadoop hadoop-client-runtime 3.4.2
