"""``window(df)``'s ticks: a stream of no rows whose offset moves when a shard has a firing due, so
Spark runs a micro-batch for it without new input — the no-data batch native Spark runs for a
stateful query whose watermark moved.

Spark runs a micro-batch of a query only when one of its sources has new data, or when a stateful
operator asks for one (``IncrementalExecution.shouldRunAnotherBatch``: a streaming aggregation in
append mode whenever the watermark moved). ``window(df)``'s query has no Spark-stateful operator,
so without this source the windows its last input closed would fire only with the next input.
``window(df)`` unions this source (no rows; one column, ``__sw_tick``) into the DataFrame before its
shuffle: a batch Spark runs for the ticks alone still runs every shard's task (the shuffle has
``shards`` partitions whatever its input), and each shard steps with the watermark of the
batches before, as always.

When is a firing due? After micro-batch ``b`` the shards' reports (``S/reports/<b + 1>``, the
reader's layout) say the largest watermark time seen (``max_event_us``: the next batch's
watermark W) and the earliest event-time timer left in each shard (``next_event_timer``). A
firing is due when ``min(next_event_timer) <= W`` and W is beyond the watermark the ticks last
moved for: then ``latestOffset`` returns ``{"ticks": n + 1, "wm": W}``. The batch that follows
fires those windows; its reports carry the same W (no input), so no further batch is asked for:
an ``availableNow`` query stops once nothing is due.

A reader's first ``latestOffset`` (a query's start, or its restart from a checkpoint) moves the
ticks once: a query stopped between the batch that moved its watermark and the batch that fires
gets that batch when it starts again.

The state location: given (``stateLocation``), or per query id under a base directory — which the
driver's reader cannot know (Spark gives a Python source no query id). Then the shards write it
to ``pointer`` (a file named per ``window`` call) on their first batch, and the ticks read it there.

A batch the ticks ask for needs no task of theirs when ``window(df)`` shuffles to its shards: the
shuffle runs every shard's task whatever its input, so the ticks plan no partition (a task of
theirs cost ~150 ms a batch on 2 cores: 1.7 s over 11 batches of 400 k events). With one shard
(``coalesce(1)``, no shuffle) a moved offset plans one empty partition: the task that steps it.

The check is one listing of ``S/reports`` per ``latestOffset`` (Spark calls it every trigger, as
it lists a file source's directory), plus one of the newest batch's directory when that is new.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from spark_windowing.datasource import storage
from spark_windowing.datasource.source.shard_reports import due_firing
from spark_windowing.datasource.storage import layout

#: The ``format("windowed")`` option that makes it this source (set by ``window(df)`` only).
TICKS_OPTION = "spark_windowing.windowdf.ticks"
#: The ticks' one column (null in the DataFrame's rows once unioned: ``window(df)`` drops it).
TICK_COLUMN = "__sw_tick"


def ticks_schema() -> Any:
    """The schema of the ticks: one int column, never a row."""
    from pyspark.sql.types import IntegerType, StructField, StructType
    return StructType([StructField(TICK_COLUMN, IntegerType())])


def ticks_settings(root: str | None, pointer: str | None, *, partition: bool = False) -> str:
    """The option's value: the state location, or the file the shards name it in; ``partition``:
    whether a moved offset plans one (empty) partition, or none (module docstring)."""
    return json.dumps({"root": root, "pointer": pointer, "partition": partition}, sort_keys=True)


def point_to(pointer: str, root: str) -> None:
    """A shard names its query's state location for the ticks (idempotent: same name, same body)."""
    storage.write_atomic(pointer, root.encode(), durable=False)


class TicksStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The ticks' reader (driver): offsets ``{"ticks": n, "wm": W}``; partitions without rows."""

    def __init__(self, options: dict[str, str]) -> None:
        settings = json.loads(options[TICKS_OPTION.lower()])
        self.root: str | None = settings.get("root")
        self.pointer: str | None = settings.get("pointer")
        self.partition = bool(settings.get("partition", True))
        self._started = False
        self._seen_seq: int | None = None

    def initialOffset(self) -> dict:
        return {"ticks": 0, "wm": None}

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to fix in advance: the ticks move while a firing is due, then stop."""

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        if not self._started:   # a start or a restart: one batch for what a stopped query left due
            self._started = True
            return {"ticks": start["ticks"] + 1, "wm": start.get("wm")}
        root = self._state_root()
        if root is None:
            return start
        seq = _newest_seq(root)
        if seq is None or seq == self._seen_seq:
            return start
        self._seen_seq = seq
        wm, next_timer = due_firing(root, seq)
        if wm is None or next_timer is None or next_timer > wm or (start.get("wm") is not None and wm <= start["wm"]):
            return start
        return {"ticks": start["ticks"] + 1, "wm": wm}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(0)] if start != end and self.partition else []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return iter(())

    def commit(self, end: dict) -> None:
        """Nothing to release."""

    def _state_root(self) -> str | None:
        if self.root is None and self.pointer is not None:
            raw = storage.read_bytes(self.pointer, missing_ok=True)
            self.root = raw.decode() if raw else None
        return self.root


def _newest_seq(root: str) -> int | None:
    """The newest micro-batch with reports under ``root`` (one listing), or None."""
    seqs = [int(i.base_name) for i in storage.list_dir(layout.reports_dir(root)) if i.base_name.isdigit()]
    return max(seqs) if seqs else None
