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

**The clock** (``clock`` in the settings: processing-time windows, ``watermark=processing(...)``,
``watermarkIdleTimeout``, processing-time triggers): the next batch's watermark W then depends on
the time of the call, ``now``, as ``format("windowed")``'s driver computes it
(``WatermarkStrategy.advance``): ``processing(lag)`` is ``now − lag``; an idle timeout adds the
time beyond it since the last batch with input (``last_input_us`` in the reports). The ticks also
move when a processing-time timer is due (``next_proc_timer <= now``; not under ``availableNow``,
which ignores processing-time timers, as ``format("windowed")`` does), and they check at every
call, not only when a batch is new. A moved offset then plans one partition, whose rows are one
tick per shard (``__sw_tick`` 1 and the shard's label, ``__sw_part``): every shard's task gets the
batch's time from its tick (Spark's batch timestamp, the same on a replay), even a shard without
input. In a batch Spark runs for input alone, a shard without rows has no batch time: it moves
no processing-time clock (deterministic on a replay; the ticks ask for a batch of their own when
its timers are due).

**The end of the input** (``end`` in the settings: ``endOfInput=fire`` under ``availableNow``):
Spark gives a source neither the query's checkpoint nor the other sources' offsets, so
``window(df)`` is given the checkpoint (``checkpointLocation``) and the ticks read Spark's offset
log there (``source.offset_log``). Until the end, they move at every call (a probe: no task of
theirs when ``window(df)`` shuffles), so Spark plans a batch after each one, with whatever input
is left. The first batch whose other sources have the offsets of the batch before was planned
when they had read all their input: the next offset carries ``"end": true`` and its batch one row
per shard, the tick ``2``, which moves the shard's watermark to the end of time after its rows: every
window fires (two batches after the last input). The offsets carry a ``token`` made at the query's
first batch; a checkpoint whose newest batch was not planned with the ticks' own offset is not
the query's, and is refused naming the option.

The check is one listing of ``S/reports`` per ``latestOffset`` (Spark calls it every trigger, as
it lists a file source's directory), plus one of the newest batch's directory when that is new.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from spark_windowing.datasource import storage
from spark_windowing.datasource.source import offset_log
from spark_windowing.datasource.source.shard_reports import due_firing, summary_of
from spark_windowing.datasource.storage import layout
from spark_windowing.errors import OptionError
from spark_windowing.operator.watermark import WatermarkStrategy

#: The ``format("windowed")`` option that makes it this source (set by ``window(df)`` only).
TICKS_OPTION = "spark_windowing.windowdf.ticks"
#: The ticks' one column (null in the DataFrame's rows once unioned: ``window(df)`` drops it).
TICK_COLUMN = "__sw_tick"


#: The shard label column the clock's ticks carry (``window(df)``'s ``__sw_part``).
PART_COLUMN = "__sw_part"


def ticks_schema(options: dict[str, str] | None = None) -> Any:
    """The schema of the ticks: one int column, never a row; with the clock, the shard label too
    (one row per shard in a batch the ticks moved)."""
    from pyspark.sql.types import IntegerType, StructField, StructType
    fields = [StructField(TICK_COLUMN, IntegerType())]
    settings = json.loads(options.get(TICKS_OPTION.lower(), "{}")) if options is not None else {}
    if settings.get("clock") or settings.get("end"):
        fields.append(StructField(PART_COLUMN, IntegerType()))
    return StructType(fields)


def ticks_settings(root: str | None, pointer: str | None, *, partition: bool = False,
                   clock: dict | None = None, end: dict | None = None) -> str:
    """The option's value: the state location, or the file the shards name it in; ``partition``:
    whether a moved offset plans one (empty) partition, or none; ``clock``: the watermark strategy
    (``kind``, ``delay``, ``idle`` µs), ``proc`` (processing-time timers) and the shards' ``labels``;
    ``end``: the query's ``checkpoint`` and the shards' ``labels`` (module docstring)."""
    return json.dumps({"root": root, "pointer": pointer, "partition": partition, "clock": clock, "end": end},
                      sort_keys=True)


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
        self.clock: dict | None = settings.get("clock")
        self.end: dict | None = settings.get("end")
        self._available_now = False
        self._started = False
        self._seen_seq: int | None = None

    def initialOffset(self) -> dict:
        return {"ticks": 0, "wm": None, **({"token": uuid.uuid4().hex} if self.end else {})}

    def prepareForTriggerAvailableNow(self) -> None:
        """Nothing to fix in advance: the ticks move while a firing is due, then stop (and, as
        ``format("windowed")`` does, processing-time timers are not waited for)."""
        self._available_now = True

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        if not self._started:   # a start or a restart: one batch for what a stopped query left due
            self._started = True
            return {**start, "ticks": start["ticks"] + 1}
        if self.end is not None and self._available_now and not start.get("end"):
            return self._end_offset(start)
        root = self._state_root()
        if root is None:
            return start
        seq = _newest_seq(root)
        if self.clock is not None:
            return self._clock_offset(start, root, seq)
        if seq is None or seq == self._seen_seq:
            return start
        self._seen_seq = seq
        wm, next_timer = due_firing(root, seq)
        if wm is None or next_timer is None or next_timer > wm or (start.get("wm") is not None and wm <= start["wm"]):
            return start
        return {**start, "ticks": start["ticks"] + 1, "wm": wm}

    def _clock_offset(self, start: dict, root: str, seq: int | None) -> dict:
        """With the clock: the next offset when a firing is due at ``now`` (module docstring)."""
        if seq is None:
            return start
        clock, now = self.clock, time.time_ns() // 1000
        s = summary_of(root, seq)
        strategy = WatermarkStrategy(clock["kind"], clock["delay"], idle_timeout=clock.get("idle"))
        wm = strategy.at_batch(seen=s["max_event_us"], batch_time=now, last_input=s["last_input_us"],
                               has_input=False)   # the shards' own rule, at the time of the call
        event_due = wm is not None and s["next_event_timer"] is not None and s["next_event_timer"] <= wm
        proc_due = (clock.get("proc") and not self._available_now and s["next_proc_timer"] is not None
                    and s["next_proc_timer"] <= now)
        if not (event_due or proc_due) or (self._seen_seq == seq and start.get("wm") == wm and not proc_due):
            return start
        self._seen_seq = seq
        return {**start, "ticks": start["ticks"] + 1, "wm": wm}

    def _end_offset(self, start: dict) -> dict:
        """``endOfInput=fire`` under availableNow, before the end: the next offset, a probe or the
        end (module docstring)."""
        moved = {**start, "ticks": start["ticks"] + 1}
        checkpoint = self.end["checkpoint"]
        n = offset_log.newest_batch(checkpoint)   # a first call (the start's move) plans batch 0 before this
        planned = offset_log.offsets_of(checkpoint, n) if n is not None else None
        if planned is None or start not in planned:
            raise OptionError("checkpointLocation", checkpoint, "the checkpointLocation of the query that writes "
                              "this window(df) (the same path as writeStream's)",
                              why="no micro-batch in its offset log" if n is None else
                              f"its newest micro-batch ({n}) was not planned with this query's offsets")
        now = offset_log.others(planned)
        before = offset_log.offsets_of(checkpoint, n - 1) if n > 0 else [None] * len(now)
        if before is None or now != offset_log.others(before):
            return moved                      # batch n took input (or its predecessor is purged): probe again
        return {**moved, "end": True}         # batch n found every source read to its end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """A moved offset: the end's one partition of ticks ``2``, the clock's of ticks ``1``, one
        empty partition (one shard), or none."""
        if start == end:
            return []
        if end.get("end") and not start.get("end"):
            return [InputPartition(2)]
        return [InputPartition(1)] if self.partition or self.clock is not None else []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        """One tick per shard, labelled for its partition (the end's, or the clock's), or none."""
        if partition.value == 2:
            return iter([(2, label) for label in self.end["labels"]])
        if self.clock is None:
            return iter(())
        return iter([(1, label) for label in self.clock["labels"]])

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
