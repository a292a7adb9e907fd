"""Operator-core tests: pure Python + Arrow, no Spark.

Makes the helper modules next to the tests (``reference``, ``beam_scenarios``) importable
whatever pytest's import mode is.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
