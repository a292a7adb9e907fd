"""Every benchmark script starts: run as documented (``python benchmarks/<name>.py``), its own
directory comes first on ``sys.path``, where a file named like a standard-library module (once
``operator.py``) breaks every script's imports. ``--help`` imports the script and parses no data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_benchmark_script_starts(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:500]


def test_no_benchmark_shadows_a_standard_library_module():
    shadowing = [p.name for p in BENCHMARKS.glob("*.py") if p.stem in sys.stdlib_module_names]
    assert shadowing == []
