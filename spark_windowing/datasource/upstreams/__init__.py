"""Upstreams: where a windowed query's events come from. One kind per module, each an
``Upstream`` (``base``: the interface and its contract), registered below by its ``source``
option value: adding an upstream is one new module and one line in ``UPSTREAMS``.

>>> sorted(UPSTREAMS)
['csv', 'delta', 'generator', 'json', 'kafka', 'nexmark', 'panes', 'parquet']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spark_windowing.datasource.upstreams import delta_stream, files, generator, kafka, nexmark_stream, pane_tables
from spark_windowing.datasource.upstreams.base import Upstream

if TYPE_CHECKING:
    from spark_windowing.datasource.options.config import SourceConfig

#: Every upstream kind by its ``source`` option value, in the order option errors list them.
UPSTREAMS: dict[str, type[Upstream]] = {
    "delta": delta_stream.DeltaUpstream,
    "parquet": files.FilesUpstream,
    "json": files.FilesUpstream,
    "csv": files.FilesUpstream,
    "generator": generator.GeneratorUpstream,
    "nexmark": nexmark_stream.NexmarkUpstream,
    "panes": pane_tables.PanesUpstream,
    "kafka": kafka.KafkaUpstream,
}


def upstream_for(cfg: "SourceConfig") -> Upstream:
    """The upstream ``cfg`` reads (``cfg.source``, validated by the option parser)."""
    return UPSTREAMS[cfg.source](cfg)


__all__ = ["UPSTREAMS", "Upstream", "upstream_for"]
