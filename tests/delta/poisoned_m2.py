"""A ``~/.m2`` as Maven leaves it: poms without their jars, for modules of delta-spark's dependency
tree. Spark's default resolver chain tries ``~/.m2`` first and fails on them (``download failed:
...!delta-storage.jar``, then ``JAVA_GATEWAY_EXITED``); the project's Ivy settings never read it.
``tests/delta/test_docs_blocks_delta.py`` runs the docs' delta-spark session recipe with such a
``~/.m2`` (``-Duser.home`` pointed at it): the session must start, write a Delta table with
delta-spark and read it back.
"""

from __future__ import annotations

from pathlib import Path

#: Modules of delta-spark's (and Spark's own) dependency trees, as ``group/artifact/version``.
POISONED = ("com/google/code/findbugs/jsr305/3.0.2", "org/slf4j/slf4j-api/2.0.17",
            "io/delta/delta-storage/4.4.0", "org/antlr/antlr4-runtime/4.13.1")


def poisoned_home(root: Path) -> Path:
    """A home directory under ``root`` whose ``.m2/repository`` holds the ``POISONED`` poms, no jars."""
    for module in POISONED:
        group_path, artifact, ver = module.rsplit("/", 2)
        d = root / ".m2" / "repository" / group_path / artifact / ver
        d.mkdir(parents=True)
        group = group_path.replace("/", ".")
        (d / f"{artifact}-{ver}.pom").write_text(
            f"<project><modelVersion>4.0.0</modelVersion><groupId>{group}</groupId>"
            f"<artifactId>{artifact}</artifactId><version>{ver}</version></project>\n")
    return root
