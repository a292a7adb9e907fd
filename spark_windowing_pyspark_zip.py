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

Nothing of this runs unless you opt in: the wheel installs no ``.pth`` and changes no interpreter
of your environment. ``python -m spark_windowing_pyspark_zip install`` writes
``spark_windowing_pyspark_zip.pth`` into the running interpreter's site-packages (``--site DIR``:
elsewhere); from then on every interpreter of that environment calls :func:`drop_duplicate_zips`
at start. ``remove`` deletes the file (do it before ``pip uninstall``: pip does not know the file;
a ``.pth`` left behind does nothing once this module is gone), ``status`` says where it is.
``scripts/_setup.sh`` opts in for the project's own virtualenvs.

:func:`drop_duplicate_zips` removes a zip from ``sys.path`` only when the zip lies inside the very
``pyspark`` package that the rest of ``sys.path`` imports: ``<dir>/pyspark/python/lib/pyspark.zip``
while ``<dir>`` is on ``sys.path`` and holds ``pyspark/__init__.py``;
``<dir>/pyspark/python/lib/py4j-<v>-src.zip`` while ``<dir>`` holds py4j ``<v>``
(``py4j-<v>.dist-info``). A Spark distribution's ``SPARK_HOME``, an executor without pyspark
installed, any other zip: left as they are. ``SPARK_WINDOWING_KEEP_PYSPARK_ZIP=1`` in the
environment turns it off. Interpreters without such a zip on their path (all but Spark's
workers) pay this module's import and one scan of ``sys.path``: 0.26 ms (``python -X importtime``).

Why no route scoped to the processes Spark starts for this plugin: Spark starts a Python data
source's planning processes as ``python -m pyspark.sql.worker.<module>`` (``PythonPlannerRunner``,
``PythonStreamingSourceRunner``; the module names are fixed in Spark) with the zip first on
``PYTHONPATH``: pyspark is imported from the zip before any code of this package runs, and only an
interpreter-start hook of the environment (``.pth``, ``sitecustomize``) runs earlier. Measured:
``import pyspark.sql.streaming.python_streaming_source_runner`` 0.67-0.86 s from the zip, 0.18 s
without; the plugin's own modules after it 0.13 s against 0.10 s, so repairing the path once the
plugin is imported would keep almost nothing of the gain.
"""

from __future__ import annotations

import os
import sys

KEEP_VARIABLE = "SPARK_WINDOWING_KEEP_PYSPARK_ZIP"
PTH_NAME = "spark_windowing_pyspark_zip.pth"
#: The ``.pth`` line: does nothing when this module is no longer installed (``site`` runs a line
#: that starts with ``import``; an ``ImportError`` there would print a traceback at every start).
PTH_LINE = ("import importlib.util as _u; _m = _u.find_spec('spark_windowing_pyspark_zip') and "
            "__import__('spark_windowing_pyspark_zip'); _m and _m.drop_duplicate_zips()\n")


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
    is set); run at interpreter start by the ``.pth`` that ``install`` writes."""
    if os.environ.get(KEEP_VARIABLE):
        return
    duplicates = set(duplicate_zips(sys.path))
    if duplicates:
        sys.path[:] = [p for p in sys.path if p not in duplicates]


def _site_packages() -> str:
    import sysconfig
    return sysconfig.get_paths()["purelib"]


def install(site: str) -> str:
    """Writes the ``.pth`` into ``site`` (idempotent); returns its path."""
    path = os.path.join(site, PTH_NAME)
    current = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            current = f.read()
    if current != PTH_LINE:
        with open(path, "w", encoding="utf-8") as f:
            f.write(PTH_LINE)
    return path


def remove(site: str) -> bool:
    """Deletes the ``.pth`` from ``site``; whether there was one."""
    path = os.path.join(site, PTH_NAME)
    if not os.path.exists(path):
        return False
    os.remove(path)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m spark_windowing_pyspark_zip install|remove|status [--site DIR]``."""
    import argparse
    parser = argparse.ArgumentParser(
        prog="python -m spark_windowing_pyspark_zip",
        description="Opt in (install) or out (remove) of dropping pip-installed pyspark's zip copies "
                    "from sys.path at the start of every interpreter of this environment: Spark's "
                    "Python processes then import pyspark's compiled files (0.4 s less each).")
    parser.add_argument("action", choices=["install", "remove", "status"])
    parser.add_argument("--site", default=None, help="the site-packages directory (default: this interpreter's)")
    args = parser.parse_args(argv)
    site = args.site or _site_packages()
    path = os.path.join(site, PTH_NAME)
    if args.action == "install":
        print(f"installed {install(site)}: every interpreter of this environment now drops "
              f"pyspark's zip copies from sys.path; undo with: python -m spark_windowing_pyspark_zip remove")
    elif args.action == "remove":
        print(f"removed {path}" if remove(site) else f"not installed: {path}")
    else:
        print(f"installed: {path}" if os.path.exists(path) else f"not installed: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
