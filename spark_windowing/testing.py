"""``TestStream``: test a windowing configuration without Spark (Beam's TestStream, Flink's
operator test harness). Each call is one step — one micro-batch — of the operator.

All times (element timestamps of numeric columns, watermark, processing time, and the time
columns of the returned panes) are integers in ``timestamp_unit`` (default milliseconds),
floor-divided from the operator's microseconds: a pane of window ``[0, 10)`` ms under
``end_of_window`` has ``pane_timestamp == 9`` (internally ``10 ms - 1 µs``).

>>> s = TestStream(window="tumbling(10 milliseconds)", trigger="AfterWatermark(early=AfterCount(2))",
...                accumulation_mode="accumulating", aggregate="collect_list(value) AS values")
>>> s.add_elements([{"ts": 1, "value": 1}, {"ts": 3, "value": 3}])
>>> s.advance_watermark_to(10)
>>> [(p["window_start"], p["values"], p["pane_timing"], p["pane_index"]) for p in s.take_panes()]
[(0, [1, 3], 'EARLY', 0), (0, [1, 3], 'ON_TIME', 1)]
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from spark_windowing._time import MAX_TIME, MIN_TIME, UNIT_FACTORS
from spark_windowing.errors import OptionError
from spark_windowing.operator import join
from spark_windowing.operator.spec import OperatorSpec
from spark_windowing.operator.windowed import StepResult, WindowedOperator
from spark_windowing.state import snapshot as state

__all__ = ["TestStream"]

_TIME_COLUMNS = ("window_start", "window_end", "pane_timestamp", "watermark", "batch_time")


class TestStream:
    """A windowed operator driven by hand: bundles, watermark moves, processing-time moves."""

    __test__ = False  # not a pytest test class

    def __init__(self, *, window: str, aggregate: str | None = None, process: str | None = None,
                 evictor: str | None = None, trigger: str | None = None,
                 accumulation_mode: str = "discarding", allowed_lateness: str = "0 seconds",
                 timestamp_combiner: str = "end_of_window", key_columns: str | Iterable[str] | None = None,
                 timestamp_column: str = "ts", timestamp_unit: str = "ms",
                 fire_only_updated_panes: bool = False, join: str | None = None, aggregate2: str | None = None,
                 key_columns2: str | Iterable[str] | None = None, timestamp_column2: str | None = None,
                 schema: pa.Schema | None = None, schema2: pa.Schema | None = None,
                 count_order: str | None = None) -> None:
        """``join`` merges a second stream (``add_elements(..., stream2=...)``; see
        ``spark_windowing.operator.join``); ``schema``/``schema2`` fix the streams' column types (else
        taken from the first bundle of each stream, which must come in the first step); ``count_order``:
        the ``countOrder`` option (``arrival`` / ``timestamp``)."""
        if timestamp_unit not in UNIT_FACTORS:
            raise OptionError("timestamp_unit", timestamp_unit, ", ".join(UNIT_FACTORS))
        self._kwargs = dict(window=window, aggregate=aggregate, process=process, evictor=evictor, trigger=trigger,
                            accumulation_mode=accumulation_mode, allowed_lateness=allowed_lateness,
                            timestamp_combiner=timestamp_combiner, key_columns=key_columns,
                            timestamp_column=timestamp_column, timestamp_unit=timestamp_unit,
                            fire_only_updated_panes=fire_only_updated_panes, join=join, aggregate2=aggregate2,
                            key_columns2=key_columns2, timestamp_column2=timestamp_column2,
                            count_order=count_order)
        self.spec = OperatorSpec.from_options(**self._kwargs)
        self._schemas: list[pa.Schema | None] = [schema, schema2]
        self.unit = UNIT_FACTORS[timestamp_unit]
        self.operator = WindowedOperator(self.spec)
        self._wm = MIN_TIME
        self._proc = 0
        self._panes: list[dict[str, Any]] = []
        self._late: list[dict[str, Any]] = []

    # ---- actions (each is one step) ----
    def add_elements(self, elements: list[dict[str, Any]] | pa.Table, *, watermark: int | None = None,
                     processing_time: int | None = None,
                     stream2: list[dict[str, Any]] | pa.Table | None = None) -> None:
        """One bundle, processed at the current watermark and processing time.

        ``watermark`` / ``processing_time`` (absolute, in ``timestamp_unit``) move the clocks as
        part of the same step — exactly what one Spark micro-batch does. ``stream2``: the second
        stream's elements of the same bundle (with ``join``).
        """
        if watermark is not None:
            if watermark * self.unit < self._wm:
                raise ValueError(f"the watermark must not go back: {watermark} < current {self._wm // self.unit}")
            self._wm = int(watermark) * self.unit
        if processing_time is not None:
            self._proc = max(self._proc, int(processing_time) * self.unit)
        table = elements if isinstance(elements, pa.Table) else pa.Table.from_pylist(list(elements))
        if self.spec.join is not None:
            table = self._union(table, stream2)
        elif stream2 is not None:
            raise ValueError("stream2 needs a TestStream with join=inner|left|outer|cogroup")
        if self.operator.bound and table.num_rows:
            self.operator.retype_null_columns(table.schema)
            table = _conform(table, self.operator.input_schema)
        self._step(table)

    def advance_watermark_to(self, t: int) -> None:
        us = int(t) * self.unit
        if us < self._wm:
            raise ValueError(f"the watermark must not go back: {t} < current {self._wm // self.unit}")
        self._wm = us
        self._step(None)

    def advance_watermark_to_infinity(self) -> None:
        self._wm = MAX_TIME
        self._step(None)

    def advance_processing_time(self, delta: int) -> None:
        """Move processing time forward by ``delta`` (in ``timestamp_unit``)."""
        if delta < 0:
            raise ValueError("processing time must not go back")
        self._proc += int(delta) * self.unit
        self._step(None)

    # ---- results ----
    def take_panes(self) -> list[dict[str, Any]]:
        out, self._panes = self._panes, []
        return out

    def take_late(self) -> list[dict[str, Any]]:
        out, self._late = self._late, []
        return out

    @property
    def watermark(self) -> int | None:
        return None if self._wm <= MIN_TIME else self._wm // self.unit

    # ---- snapshots ----
    def snapshot(self) -> bytes:
        import json
        schemas = [None if sc is None else sc.serialize().to_pybytes().hex() for sc in self._schemas]
        extra = json.dumps({"wm": self._wm, "proc": self._proc, "schemas": schemas}).encode()
        return len(extra).to_bytes(4, "big") + extra + state.snapshot(self.operator)

    @classmethod
    def restore(cls, blob: bytes, **kwargs: Any) -> "TestStream":
        import json
        n = int.from_bytes(blob[:4], "big")
        extra = json.loads(blob[4:4 + n])
        s = cls(**kwargs)
        s.operator = state.restore(s.spec, blob[4 + n:], where="TestStream snapshot")
        s._wm, s._proc = int(extra["wm"]), int(extra["proc"])
        s._schemas = [None if h is None else pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(h)))
                      for h in extra.get("schemas", [None, None])]
        return s

    # ---- internals ----
    def _union(self, t1: pa.Table, elements2: list[dict[str, Any]] | pa.Table | None) -> pa.Table:
        """Both streams' bundles as the operator's input (``spark_windowing.operator.join.union``)."""
        if elements2 is None:
            t2 = pa.table({})
        else:
            t2 = elements2 if isinstance(elements2, pa.Table) else pa.Table.from_pylist(list(elements2))
        tables = [t1, t2]
        for i, t in enumerate(tables):
            if not t.num_rows:
                continue
            if self._schemas[i] is None:
                self._schemas[i] = t.schema
            else:
                tables[i] = _conform(t, self._schemas[i])
        if None in self._schemas:
            if not t1.num_rows and not t2.num_rows:
                return pa.table({})
            missing = "schema" if self._schemas[0] is None else "schema2"
            raise ValueError(f"the first step of a join TestStream needs elements of both streams, or pass {missing}=")
        schema = join.union_schema(self._schemas[0], self._schemas[1], self.spec)
        return join.union(tables[0] if t1.num_rows else None, tables[1] if t2.num_rows else None, self.spec, schema)

    def _step(self, events: pa.Table | None) -> StepResult:
        result = self.operator.step(events, watermark=self._wm, processing_time=self._proc)
        self._panes += self._to_dicts(result.panes)
        self._late += self._to_dicts(result.late)
        return result

    def _to_dicts(self, table: pa.Table) -> list[dict[str, Any]]:
        if table.num_rows == 0:
            return []
        cols = {}
        for name in table.column_names:
            col = table.column(name)
            if name in _TIME_COLUMNS and pa.types.is_timestamp(col.type):
                ints = col.cast(pa.int64()).to_pylist()
                cols[name] = [None if v is None else v // self.unit for v in ints]
            else:
                cols[name] = col.to_pylist()
        names = list(cols)
        return [dict(zip(names, row)) for row in zip(*cols.values())]


def _conform(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """Cast a later bundle's inferred columns to the first bundle's types."""
    if schema is None:
        return table
    arrays, fields = [], []
    for f in table.schema:
        if f.name in schema.names:
            target = schema.field(f.name).type
            col = table.column(f.name)
            arrays.append(col if col.type.equals(target) else col.cast(target))
            fields.append(pa.field(f.name, target))
        else:
            arrays.append(table.column(f.name))
            fields.append(f)
    missing = [f for f in schema if f.name not in table.column_names]
    for f in missing:
        arrays.append(pa.nulls(table.num_rows, f.type))
        fields.append(f)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
