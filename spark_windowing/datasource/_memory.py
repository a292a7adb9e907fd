"""Keeping long-lived Python workers small.

Spark keeps its Python workers (and the processes that run a sink's commits) alive for the
whole query. Arrow's allocator (mimalloc or jemalloc) keeps pages it freed for reuse, so a worker
that once sorted a large batch keeps that memory resident. Each task and commit of the windowed
source and sink hands such cached pages back to the OS when it ends.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["release_arrow_memory"]


def release_arrow_memory() -> None:
    """Return memory Arrow's default pool holds but does not use to the OS (best effort)."""
    pa.default_memory_pool().release_unused()
