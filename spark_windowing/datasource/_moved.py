"""The module paths of earlier releases that the docs showed, still importable after the plugin
was laid out by role (sub-packages ``source``, ``sink``, ``tables``, ``storage``, ``options``):

``spark_windowing.datasource.maintenance`` is ``spark_windowing.datasource.tables.maintenance``
(``migrate_current``), ``...datasource.packages`` is ``spark_windowing.tools.packages``
(``jar_confs``), and ``python -m spark_windowing.datasource.jvm_archive`` runs
``spark_windowing.tools.jvm_archive``. The old name is an alias of the same module object, so
state held by the module is shared, never duplicated.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "spark_windowing.datasource.maintenance": "spark_windowing.datasource.tables.maintenance",
    "spark_windowing.datasource.packages": "spark_windowing.tools.packages",
    "spark_windowing.datasource.jvm_archive": "spark_windowing.tools.jvm_archive",
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of ``MOVED`` and loads them as the new module."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass  # already executed under its new name

    def get_code(self, name):
        """For ``python -m <old name>`` (``runpy`` runs the new module's code as ``__main__``)."""
        new = MOVED[name]
        return importlib.util.find_spec(new).loader.get_code(new)


def install() -> None:
    """Make the old names importable (once per process)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
