"""Spark's Python workers import a pip-installed pyspark from its installed, compiled files.

Spark starts every Python process it needs (the stream reader's planner, each task's worker, the
sink's writer and commit) with ``$SPARK_HOME/python/lib/pyspark.zip`` and
``$SPARK_HOME/python/lib/py4j-<version>-src.zip`` first on ``PYTHONPATH``
(``PythonUtils.sparkPythonPath``, merged first by ``PythonWorkerFactory``). With pyspark installed
by pip, ``SPARK_HOME`` is the installed ``pyspark`` package itself, so the zips are copies of
packages installed beside them. A zip holds no bytecode and Python caches none for it: every new
Python process Spark starts compiles pyspark's modules from source. Measured on a 2-core machine
(2026-11-28): importing the stream reader's planner module takes 0.59 s from the zip and 0.19 s
from site-packages; a query's start (Spark starts a planner process per streaming query) took
0.83 s before the first trigger, 0.42 s without the zip; a session's first micro-batch 7.1 s,
4.7 s without it (``benchmarks/batch_floor.py``).

``spark_windowing_pyspark_zip.pth``, installed at site-packages' root with the wheel, calls
:func:`drop_duplicate_zips` when an interpreter of the environment starts. It removes a zip from
``sys.path`` only when the zip lies inside the very ``pyspark`` package that the rest of
``sys.path`` imports: ``<dir>/pyspark/python/lib/pyspark.zip`` while ``<dir>`` is on ``sys.path``
and holds ``pyspark/__init__.py``; ``<dir>/pyspark/python/lib/py4j-<v>-src.zip`` while ``<dir>``
holds py4j ``<v>`` (``py4j-<v>.dist-info``). A Spark distribution's ``SPARK_HOME``, an executor
without pyspark installed, any other zip: left as they are. ``SPARK_WINDOWING_KEEP_PYSPARK_ZIP=1``
in the environment turns it off. Interpreters without such a zip on their path (all but Spark's
workers) pay this module's import and one scan of ``sys.path``: 0.26 ms (``python -X importtime``).
"""

from __future__ import annotations

import os
import sys

KEEP_VARIABLE = "SPARK_WINDOWING_KEEP_PYSPARK_ZIP"


def _norm(path: str) -> str:
    return os.path.normcase(os.path.abspath(path))


def _installed_copy(zip_path: str, entries: set[str]) -> bool:
    """Whether ``zip_path`` is pip-installed pyspark's own copy of a package importable from
    ``entries`` (normalized ``sys.path`` directories)."""
    lib = os.path.dirname(zip_path)
    package = os.path.dirname(os.path.dirname(lib))
    site = os.path.dirname(package)
    if (os.path.basename(package) != "pyspark" or os.path.basename(lib) != "lib"
            or os.path.basename(os.path.dirname(lib)) != "python" or _norm(site) not in entries):
        return False
    name = os.path.basename(zip_path)
    if name == "pyspark.zip":
        return os.path.isfile(os.path.join(package, "__init__.py"))
    if name.startswith("py4j-") and name.endswith("-src.zip"):
        version = name[len("py4j-"):-len("-src.zip")]
        return (os.path.isfile(os.path.join(site, "py4j", "__init__.py"))
                and os.path.isdir(os.path.join(site, f"py4j-{version}.dist-info")))
    return False


def duplicate_zips(path: list[str]) -> list[str]:
    """The entries of ``path`` that are pip-installed pyspark's zip copies of packages the other
    entries import (see the module's docstring); ``[]`` when there are none."""
    zips = [p for p in path if p.endswith(".zip")]
    if not zips:
        return []
    entries = {_norm(p or os.curdir) for p in path if not p.endswith(".zip")}
    return [z for z in zips if _installed_copy(z, entries)]


def drop_duplicate_zips() -> None:
    """Removes :func:`duplicate_zips` from ``sys.path`` (unless ``SPARK_WINDOWING_KEEP_PYSPARK_ZIP``
    is set); run by ``spark_windowing_pyspark_zip.pth`` at interpreter start."""
    if os.environ.get(KEEP_VARIABLE):
        return
    duplicates = set(duplicate_zips(sys.path))
    if duplicates:
        sys.path[:] = [p for p in sys.path if p not in duplicates]
