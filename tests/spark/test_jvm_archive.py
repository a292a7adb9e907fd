"""``spark_windowing.tools.jvm_archive``: the JVM class-data sharing archive of a windowed query.

The round trip (write the archive, then a new Spark driver maps its classes from it) takes about a
minute and a half on 2 cores, so it is marked slow; the refusals run in CI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from spark_windowing.tools import jvm_archive

JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
print("rows", spark.range(10).selectExpr("sum(id)").first()[0])
spark.stop()
"""


def test_a_missing_directory_is_refused_naming_it(tmp_path):
    target = tmp_path / "no-such-dir" / "classes.jsa"
    with pytest.raises(ValueError, match="no-such-dir.*does not exist"):
        jvm_archive.write(str(target))


def test_a_failed_run_raises_with_its_output_and_leaves_no_archive(tmp_path):
    target = tmp_path / "classes.jsa"
    with pytest.raises(RuntimeError, match=r"failed \(exit code 1\)"):
        jvm_archive.write(str(target), python="/bin/false")
    assert not target.exists() and not (tmp_path / "classes.jsa.tmp").exists()


def test_the_option_names_the_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert jvm_archive.java_option("a.jsa") == f"-XX:SharedArchiveFile={tmp_path / 'a.jsa'}"


def _driver(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, **env_extra}
    done = subprocess.run([sys.executable, "-c", JOB], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows 45" in done.stdout
    return done


@pytest.mark.spark
@pytest.mark.slow
def test_a_new_driver_loads_its_classes_from_the_written_archive(tmp_path):
    archive = jvm_archive.write(str(tmp_path / "classes.jsa"))
    assert archive.size > 50 << 20 and not (tmp_path / "classes.jsa.tmp").exists()

    log = "-Xlog:class+load=info:file=" + str(tmp_path / "{}.log")
    _driver({"SPARK_SUBMIT_OPTS": f"{archive.java_option} {log.format('with')}"})
    shared = sum("shared objects file (top)" in line for line in open(tmp_path / "with.log"))
    assert shared > 5000, shared     # Spark's classes came from the archive

    # another classpath (a conf directory of its own): one warning, the classes from the jars, no failure
    (tmp_path / "conf").mkdir()
    done = _driver({"SPARK_SUBMIT_OPTS": f"{archive.java_option} {log.format('other')}",
                    "SPARK_CONF_DIR": str(tmp_path / "conf")})
    assert "Unable to use shared archive" in done.stdout + done.stderr
    assert not any("shared objects file (top)" in line for line in open(tmp_path / "other.log"))


def test_the_command_line_refuses_a_missing_directory_with_exit_code_1(tmp_path):
    done = subprocess.run([sys.executable, "-m", "spark_windowing.tools.jvm_archive",
                           str(tmp_path / "nowhere" / "a.jsa")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "nowhere" in done.stderr and "does not exist" in done.stderr


def test_the_writing_run_keeps_the_users_options_but_not_an_archive_in_use():
    opts = jvm_archive.dump_options("-Xmx2g -XX:SharedArchiveFile=/old/a.jsa -Dx='a b'", "/new/a.jsa.tmp")
    assert opts == "-Xmx2g '-Dx=a b' -XX:ArchiveClassesAtExit=/new/a.jsa.tmp"
    assert jvm_archive.dump_options("", "/a.tmp") == "-XX:ArchiveClassesAtExit=/a.tmp"
