"""The Python blocks of the docs that need Spark run, page by page, on the shared session (see
tests/docs_blocks.py for the classification). The README's own-project example runs as what it
claims to be, a standalone script with only the wheel installed: tests/spark/test_wheel.py."""

from __future__ import annotations

import pytest

from tests.docs_blocks import pages, run_page

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("page", sorted(pages("spark")))
def test_python_blocks_with_spark_run(page, spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page_blocks = pages("spark")[page]
    try:
        assert run_page(page_blocks, {"__name__": "__docs__", "spark": spark}) == len(page_blocks)
    finally:
        for query in spark.streams.active:
            query.stop()
