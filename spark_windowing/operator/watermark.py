"""Watermark strategies: how the input watermark moves, computed once per micro-batch on the
driver from what the shards report (so it is global, independent of the shard count, and —
being stored in the offset — identical on replay). The watermark never decreases.

* ``bounded(d)``: max event time seen so far − d (Spark's ``withWatermark``, Flink's
  bounded out-of-orderness).
* ``processing(lag)``: batch (processing) time − lag.
* ``column(c)``: the max of column ``c`` seen so far (upstream-provided watermarks).
* ``idle_timeout``: once no event arrived for this long (processing time), the watermark also
  advances by the processing time elapsed beyond the timeout, so the last windows of a quiet
  stream close.

>>> w = parse_watermark("bounded(30 seconds)")
>>> w.advance(current=0, max_event=60_000_000, max_column=None, batch_time=0, last_input=0)
30000000
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_windowing._parse import parse_call
from spark_windowing._time import MIN_TIME, parse_duration
from spark_windowing.errors import OptionError

WATERMARK_FORMS = "bounded(<delay>), processing(<lag>), column(<column>) — delays are durations such as '30 seconds'"


@dataclass(frozen=True)
class WatermarkStrategy:
    kind: str                 # "bounded" | "processing" | "column"
    delay: int = 0            # µs (bounded delay / processing lag)
    column: str | None = None
    idle_timeout: int | None = None

    def advance(self, *, current: int, max_event: int | None, max_column: int | None,
                batch_time: int, last_input: int | None) -> int:
        """The watermark for the next micro-batch (never below ``current``)."""
        if self.kind == "bounded":
            wm = MIN_TIME if max_event is None else max_event - self.delay
        elif self.kind == "processing":
            wm = batch_time - self.delay
        else:
            wm = MIN_TIME if max_column is None else max_column
        if self.idle_timeout is not None and last_input is not None and wm > MIN_TIME:
            idle = batch_time - last_input - self.idle_timeout
            if idle > 0:
                wm += idle
        return max(current, wm)


    def at_batch(self, *, seen: int | None, batch_time: int | None, last_input: int | None,
                 has_input: bool) -> int | None:
        """``window(df)``'s watermark of a batch, by :meth:`advance`'s rule from what a shard
        knows: ``seen`` the largest watermark time of the rows so far (the delay subtracted, a
        column's value: ``bounded`` and ``column``), ``batch_time`` the batch's time (None: not
        known to this shard, which then moves no clock), ``last_input`` the latest batch time
        with input before this batch, ``has_input`` whether this shard has rows in it (a batch
        with input adds no idle advance). None: no watermark yet (the operator keeps its own, and
        never moves it back).

        >>> s = WatermarkStrategy("bounded", 0, idle_timeout=10)
        >>> s.at_batch(seen=100, batch_time=150, last_input=120, has_input=False)   # idle 30 - 10
        120
        >>> s.at_batch(seen=100, batch_time=150, last_input=120, has_input=True)
        100
        >>> WatermarkStrategy("processing", 5).at_batch(seen=None, batch_time=50, last_input=None, has_input=False)
        45
        """
        if self.kind == "processing":
            wm = None if batch_time is None else batch_time - self.delay
        else:
            wm = seen
        if (self.idle_timeout is not None and wm is not None and wm > MIN_TIME and batch_time is not None
                and last_input is not None and not has_input):
            wm += max(0, batch_time - last_input - self.idle_timeout)
        return wm


def parse_watermark(text: str | None, idle_timeout: str | None = None) -> WatermarkStrategy:
    """Parse the ``watermark`` option (default ``bounded(0 seconds)``) and ``watermarkIdleTimeout``."""
    idle = parse_duration(idle_timeout, option="watermarkIdleTimeout") if idle_timeout else None
    if text is None or not str(text).strip():
        return WatermarkStrategy("bounded", 0, idle_timeout=idle)
    call = parse_call(text, option="watermark", accepted=WATERMARK_FORMS)
    name = call.name.lower()
    if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], str):
        raise OptionError("watermark", text, WATERMARK_FORMS, why=f"{call.name} takes one argument")
    arg = call.args[0]
    if name in ("bounded", "processing"):
        try:
            d = parse_duration(arg, option="watermark")
        except OptionError as e:
            raise OptionError("watermark", text, WATERMARK_FORMS, why=f"{arg!r}: {e.why or 'not a duration'}") from None
        return WatermarkStrategy(name, d, idle_timeout=idle)
    if name == "column":
        return WatermarkStrategy("column", column=arg.strip("`"), idle_timeout=idle)
    raise OptionError("watermark", text, WATERMARK_FORMS, why=f"unknown strategy {call.name!r}")
