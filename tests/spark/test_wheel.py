"""The install path a user takes: the wheel built from this checkout, installed with its ``spark``
extra into a bare virtualenv outside the checkout, runs the README's own-project example (the python
block after ``<!-- own-project-example -->``) from an empty temporary directory. A module or data
file missing from the wheel, a wrong dependency range or an example that needs the repository
fails here, and so does a wheel that changes the interpreters of the environment that never
import it. No package index is reached: the wheel is built and installed from the wheelhouse
that ``scripts/_setup.sh`` fills (``$SPARK_WINDOWING_CACHE/wheelhouse``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- own-project-example -->"


def own_project_example(readme: str) -> str:
    """The python code block that follows the marker line in the README."""
    _, marker, rest = readme.partition(MARKER)
    assert marker, f"README.md has no {MARKER} line"
    found = re.match(r"\s*```python\n(.*?)\n```", rest, re.S)
    assert found, f"no python code block right after {MARKER}"
    return found.group(1)


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _wheelhouse() -> Path:
    cache = os.environ.get("SPARK_WINDOWING_CACHE") or str(Path.home() / ".cache" / "spark-windowing")
    house = Path(cache) / "wheelhouse"
    assert (house / ".complete").exists(), f"no wheelhouse at {house}: scripts/test.sh (scripts/_setup.sh) fills it"
    return house


def _sys_path(python: str, work: Path, env: dict) -> list[str]:
    return _run([python, "-c", "import sys; print(chr(10).join(sys.path))"], cwd=work, env=env).stdout.splitlines()


def _check_no_environment_wide_change(python: str, wheel: Path, work: Path, env: dict) -> None:
    """The wheel installs no interpreter-start hook: an interpreter that never imports the package,
    started as Spark starts its workers (pyspark's zips first on PYTHONPATH), has the same
    ``sys.path`` with and without the package installed. The opt-in command then drops the zips
    (Spark's Python processes import the installed, compiled pyspark) and ``remove`` undoes it."""
    import zipfile
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".pth")]
    installed = _run([python, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                     cwd=work, env=env).stdout.strip()
    zips = os.pathsep.join(str(z) for z in sorted((Path(installed) / "python" / "lib").glob("*.zip")))
    assert "pyspark.zip" in zips
    as_spark = {**env, "PYTHONPATH": zips}
    with_package = _sys_path(python, work, as_spark)
    assert set(zips.split(os.pathsep)) <= set(with_package)
    opt_in = [python, "-m", "spark_windowing_pyspark_zip"]
    _run([*opt_in, "install"], cwd=work, env=env)
    worker = _run([python, "-c", "import pyspark, py4j; print(pyspark.__file__, py4j.__file__)"],
                  cwd=work, env=as_spark).stdout
    assert ".zip" not in worker and worker.startswith(installed), worker
    _run([*opt_in, "remove"], cwd=work, env=env)
    assert _sys_path(python, work, as_spark) == with_package
    _run([python, "-m", "pip", "uninstall", "--quiet", "--yes", "spark-windowing"], cwd=work, env=env)
    assert _sys_path(python, work, as_spark) == with_package


def test_the_wheel_runs_the_readme_example_in_a_bare_virtualenv(tmp_path):
    offline = ["--no-index", "--find-links", str(_wheelhouse())]
    dist = tmp_path / "dist"
    # From a copy without the checkout's build/ (setuptools builds in place and would reuse a stale
    # build/lib: a file removed from the project would still be in the wheel).
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        "build", ".venv*", ".git", "*.egg-info", "__pycache__", "spark-warehouse", "site", "tests", "benchmarks", ".hypothesis", ".pytest_cache"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *offline, "-w", str(dist), str(source)], timeout=300)
    wheel, = dist.glob("spark_windowing-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    _run([python, "-m", "pip", "install", "--quiet", *offline, f"{wheel}[spark]"], timeout=900)

    work = tmp_path / "project"
    work.mkdir()
    (work / "example.py").write_text(own_project_example((ROOT / "README.md").read_text()))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
    done = _run([python, "example.py"], cwd=work, env=env, timeout=600)
    imported = _run([python, "-c", "import spark_windowing, pyspark_windowed; print(spark_windowing.__file__)"],
                    cwd=work, env=env).stdout
    assert str(env_dir) in imported and str(ROOT) not in imported   # the wheel's copy, not the checkout's
    _check_no_environment_wide_change(python, wheel, work, env)
    assert "micro-batches: 4" in done.stdout                            # what the example prints
    assert "too_late" in done.stdout and "malformed" in done.stdout    # its late table, by reason
    assert "Warning" not in done.stderr, done.stderr[-2000:]          # quiet: no dependency warnings
