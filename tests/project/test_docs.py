"""The documentation is checked: the MkDocs site builds with --strict (broken links, pages, anchors
fail), docs/options.md is what the option registry generates, the registry names exactly the
options the parsers read, and every Python block of the README and docs/ runs or says why not
(the pages without Spark run here; the Spark ones in tests/spark/test_docs_blocks.py)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from spark_windowing.datasource.options import reference as ref
from tests.docs_blocks import ROOT, all_blocks, blocks, doc_files, pages, run_page

#: Blocks excluded with a reason (an S3 cluster; three declarative pipelines' definitions, which only
#: ``spark-pipelines`` runs, and tests/spark/test_declarative_pipelines.py and
#: test_window_df_pipeline.py run their forms): adding one must be a decision, so the count is pinned.
EXCLUDED = 4


def test_the_site_builds_with_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the test extra installs mkdocs")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr    # not -q: it hides the warnings --strict counts
    assert (tmp_path / "site" / "options" / "index.html").exists()


def test_every_docs_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f": {p.name}" not in nav]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


def test_options_reference_is_generated_from_the_registry():
    expected = ref.render_markdown()
    assert (ROOT / "docs" / "options.md").read_text(encoding="utf-8") == expected, (
        "docs/options.md differs from the registry: run "
        "python -m spark_windowing.datasource.options.reference > docs/options.md")


# ------------------------------------------------------------------ registry vs. the parsers
_READ_HELPERS = {"_int", "_count", "_require", "_choice", "choice_option", "parse_bool_option", "int_option", "bool_option"}


def _names_read(module_path: str, functions: set[str]) -> set[str]:
    """Lower-cased option names the given functions (``Class.method`` or ``function``) read:
    ``options.get("x")`` / ``opts.get("x")`` / ``options["x"]``, ``_int(options, "X", ...)`` and
    friends, and the generator's ``get("X")`` / ``num("X")``."""
    tree = ast.parse((ROOT / module_path).read_text())
    found: set[str] = set()

    def scan(node: ast.AST) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                f = n.func
                args = [a.value for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Name) \
                        and f.value.id in ("options", "opts") and n.args and isinstance(n.args[0], ast.Constant):
                    found.add(str(n.args[0].value).lower())
                elif isinstance(f, ast.Name) and f.id in _READ_HELPERS and len(n.args) > 1 \
                        and isinstance(n.args[1], ast.Constant):
                    found.add(str(n.args[1].value).lower())
                elif isinstance(f, ast.Name) and f.id in ("get", "num") and args:
                    found.add(args[0].lower())
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) \
                    and n.value.id in ("options", "opts") and isinstance(n.slice, ast.Constant):
                found.add(str(n.slice.value).lower())
            elif isinstance(n, ast.Tuple) and all(isinstance(e, ast.Constant) for e in n.elts) \
                    and {"subscribe", "assign"} <= {e.value for e in n.elts}:
                found.update(e.value for e in n.elts)      # kafka: exactly one of these three

    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and f"{node.name}.{item.name}" in functions:
                    scan(item)
        elif isinstance(node, ast.FunctionDef) and node.name in functions:
            scan(node)
    return found


def _registry(scope: str) -> set[str]:
    return {o.name.lower() for o in ref.options_of(scope)}


def test_reader_registry_names_the_options_the_reader_parses():
    from spark_windowing.datasource.source.parse import KNOWN_OPTIONS

    read = (_names_read("spark_windowing/datasource/source/parse.py",
                        {"parse_options", "_with_stream2", "time_options", "operator_spec"})
            | _names_read("spark_windowing/datasource/upstreams/generator.py", {"parse_generator_options"})
            | _names_read("spark_windowing/datasource/upstreams/nexmark_stream.py", {"NexmarkUpstream.parse_options"})
            | _names_read("spark_windowing/datasource/upstreams/kafka_options.py", {"parse_kafka_options"})
            | _names_read("spark_windowing/datasource/upstreams/kafka.py", {"KafkaUpstream.parse_options"})
            | _names_read("spark_windowing/datasource/tables/maintenance.py", {"MaintenanceOptions.parse"}))
    read.discard("table")       # routes the read to the pane-table reader (scope table)
    registry = _registry("reader")
    generated2 = {o.name.lower() for o in ref.options_of("reader") if o.group.startswith("Generator, stream 2")}
    assert read - registry == set(), "parsed but not in the option registry"
    assert registry - read - generated2 - {"kafka.*"} == set(), "in the registry but never read"
    assert KNOWN_OPTIONS == {n for n in registry if not n.startswith("kafka.")}


def test_sink_and_table_registry_names_the_options_their_parsers_read():
    sink = (_names_read("spark_windowing/datasource/sink/settings.py", {"SinkOptions.parse"})
            | _names_read("spark_windowing/datasource/tables/maintenance.py", {"MaintenanceOptions.parse"}))
    assert sink == _registry("sink")
    assert _names_read("spark_windowing/datasource/tables/table_reader.py", {"TableOptions.parse"}) == _registry("table")


def test_the_reader_accepts_every_registry_option_and_refuses_others():
    from spark_windowing.datasource.source.parse import parse_options
    from spark_windowing.errors import OptionError

    base = {"source": "generator", "window": "tumbling(1 minute)", "aggregate": "count(*) AS n",
            "stateLocation": "/tmp/unused"}
    for o in ref.options_of("reader"):
        name = "kafka.client.id" if o.name == "kafka.*" else o.name
        try:
            parse_options({**base, name: "bogus value"})
        except OptionError as e:
            assert e.why != "unknown option" or name.startswith("kafka."), (name, str(e))
    with pytest.raises(OptionError, match="unknown option"):
        parse_options({**base, "windowSize": "1 minute"})


def test_options_used_in_the_docs_exist():
    """Every ``.option("name", ...)`` in a code block of the README or docs/ is in the registry
    (or is Spark's own ``checkpointLocation``)."""
    known = {o.name.lower() for o in ref.OPTIONS} | {"checkpointlocation"}
    unknown = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r'\.option\(\s*"([^"]+)"', text):
            if name.lower() not in known and not name.lower().startswith("kafka."):
                unknown.append(f"{path.name}: {name}")
    assert not unknown


# ------------------------------------------------------------------ code blocks
def test_every_python_block_is_run_or_excluded_with_a_reason():
    found = all_blocks()
    kinds = {k: [b for b in found if b.kind == k]
             for k in ("own-project", "own-project-copy", "skip", "delta", "kafka", "plain", "spark")}
    assert sum(map(len, kinds.values())) == len(found)
    assert len(kinds["own-project"]) == 1 and kinds["own-project"][0].file == "README.md"
    for copy in kinds["own-project-copy"]:
        assert copy.code == kinds["own-project"][0].code, f"{copy.where} differs from the README's own-project example"
    skipped = [f"{b.where}: {b.reason}" for b in kinds["skip"]]
    assert len(skipped) == EXCLUDED, "excluded blocks:\n" + "\n".join(skipped)
    assert kinds["plain"] and kinds["spark"] and len(kinds["delta"]) == 2 and len(kinds["kafka"]) == 1
    print(f"\n{len(found)} Python blocks: {len(kinds['plain'])} run here, {len(kinds['spark'])} with Spark, "
          f"1 own-project (+{len(kinds['own-project-copy'])} identical copy) as a subprocess, "
          f"{len(kinds['delta'])} in the Delta virtualenv, {len(kinds['kafka'])} against the test broker, "
          f"{len(skipped)} excluded:\n" + "\n".join(skipped))


def test_a_block_without_a_marker_is_run_and_a_bare_marker_fails(tmp_path, monkeypatch):
    """The classification itself: a marker needs a reason and must precede a Python block."""
    import tests.docs_blocks as db

    monkeypatch.setattr(db, "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\n<!-- docs-test: skip: no reason -->\n```python\nboom\n```\n")
    assert [b.kind for b in db.blocks(page)] == ["plain", "skip"]
    page.write_text("<!-- docs-test: skip: -->\n```python\nx = 1\n```\n")
    with pytest.raises(db.MarkerError, match="malformed"):
        db.blocks(page)
    page.write_text("<!-- docs-test: skip: why -->\n\nsome text\n")
    with pytest.raises(db.MarkerError, match="not right before"):
        db.blocks(page)


@pytest.mark.parametrize("page", sorted(pages("plain")))
def test_python_blocks_without_spark_run(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    page_blocks = pages("plain")[page]
    assert run_page(page_blocks, {"__name__": "__docs__"}) == len(page_blocks)
