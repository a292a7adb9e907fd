"""Where a micro-batch's time goes, span by span, across the driver and the Python workers.

Off unless the environment variable ``SPARK_WINDOWING_TRACE`` names a file: then every span
(``with span("sink.commit"):``) appends one JSON line ``{"span", "pid", "start", "end", ...}``
(wall-clock seconds) to that file. The variable reaches every Python process of a local-mode
query (driver, planner workers, task workers), since Spark starts them from the driver's
environment; one ``O_APPEND`` write per line keeps lines whole across processes.
``benchmarks/batch_breakdown.py`` reads the file next to Spark's own progress phases.

A span costs one ``os.environ`` lookup when tracing is off.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from functools import wraps
from typing import Callable, Iterator, TypeVar

_F = TypeVar("_F", bound=Callable)

__all__ = ["ENV", "span", "record", "traced"]

#: The variable naming the trace file.
ENV = "SPARK_WINDOWING_TRACE"


def record(name: str, start: float, end: float, **fields: object) -> None:
    """Append one span (wall-clock ``start``/``end`` seconds) when tracing is on."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"span": name, "pid": os.getpid(), "start": start, "end": end, **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@contextmanager
def span(name: str, **fields: object) -> Iterator[None]:
    """Time the block as span ``name`` (see the module docstring); nothing when tracing is off."""
    if not os.environ.get(ENV):
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        record(name, start, time.time(), **fields)


def traced(name: str) -> Callable[[_F], _F]:
    """Decorate a function so that each call is span ``name``."""
    def wrap(func: _F) -> _F:
        @wraps(func)
        def call(*args, **kwargs):
            with span(name):
                return func(*args, **kwargs)
        return call  # type: ignore[return-value]
    return wrap
