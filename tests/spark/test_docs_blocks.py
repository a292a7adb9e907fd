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


def test_the_kafka_page_block_runs_against_the_test_broker(spark, kafka_broker, tmp_path):
    """docs/kafka.md's reader, on the suite's local broker and a topic of its own: it loads (the
    broker and topic are checked at load) and yields the documented pane columns."""
    from tests.docs_blocks import all_blocks, with_real_places
    from tests.spark.kafka_helpers import new_topic

    (block,) = [b for b in all_blocks() if b.kind == "kafka"]
    topic = new_topic(kafka_broker)
    code = with_real_places(block, {
        "broker1:9092,broker2:9092": kafka_broker.bootstrap, '"clicks")': f'"{topic}")',
        "/lake/_state/clicks": str(tmp_path / "state"), "/lake/clicks_late": str(tmp_path / "late")})
    namespace = {"__name__": "__docs__", "spark": spark}
    exec(compile(code, block.where, "exec"), namespace)
    clicks = namespace["clicks"]
    assert clicks.isStreaming
    assert clicks.columns[:4] == ["key", "window_start", "window_end", "clicks"]
