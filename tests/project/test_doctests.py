"""The examples in the package's docstrings run as written (``doctest``), so they cannot drift
from the code. Examples that need a SparkSession are marked ``# doctest: +SKIP``."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import spark_windowing

MODULES = sorted(m.name for m in pkgutil.walk_packages(spark_windowing.__path__, "spark_windowing."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (output above)"


def test_the_examples_are_found():
    finder = doctest.DocTestFinder()
    examples = sum(len(t.examples) for name in MODULES for t in finder.find(importlib.import_module(name)))
    assert examples >= 80, examples
