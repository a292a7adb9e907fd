"""The README is the front door and says true things: its quick start is the two scripts, its
own-project example is one Python block (run by tests/spark/test_docs_blocks.py), its capability
table names test files that exist; and the TestStream example (docs/testing.md) prints what it
says it prints."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TESTING = ROOT / "docs" / "testing.md"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_teststream_example_prints_what_it_claims():
    blocks = re.findall(r"```python\n(.*?)```", TESTING.read_text(), flags=re.S)
    block = next(b for b in blocks if "from spark_windowing.testing import TestStream" in b)
    claimed = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "docs/testing.md", "exec"), {})
    assert claimed and out.getvalue().splitlines() == claimed


def test_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    for heading in ("Install", "Quick start", "Your own pipeline", "Capabilities", "Documentation"):
        assert f"\n## {heading}\n" in text, heading
    assert "pip install 'spark-windowing[spark]'" in text and "PYSPARK_PYTHON" in text
    assert "ModuleNotFoundError: No module named 'spark_windowing'" in text


def test_quick_start_is_the_two_scripts():
    quick = _section(README.read_text(), "Quick start")
    commands = re.findall(r"```bash\n(.*?)```", quick, flags=re.S)
    assert len(commands) == 1
    lines = [line.split("#")[0].strip() for line in commands[0].splitlines()]
    assert lines == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    assert (ROOT / "scripts" / "demo.sh").exists() and (ROOT / "scripts" / "test.sh").exists()


def test_own_project_example_is_one_python_block_after_its_marker():
    own = _section(README.read_text(), "Your own pipeline")
    assert re.search(r"<!-- own-project-example -->\n```python\n", own)
    assert own.count("```python") == 1
    block = own.split("```python\n", 1)[1].split("```", 1)[0]
    for needed in ('readStream.format("windowed")', 'writeStream.format("windowed")',
                   "availableNow=True", '"lateDataPath"', '"stateLocation"', "accumulating_and_retracting",
                   '"table", "current"', '"table", "late"', "createOrReplaceTempView", "spark.sql("):
        assert needed in block, needed
    assert "register(" not in block        # Spark finds the format itself


def test_capability_table_names_test_files_that_exist():
    table = [line for line in _section(README.read_text(), "Capabilities").splitlines()
             if line.startswith("| ") and not line.startswith("| capability")]
    assert len(table) >= 30
    tests = ROOT / "tests"
    for row in table:
        for name in re.findall(r"`((?:\w+/)*test_\w+\.py)(?:::\w+)?`", row.rsplit(" | ", 1)[-1]):
            assert (tests / name).exists() or list(tests.glob(f"**/{name}")), (name, row[:60])
