"""Names a package exports without importing their modules until first use (PEP 562)."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``names[name]`` (a module's full name)
    when ``package.<name>`` is first asked for, and returns its attribute ``name``."""
    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)
    return __getattr__
