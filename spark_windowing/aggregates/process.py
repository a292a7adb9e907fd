"""Process functions over all elements of a pane (Flink's ``ProcessWindowFunction``), with
evictors (Flink's ``Evictor``, applied before the function) and Storm's view of what changed
(``TupleWindow.getNew()`` / ``getExpired()``).

``process=module:function`` names a function ``f(elements, ctx) -> dict`` that declares its
output columns as an attribute::

    def spread(elements: pa.Table, ctx: ProcessContext) -> dict:
        v = elements.column("v")
        return {"n": elements.num_rows, "spread": None if len(v) == 0 else pc.max(v).as_py() - pc.min(v).as_py()}
    spread.output_fields = [pa.field("n", pa.int64()), pa.field("spread", pa.int64())]
    spread.input = "pandas"              # optional: elements (and ctx.new/...) as pandas DataFrames
    spread.input_columns = ["v"]         # optional projection (default: every upstream column)

The function is called once per fired pane, with the pane's elements in arrival order (upstream
order within a micro-batch; a merged session interleaves its parts by arrival; Storm's mixed
windows give timestamp order) and returns ``{column: value}`` for exactly its ``output_fields``.
It is also called for an empty pane (an ON_TIME pane of a window whose elements were all fired
early under ``discarding``), with an empty table.

Which elements a pane holds follows the accumulation mode, as for aggregates: ``discarding`` —
the elements since the last firing; ``accumulating`` / ``accumulating_and_retracting`` — all
buffered elements (retractions of the previous output are emitted as for aggregates). Session
merges merge the buffers.

Evictors (``evictor`` option), applied to those elements before the function (Flink's
``evictBefore``); evicted elements leave the window's buffer for good, as in Flink:

==============================  ===============================================================
``count(n)``                    keeps the last ``n`` elements (Flink ``CountEvictor.of(n)``)
``time(<duration>)``            keeps elements with ``ts > max_ts - d``, ``max_ts`` the pane's
                                latest event time (Flink ``TimeEvictor.of(d)``)
``delta(<threshold>, <col>)``   evicts elements with ``|col - col of the last element| >=
                                threshold``; a null difference evicts nothing (Flink
                                ``DeltaEvictor.of(threshold, |a - b|)``)
==============================  ===============================================================

``ctx`` (``ProcessContext``) carries the pane's key (a dict, ``None`` when non-keyed),
``window_start``/``window_end`` (UTC datetimes, as the pane row), ``window_seq`` (count and mixed
windows), ``pane_timing``, ``pane_index``, ``is_final``, ``watermark``, ``batch_time``,
``batch_seq``, and three element sets in the elements' form (Storm's ``TupleWindow``):

* ``ctx.new``: the pane's elements that arrived since the window's last firing;
* ``ctx.evicted``: the elements the evictor removed at this firing;
* ``ctx.expired``: the elements of the window's previous pane that the accumulation mode
  discarded (``discarding``: the whole previous pane; empty under the accumulating modes, where
  elements leave a window only through the evictor).

So ``pane == (previous pane - expired - evicted) + new`` at every firing.

>>> import pyarrow as pa
>>> from spark_windowing.testing import TestStream
>>> s = TestStream(window="tumbling(10 milliseconds)", process="tests.core.fixtures.process_functions:ids",
...                evictor="count(2)", trigger="Repeatedly(AfterCount(2))", accumulation_mode="accumulating")
>>> s.add_elements([{"ts": 1, "id": 1}, {"ts": 2, "id": 2}])
>>> s.add_elements([{"ts": 3, "id": 3}, {"ts": 4, "id": 4}])
>>> [(p["ids"], p["new_ids"], p["evicted_ids"]) for p in s.take_panes()]
[([1, 2], [1, 2], []), ([3, 4], [3, 4], [1, 2])]
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing._arrow import empty_table
from spark_windowing._old_paths import current_module
from spark_windowing._parse import parse_call
from spark_windowing._time import parse_duration
from spark_windowing.errors import OptionError, ProcessError

PROCESS_FORMS = ("module:function importable on the driver and the workers, with an attribute "
                 "output_fields (a list of pyarrow fields or a schema); optional input = 'pandas' "
                 "and input_columns = [...]")
EVICTOR_FORMS = "count(<n>), time(<duration>), delta(<threshold>, <column>) — with process only"
TS, ARR = "__ts", "__arr"   # hidden per-element columns: event time (µs), arrival number
_RESERVED = {"window_start", "window_end", "window_seq", "kind", "pane_timing", "pane_index", "is_final",
             "pane_timestamp", "watermark", "batch_time", "batch_seq"}


# ---------------------------------------------------------------------------------------------- evictors

@dataclass(frozen=True)
class CountEvictor:
    """Keep the last ``n`` elements (arrival order)."""

    n: int

    def spec(self) -> str:
        return f"count({self.n})"

    def keep(self, pane: pa.Table) -> np.ndarray:
        keep = np.zeros(pane.num_rows, dtype=bool)
        keep[max(pane.num_rows - self.n, 0):] = True
        return keep


@dataclass(frozen=True)
class TimeEvictor:
    """Keep the elements with ``ts > max_ts - size`` (µs)."""

    size: int

    def spec(self) -> str:
        return f"time({self.size} microseconds)"

    def keep(self, pane: pa.Table) -> np.ndarray:
        ts = pane.column(TS).to_numpy()
        return ts > ts.max() - self.size if len(ts) else np.zeros(0, dtype=bool)


@dataclass(frozen=True)
class DeltaEvictor:
    """Evict the elements whose ``|column - column of the last element| >= threshold``."""

    threshold: float
    column: str

    def spec(self) -> str:
        return f"delta({self.threshold!r}, {self.column})"

    def keep(self, pane: pa.Table) -> np.ndarray:
        if pane.num_rows == 0:
            return np.zeros(0, dtype=bool)
        v = pane.column(self.column).cast(pa.float64())
        delta = pc.abs(pc.subtract(v, v[-1]))
        evict = pc.fill_null(pc.greater_equal(delta, self.threshold), False)
        return ~np.asarray(evict.to_numpy(zero_copy_only=False), dtype=bool)


Evictor = CountEvictor | TimeEvictor | DeltaEvictor


def parse_evictor(text: str) -> Evictor:
    """Parse the ``evictor`` option; raise OptionError naming it."""
    call = parse_call(text, option="evictor", accepted=EVICTOR_FORMS)
    name, args = call.name.lower(), call.args
    fail = lambda why: OptionError("evictor", text, EVICTOR_FORMS, why=why)  # noqa: E731
    if call.kwargs or any(not isinstance(a, str) for a in args):
        raise fail("arguments are plain values")
    if name == "count" and len(args) == 1:
        try:
            n = int(args[0])
        except ValueError:
            raise fail(f"count needs an integer, got {args[0]!r}") from None
        if n < 1:
            raise fail("count needs n >= 1")
        return CountEvictor(n)
    if name == "time" and len(args) == 1:
        return TimeEvictor(parse_duration(args[0], option="evictor", allow_zero=False))
    if name == "delta" and len(args) == 2:
        try:
            threshold = float(args[0])
        except ValueError:
            raise fail(f"delta needs a number as threshold, got {args[0]!r}") from None
        if not threshold > 0 or threshold == float("inf"):
            raise fail("delta needs a finite threshold > 0")
        return DeltaEvictor(threshold, args[1].strip("`"))
    raise fail(f"unknown evictor {call.name}({', '.join(map(str, args))})")


# ---------------------------------------------------------------------------------------------- buffers

class PaneBuffer:
    """The buffered elements of one (key, window), each with hidden ``__ts`` and ``__arr``.

    ``fired``: elements of earlier panes still in the window (accumulating modes); ``fresh``:
    chunks added since the last firing; ``expired``: the previous pane, once discarded
    (``discarding``), until the next firing reports it.
    """

    __slots__ = ("fired", "fresh", "expired")

    def __init__(self) -> None:
        self.fired: pa.Table | None = None
        self.fresh: list[pa.Table] = []
        self.expired: pa.Table | None = None

    def __getstate__(self):
        """One Arrow IPC stream of every part, plus the parts' lengths (-1: absent). IPC writes
        only the rows of a slice; pickling a sliced table would write its whole batch."""
        parts = [t for t in (self.fired, *self.fresh, self.expired) if t is not None]
        lengths = (-1 if self.fired is None else self.fired.num_rows, [t.num_rows for t in self.fresh],
                   -1 if self.expired is None else self.expired.num_rows)
        if not parts:
            return None, lengths
        table = _concat(parts)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes(), lengths

    def __setstate__(self, state) -> None:
        blob, (n_fired, n_fresh, n_expired) = state
        self.fired, self.fresh, self.expired = None, [], None
        if blob is None:
            return
        table = pa.ipc.open_stream(blob).read_all()
        pos = 0

        def take(n: int) -> pa.Table:
            nonlocal pos
            pos += n
            return table.slice(pos - n, n)
        self.fired = take(n_fired) if n_fired >= 0 else None
        self.fresh = [take(n) for n in n_fresh]
        self.expired = take(n_expired) if n_expired >= 0 else None

    def merged(self, other: "PaneBuffer") -> "PaneBuffer":
        """The buffer of a merged session (arrival order is restored at the next firing)."""
        out = PaneBuffer()
        out.fired = _concat([t for t in (self.fired, other.fired) if t is not None])
        out.fresh = self.fresh + other.fresh
        out.expired = _concat([t for t in (self.expired, other.expired) if t is not None])
        return out

    def contents(self) -> tuple[pa.Table | None, np.ndarray]:
        """All buffered elements in arrival order, and which of them are fresh."""
        parts = ([self.fired] if self.fired is not None else []) + self.fresh
        if not parts:
            return None, np.zeros(0, dtype=bool)
        if len(parts) == 1:  # each part is in arrival order (BoundProcess.groups)
            return parts[0], np.full(parts[0].num_rows, self.fired is None)
        table = _concat(parts)
        n_old = self.fired.num_rows if self.fired is not None else 0
        new = np.arange(table.num_rows) >= n_old
        arr = table.column(ARR).to_numpy()
        if not (np.diff(arr) > 0).all():  # parts of a merged session interleave
            order = np.argsort(arr, kind="stable")
            table, new = table.take(pa.array(order)), new[order]
        return table, new


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def _take(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """The rows of ``keep``; a slice when they are a suffix (count evictors, most time evictors)."""
    first = int(np.argmax(keep))
    if keep[first:].all():
        return table.slice(first)
    return table.filter(pa.array(keep))


def _sorted(table: pa.Table | None) -> pa.Table | None:
    if table is None or table.num_rows < 2:
        return table
    arr = table.column(ARR).to_numpy()
    if (np.diff(arr) > 0).all():
        return table
    return table.take(pa.array(np.argsort(arr, kind="stable")))


# ---------------------------------------------------------------------------------------------- context

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _utc(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + timedelta(microseconds=int(us))


@dataclass(frozen=True)
class PaneInfo:
    """What the operator knows of the panes it fires (one entry per fired row); times in µs."""

    keys: pa.Table | None
    window_start: np.ndarray
    window_end: np.ndarray
    window_seq: np.ndarray | None
    pane_timing: list[str]
    pane_index: np.ndarray
    is_final: np.ndarray
    watermark: int | None
    batch_time: int
    batch_seq: int

    def key(self, i: int) -> dict | None:
        return None if self.keys is None else self.keys.slice(i, 1).to_pylist()[0]


class ProcessContext:
    """The pane a process function is called for. Everything is computed when read, so a
    function pays only for what it uses; ``new``, ``evicted`` and ``expired`` come in the
    function's input form (Arrow table or pandas DataFrame)."""

    __slots__ = ("_info", "_i", "_sets", "_convert")

    def __init__(self, info: PaneInfo, i: int, sets: Callable[[str], pa.Table | None],
                 convert: Callable[[pa.Table | None], Any]) -> None:
        self._info, self._i, self._sets, self._convert = info, i, sets, convert

    key = property(lambda self: self._info.key(self._i), doc="the key columns' values (None: non-keyed)")
    window_start = property(lambda self: _utc(self._info.window_start[self._i]), doc="as the pane row")
    window_end = property(lambda self: _utc(self._info.window_end[self._i]), doc="as the pane row")
    window_seq = property(lambda self: None if self._info.window_seq is None else int(self._info.window_seq[self._i]),
                          doc="count and mixed windows: the window's number per key")
    pane_timing = property(lambda self: self._info.pane_timing[self._i])
    pane_index = property(lambda self: int(self._info.pane_index[self._i]))
    is_final = property(lambda self: bool(self._info.is_final[self._i]))
    watermark = property(lambda self: _utc(self._info.watermark))
    batch_time = property(lambda self: _utc(self._info.batch_time))
    batch_seq = property(lambda self: self._info.batch_seq)
    new = property(lambda self: self._convert(self._sets("new")), doc="pane elements new since the last firing")
    evicted = property(lambda self: self._convert(self._sets("evicted")), doc="evicted at this firing")
    expired = property(lambda self: self._convert(self._sets("expired")), doc="the discarded previous pane")

    def __repr__(self) -> str:
        return (f"ProcessContext(key={self.key!r}, window=[{self.window_start}, {self.window_end}), "
                f"pane_timing={self.pane_timing!r}, pane_index={self.pane_index})")


class _Sets:
    """A firing's new / evicted / expired elements, computed on first use."""

    __slots__ = ("elements", "pane", "new", "keep", "expired")

    def __init__(self, elements, pane, new, keep, expired) -> None:
        self.elements, self.pane, self.new, self.keep, self.expired = elements, pane, new, keep, expired

    def __call__(self, which: str) -> pa.Table | None:
        if which == "expired":
            return _sorted(self.expired) if self.expired is not None else self.elements.slice(0, 0)
        if which == "evicted":
            return self.elements.slice(0, 0) if self.keep is None else self.elements.filter(pa.array(~self.keep))
        new = self.new if self.keep is None else self.new[self.keep]
        return self.pane if new.all() else self.pane.filter(pa.array(new))


# ---------------------------------------------------------------------------------------------- the function

def load_process(target: str) -> tuple[Callable, list[pa.Field]]:
    """Import ``module:function`` and read its ``output_fields``; raise OptionError('process')."""
    module, _, name = target.partition(":")
    try:
        fn = getattr(importlib.import_module(current_module(module)), name)
    except (ImportError, AttributeError) as e:
        raise OptionError("process", target, PROCESS_FORMS, why=str(e)) from None
    if not callable(fn):
        raise OptionError("process", target, PROCESS_FORMS, why=f"{target} is not callable")
    raw = getattr(fn, "output_fields", None)
    if raw is None:
        raise OptionError("process", target, PROCESS_FORMS, why=f"{target} has no attribute 'output_fields'")
    try:
        fields = [f if isinstance(f, pa.Field) else pa.field(*f) for f in raw]
    except (TypeError, ValueError) as e:
        raise OptionError("process", target, PROCESS_FORMS, why=f"bad output_fields: {e}") from None
    names = [f.name for f in fields]
    if not fields or len(set(names)) != len(names):
        raise OptionError("process", target, PROCESS_FORMS,
                          why=f"output_fields must name distinct columns, got {names}")
    clash = sorted(set(names) & _RESERVED)
    if clash:
        raise OptionError("process", target, PROCESS_FORMS, why=f"output column(s) {clash} are pane columns")
    mode = getattr(fn, "input", "arrow")
    if mode not in ("arrow", "pandas"):
        raise OptionError("process", target, PROCESS_FORMS, why=f"input must be 'arrow' or 'pandas', got {mode!r}")
    return fn, fields


def check_target(text: str) -> str:
    """``module:function`` syntax (loaded by ``load_process``)."""
    t = str(text).strip()
    module, sep, name = t.partition(":")
    if not sep or not module or not name.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        raise OptionError("process", text, PROCESS_FORMS, why="expected module:function")
    return t


class BoundProcess:
    """A process function bound to the upstream schema (the state of a ``process`` aggregate)."""

    def __init__(self, target: str, schema: pa.Schema, evictor: Evictor | None) -> None:
        self.target = target
        self.fn, self.fields = load_process(target)
        self.pandas = getattr(self.fn, "input", "arrow") == "pandas"
        cols = getattr(self.fn, "input_columns", None)
        names = schema.names
        if cols is None:
            cols = list(names)
        missing = [c for c in cols if c not in names]
        if missing:
            raise OptionError("process", target, f"input_columns among the upstream columns {names}",
                              why=f"no column(s) {missing}")
        self.input_columns = list(cols)
        stored = set(cols)
        if isinstance(evictor, DeltaEvictor):
            t = schema.field(evictor.column).type if evictor.column in names else None
            if t is None or not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
                                 or pa.types.is_null(t)):
                raise OptionError("evictor", evictor.spec(), f"delta(<threshold>, <numeric column of {names}>)",
                                  why=f"column {evictor.column!r} is {'missing' if t is None else t}")
            stored.add(evictor.column)
        self.stored = [c for c in names if c in stored]
        self.schema = pa.schema([schema.field(c) for c in self.stored] +
                                [pa.field(TS, pa.int64()), pa.field(ARR, pa.int64())])  # of buffered elements
        self.evictor = evictor

    # ---- adding
    def groups(self, pairs: pa.Table, g: np.ndarray, ts: np.ndarray, arrival: np.ndarray,
               rows: np.ndarray) -> np.ndarray:
        """Per target row (``rows``, sorted unique), its new elements: one stable sort by row,
        then a slice per row."""
        order = np.lexsort((arrival, g))  # by row, each row's elements in arrival order
        table = pairs.select(self.stored).append_column(TS, pa.array(ts, pa.int64())) \
                     .append_column(ARR, pa.array(arrival, pa.int64())).take(pa.array(order))
        sorted_g = g[order]
        lo, hi = np.searchsorted(sorted_g, rows, side="left"), np.searchsorted(sorted_g, rows, side="right")
        out = np.empty(len(rows), dtype=object)
        for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
            out[i] = table.slice(a, b - a)
        return out

    @staticmethod
    def add(cells: np.ndarray, rows: np.ndarray, chunks: np.ndarray) -> None:
        for r, chunk in zip(rows.tolist(), chunks):
            cells[r].fresh.append(chunk)

    # ---- firing
    def fire(self, cells: np.ndarray, info: PaneInfo) -> list[pa.Array]:
        """Evict, call the function once per pane, and return the output columns."""
        outs: list[dict] = []
        for i, buf in enumerate(cells):  # one call per pane: the function is Python
            elements, new = buf.contents()
            if elements is None:  # an empty pane (e.g. ON_TIME after early firings, discarding)
                elements = empty_table(self.schema)
            keep = self.evictor.keep(elements) if self.evictor is not None else None
            if keep is not None and keep.all():
                keep = None
            pane = elements if keep is None else _take(elements, keep)
            ctx = ProcessContext(info, i, _Sets(elements, pane, new, keep, buf.expired), self._convert)
            result = self.fn(self._convert(pane), ctx)
            outs.append(self._check(result, ctx))
            buf.fired, buf.fresh, buf.expired = pane, [], None
        return self._arrays(outs, info)

    def _convert(self, table: pa.Table):
        table = table.select(self.input_columns)
        return table.to_pandas() if self.pandas else table

    def _check(self, result: Any, ctx: ProcessContext) -> dict:
        if not isinstance(result, Mapping):
            raise ProcessError(f"process function {self.target} returned {type(result).__name__} for {ctx!r}; "
                               f"it must return a dict {{column: value}} for its output_fields "
                               f"{[f.name for f in self.fields]}")
        want = [f.name for f in self.fields]
        if set(result) != set(want):
            raise ProcessError(f"process function {self.target} returned columns {sorted(map(str, result))} for "
                               f"{ctx!r}; its output_fields are {want} (missing: "
                               f"{sorted(set(want) - set(result))}, unexpected: {sorted(set(result) - set(want))})")
        return {k: (v.as_py() if isinstance(v, pa.Scalar) else v) for k, v in result.items()}

    def _arrays(self, outs: list[dict], info: PaneInfo) -> list[pa.Array]:
        arrays = []
        for f in self.fields:
            values = [o[f.name] for o in outs]
            try:
                arrays.append(pa.array(values, f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                for i, v in enumerate(values):  # name the pane and the value
                    try:
                        pa.array([v], f.type)
                    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as e:
                        raise ProcessError(
                            f"process function {self.target} returned {f.name}={v!r} for key {info.key(i)!r}, "
                            f"window [{_utc(info.window_start[i])}, {_utc(info.window_end[i])}); output_fields "
                            f"declare {f.name} as {f.type} ({e})") from None
                raise
        return arrays

    # ---- after firing, merging
    @staticmethod
    def discard(cells: np.ndarray, rows: np.ndarray) -> None:
        """Discarding mode: the pane just fired leaves the buffer (reported next time as expired)."""
        for r in rows.tolist():
            buf = cells[r]
            buf.expired, buf.fired, buf.fresh = buf.fired, None, []

    @staticmethod
    def clear(cells: np.ndarray, rows: np.ndarray) -> None:
        for r in rows.tolist():
            cells[r] = PaneBuffer()
