"""The Delta jars resolve through the project's Ivy settings whatever the user's ``~/.m2`` holds.

A Maven cache normally holds poms without their jars (any Maven build leaves them). Spark's default
resolver chain tries ``~/.m2`` first and fails on them (``download failed: ...!jsr305.jar``, then
``JAVA_GATEWAY_EXITED``). The session here runs with such a ``~/.m2`` (``-Duser.home`` pointed at
a directory whose ``.m2`` has poms, and no jars, for modules of delta-spark's dependency tree) and
must still start, write a Delta table with delta-spark and read it back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent

#: Modules of delta-spark's (and Spark's own) dependency trees, as ``group/artifact/version``.
POISONED = ("com/google/code/findbugs/jsr305/3.0.2", "org/slf4j/slf4j-api/2.0.17",
            "io/delta/delta-storage/4.4.0", "org/antlr/antlr4-runtime/4.13.1")

JOB = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import delta_session
    home, out = sys.argv[2], sys.argv[3]
    spark = (delta_session.builder("ivy-settings")
             .config("spark.driver.extraJavaOptions", f"-Duser.home={home}").getOrCreate())
    assert spark.sparkContext._jvm.System.getProperty("user.home") == home
    spark.range(5).write.format("delta").save(out)
    print("ROWS", spark.read.format("delta").load(out).count())
    spark.stop()
""")


def _poisoned_home(root: Path) -> Path:
    for module in POISONED:
        group_path, artifact, ver = module.rsplit("/", 2)
        d = root / ".m2" / "repository" / group_path / artifact / ver
        d.mkdir(parents=True)
        group = group_path.replace("/", ".")
        (d / f"{artifact}-{ver}.pom").write_text(
            f"<project><modelVersion>4.0.0</modelVersion><groupId>{group}</groupId>"
            f"<artifactId>{artifact}</artifactId><version>{ver}</version></project>\n")
    return root


def test_delta_jars_resolve_with_a_maven_cache_of_poms_without_jars(tmp_path):
    home = _poisoned_home(tmp_path / "home")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", JOB, str(HERE), str(home), str(tmp_path / "t")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ROWS 5" in done.stdout.splitlines()
