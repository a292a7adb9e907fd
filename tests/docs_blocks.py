"""The Python code blocks of README.md and docs/*.md, and how the tests run each of them.

Every ```` ```python ```` block is one of:

* ``own-project``: the README's complete example (the line before it is
  ``<!-- own-project-example -->``); ``tests/spark/test_wheel.py`` runs it as a standalone
  script in a subprocess. ``docs/getting-started.md`` carries the same block, which must be
  identical (``own-project-copy``: checked, not run twice).
* ``skip``: the line before it is ``<!-- docs-test: skip: <why it cannot run here> -->``; counted,
  never run.
* ``delta`` / ``kafka``: the line before it is ``<!-- docs-test: delta: <why> -->`` (or ``kafka``):
  it needs the Delta interoperability virtualenv (delta-spark, DuckDB) or the test suite's Kafka
  broker, and runs where they are (``tests/delta/test_docs_blocks_delta.py``,
  ``tests/spark/test_docs_blocks.py``), with its example paths and hosts replaced by real ones.
* ``plain`` / ``spark``: run in order, one namespace per page (a page's blocks build on each
  other), with the working directory a temporary one. A page with a block that uses ``spark.``
  runs entirely in the Spark test, with the session fixture as the global ``spark``; the others run
  in ``tests/project/test_docs.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN_PROJECT_MARKER = "<!-- own-project-example -->"
_SKIP = re.compile(r"^<!--\s*docs-test:\s*(?P<kind>skip|delta|kafka):\s*(?P<reason>.*?)\s*-->$")
_ANY_MARKER = re.compile(r"<!--\s*(docs-test\b|own-project-example\b)")
_FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
_USES_SPARK = re.compile(r"(?<![\w.])spark\.")


@dataclass(frozen=True)
class Block:
    file: str            # relative to the repository root
    line: int            # 1-based line of the opening fence
    code: str
    kind: str            # own-project, own-project-copy, skip, delta, kafka, plain, spark
    reason: str = ""     # for skip

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


class MarkerError(AssertionError):
    """A docs-test marker that is malformed or not right before a Python block."""


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _fenced(path: Path) -> list[tuple[int, str, str, str]]:
    """(fence line, language, code, the non-blank line before the fence) of each fenced block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group("lang")
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        out.append((start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", before.strip()))
        i = j + 1
    return out


def blocks(path: Path) -> list[Block]:
    """The Python blocks of one file, classified; ``MarkerError`` on a stray or malformed marker."""
    rel = str(path.relative_to(ROOT))
    fenced = _fenced(path)
    marker_lines = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                    if _ANY_MARKER.search(line)]
    used: list[int] = []
    raw: list[Block] = []
    for line, lang, code, before in fenced:
        kind, reason = "run", ""
        if before == OWN_PROJECT_MARKER:
            kind = "own-project" if rel == "README.md" else "own-project-copy"
        elif before.startswith("<!--") and "docs-test" in before:
            m = _SKIP.match(before)
            if not m or not m.group("reason"):
                raise MarkerError(f"{rel}:{line}: malformed marker {before!r}; write "
                                  "<!-- docs-test: skip|delta|kafka: <why this block cannot run here> -->")
            kind, reason = m.group("kind"), m.group("reason")
        if kind != "run" and lang != "python":
            raise MarkerError(f"{rel}:{line}: a docs-test marker before a {lang or 'plain'} block")
        if kind != "run":
            used.append(_line_of(path, before, line))
        if lang == "python":
            raw.append(Block(rel, line, code, kind, reason))
    stray = sorted(set(marker_lines) - set(used))
    if stray:
        raise MarkerError(f"{rel}: marker(s) on line(s) {stray} not right before a Python block")
    page_kind = "spark" if any(b.kind == "run" and _USES_SPARK.search(b.code) for b in raw) else "plain"
    return [Block(b.file, b.line, b.code, page_kind if b.kind == "run" else b.kind, b.reason) for b in raw]


def _line_of(path: Path, text: str, fence_line: int) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return max(n for n in range(1, fence_line) if lines[n - 1].strip() == text)


def all_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks(path)]


def pages(kind: str) -> dict[str, list[Block]]:
    """file -> its blocks to run, for the pages whose blocks run as ``kind`` (plain or spark)."""
    out: dict[str, list[Block]] = {}
    for b in all_blocks():
        if b.kind == kind:
            out.setdefault(b.file, []).append(b)
    return out


def with_real_places(block: Block, places: dict[str, str]) -> str:
    """The block's code with each example path or host (a key of ``places``) replaced by a real
    one; every key must occur, so a rewritten example cannot silently stop being exercised."""
    code = block.code
    for example, real in places.items():
        assert example in code, f"{block.where} no longer contains {example!r}"
        code = code.replace(example, real)
    return code


def run_page(page_blocks: list[Block], namespace: dict) -> int:
    """Execute a page's blocks in order in one namespace; return how many ran."""
    ran = 0
    for b in page_blocks:
        exec(compile(b.code, b.where, "exec"), namespace)
        ran += 1
    return ran
