"""Spark's offset log, read: whether a micro-batch of a query took new input from its sources.

A streaming query's checkpoint keeps, per micro-batch ``n``, the offsets Spark planned it with in
``<checkpointLocation>/offsets/<n>`` (``OffsetSeqLog``, written before the batch runs): a line
``v1``, a line of metadata (JSON), then one line per source in the order of the query's plan, the
source's offset as JSON or ``-`` for a source that has none yet::

    v1
    {"batchWatermarkMs":0,"batchTimestampMs":1795908449829,"conf":{...}}
    {"logOffset":3}
    {"ticks": 4, "wm": 1767225788466597, "token": "9f…"}

Under ``trigger(availableNow=True)`` Spark asks every source for its latest offset (up to the
target the source fixed when the run started) each time it plans a batch, and a source with input
left always moves. So a batch whose sources, ``window(df)``'s ticks left aside, have the offsets of
the batch before was planned when every one of them had read all its run's input: the input ended
(``source.ticks``, ``endOfInput=fire``).

>>> others([None, {"logOffset": 1}, {"ticks": 2, "wm": None}])
[None, {'logOffset': 1}]
"""

from __future__ import annotations

import json
from typing import Any

from spark_windowing.datasource import storage
from spark_windowing.errors import WindowingError

__all__ = ["newest_batch", "offsets_of", "others"]


def _offsets_dir(checkpoint: str) -> str:
    return f"{checkpoint.rstrip('/')}/offsets"


def newest_batch(checkpoint: str) -> int | None:
    """The newest micro-batch planned in ``checkpoint``'s offset log (one listing), or None."""
    batches = [int(i.base_name) for i in storage.list_dir(_offsets_dir(checkpoint)) if i.base_name.isdigit()]
    return max(batches) if batches else None


def offsets_of(checkpoint: str, batch: int) -> list[Any] | None:
    """The sources' offsets of micro-batch ``batch`` (parsed JSON; None for ``-``), in the plan's
    order; None when the log has no such batch (never planned, or purged by Spark)."""
    raw = storage.read_bytes(f"{_offsets_dir(checkpoint)}/{batch}", missing_ok=True)
    if raw is None:
        return None
    lines = raw.decode().splitlines()
    if not lines or lines[0].strip() != "v1":
        raise WindowingError(f"{_offsets_dir(checkpoint)}/{batch}: an offset log of version "
                             f"{lines[0].strip() if lines else '(empty)'!r}, not v1 (the version Spark writes by "
                             "default, which window(df)'s endOfInput=fire reads)")
    return [None if line.strip() == "-" else json.loads(line) for line in lines[2:] if line.strip()]


def others(offsets: list[Any]) -> list[Any]:
    """The offsets of the query's own sources: every ``window(df)``'s ticks left out (their
    offsets carry ``ticks``)."""
    return [o for o in offsets if not (isinstance(o, dict) and "ticks" in o)]
