"""Where the core's modules of release 0.1.0 are now, after the core was laid out by concept
(``windows``, ``triggers``, ``aggregates``, ``operator``, ``state``, ``tools``).

Two things name a module by its path and outlive a release, so they keep reading the old paths:

- pickles in state snapshots (``state.state_codec.loads``): a process function's buffered panes
  are ``spark_windowing.process.PaneBuffer`` cells in snapshots that release wrote;
- ``module:Class`` / ``module:function`` targets of the ``aggregate`` and ``process`` options
  (``spark_windowing.accumulations:TopN(...)``), which are part of a query's spec fingerprint: a
  query restarted with the target it was started with must find it.

Old modules that became packages (``spark_windowing.windows``, ``.triggers``, ``.aggregates``,
``.operator``) need no entry: each package exports the old module's public names on first use.

>>> current_module("spark_windowing.accumulations")
'spark_windowing.aggregates.accumulations'
>>> current_module("my_module")
'my_module'
"""

from __future__ import annotations

_MOVED = {
    "windows": ("buffered", "mixed", "record_sliding"),
    "aggregates": ("ranked", "process", "accumulations"),
    "operator": ("spec", "elements", "assign", "firing", "output", "window_table", "join", "watermark"),
    "state": ("state_codec", "segments", "store"),
    "tools": ("plot",),
}

#: Old module path -> its path now.
MOVED_MODULES = {
    **{f"spark_windowing.{name}": f"spark_windowing.{package}.{name}"
       for package, names in _MOVED.items() for name in names},
    "spark_windowing.state": "spark_windowing.state.snapshot",
}


def current_module(name: str) -> str:
    """The path of module ``name`` in this release (``name`` itself unless it moved)."""
    return MOVED_MODULES.get(name, name)
