# Sourced by scripts/test.sh after _setup.sh: a second virtualenv for the Delta interoperability
# tests (tests/delta), on the newest pyspark that delta-spark supports.
#
# delta-spark 4.4.x declares `pyspark>=4.0.1,<=4.2.0` and its JVM package is built per Spark
# minor version (io.delta:delta-spark_<spark major.minor>_2.13), so these tests cannot run in the
# main virtualenv (newest pyspark). delta-spark 4.4.1 is on PyPI but its JVM package is not on
# Maven Central (io.delta:delta-spark_4.2_2.13 stops at 4.4.0), hence 4.4.0. The JVM package comes from Maven Central through Spark's own
# spark.jars.packages into the Ivy cache $SPARK_WINDOWING_CACHE/ivy (fetched once).
# Idempotent: re-running only installs what is missing.
DELTA_PYSPARK="4.2.0"
DELTA_SPARK="4.4.0"
DELTA_VENV="${SPARK_WINDOWING_DELTA_VENV:-$ROOT/.venv-delta}"
export SPARK_WINDOWING_CACHE="${SPARK_WINDOWING_CACHE:-$HOME/.cache/spark-windowing}"
make_venv "$DELTA_VENV"   # scripts/_setup.sh
DELTA_STAMP="$DELTA_VENV/.spark-windowing-installed"
if [ ! -f "$DELTA_STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$DELTA_STAMP" ]; then
  echo "[setup] installing spark-windowing[test,delta-test] with pyspark $DELTA_PYSPARK and delta-spark $DELTA_SPARK into $DELTA_VENV"
  install_editable "$DELTA_VENV" test,delta-test "pyspark==$DELTA_PYSPARK" "delta-spark==$DELTA_SPARK"
  touch "$DELTA_STAMP"
fi
opt_in_pth "$DELTA_VENV"
