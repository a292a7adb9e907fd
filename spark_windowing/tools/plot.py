"""Pane timeline: a picture of what the triggers did, per key, over event time.

::

    python -m spark_windowing.tools.plot /lake/panes/clicks -o panes.png [--keys 8] [--key alice ...]

``<pane table>`` is a pane sink directory ``P`` (Delta tables ``P/triggers`` and
``P/retractions``), a single Delta table, or a parquet file or directory of pane rows
(``spark_windowing.panes``).

How to read the picture:

* one horizontal lane per key (the ``max_keys`` keys with the most pane rows, or the keys asked
  for); the x axis is event time (UTC);
* each window is a grey bar ``[window_start, window_end)``; windows whose drawings would overlap
  (sliding windows, session merges, late firings reaching into the next window) are stacked in
  sub-lanes of the key's lane;
* each TRIGGER pane is a marker at the **watermark** it fired at (a pane fired before any
  watermark sits at its window start, or at the left edge for a global window): EARLY (blue
  circle) usually left of or inside the bar, ON_TIME (green square) at or just right of the
  window end, LATE (orange triangle) further right. A thin line ties markers outside the bar to
  their window. A black outline marks ``is_final``. Panes of one window that fired at the same
  watermark are fanned out to the right, in firing order (batch, then pane index);
* each RETRACTION is a red ``x`` drawn over the TRIGGER pane it withdraws (same window and
  pane index): that pane is drawn hollow and crossed out; if that pane is not in the table, the
  ``x`` sits at the retraction's own watermark. A window whose latest pane was retracted (e.g. a
  session merged away) is drawn hatched;
* a window that is **closed** (a pane sink directory whose ``current`` table marks it final: the
  watermark passed its end plus ``allowedLateness``, so no pane can follow; the pane log has no
  pane saying so, because an expiring window fires nothing) has a solid black frame; an open
  window a grey one.

>>> from spark_windowing.tools.plot import load_panes, plot_panes     # doctest: +SKIP
>>> result = plot_panes(load_panes("/lake/panes/clicks"), "panes.png", max_keys=4)  # doctest: +SKIP
>>> result.summary.markers                                      # doctest: +SKIP
{'EARLY': 12, 'ON_TIME': 4, 'LATE': 3, 'RETRACTION': 9}

Matplotlib is the optional extra ``plot`` (``pip install spark-windowing[plot]``); it is imported
only when drawing, with the non-interactive Agg canvas (the global pyplot backend is not touched).

(Long module: a command line, the reading of pane tables, and the drawing of one figure, which
only this tool needs.)
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_windowing.datasource.storage import filesystem
from spark_windowing.datasource.storage.layout import CURRENT, HISTORY_TABLES, table_uri
from spark_windowing.panes import (KIND_RETRACTION, KIND_TRIGGER, TIMING_EARLY, TIMING_LATE,
                                   TIMING_ON_TIME, split_pane_schema)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["plot_panes", "load_panes", "main", "PlotResult", "PlotSummary", "INSTALL_HINT"]

INSTALL_HINT = "pip install spark-windowing[plot]"

#: Marker categories, in legend and summary order.
CATEGORIES: tuple[str, ...] = (TIMING_EARLY, TIMING_ON_TIME, TIMING_LATE, KIND_RETRACTION)

_STYLE: dict[str, dict[str, Any]] = {
    TIMING_EARLY: {"marker": "o", "color": "#3b7dd8", "label": "EARLY"},
    TIMING_ON_TIME: {"marker": "s", "color": "#2ca25f", "label": "ON_TIME"},
    TIMING_LATE: {"marker": "^", "color": "#f28e2b", "label": "LATE"},
    KIND_RETRACTION: {"marker": "x", "color": "#d62728", "label": "RETRACTION (crossed-out pane)"},
}
_BAR_COLOR, _BAR_EDGE = "#d5dbe3", "#8a96a8"
_TAIL_COLOR = "#9aa5b4"
_FINAL_EDGE, _PLAIN_EDGE = "#111111", "#ffffff"
_KIND_ORDER = {KIND_RETRACTION: 0, KIND_TRIGGER: 1}   # a retraction precedes its replacement

# Window bounds outside these are "unbounded" (global windows: 0001-01-01 .. 9999-12-31).
_BOUNDED_MIN_US = int(datetime(1000, 1, 1, tzinfo=timezone.utc).timestamp() * 1_000_000)
_BOUNDED_MAX_US = int(datetime(9000, 1, 1, tzinfo=timezone.utc).timestamp() * 1_000_000)

_ROW_INCHES = 0.40      # height of one sub-lane
_KEY_GAP = 0.55         # vertical gap between two keys' lanes, in sub-lane units
_BAR_HEIGHT = 0.52      # window bar height, in sub-lane units
_DODGE = 0.010          # same-watermark panes of one window are fanned out by this x-span fraction
_PACK_GAP = 0.012       # min x-span fraction between two windows sharing a sub-lane
_MARKER_SIZE = 95       # scatter size (points^2)


# --------------------------------------------------------------------------------------------
# Public surface

@dataclass(frozen=True)
class PlotSummary:
    """What was drawn: counted from the drawn artists, so a test can check it against the input.

    ``markers`` maps EARLY / ON_TIME / LATE (TRIGGER panes by timing) and RETRACTION to the number
    of markers drawn; ``final`` counts TRIGGER markers outlined as ``is_final``; ``crossed_out``
    counts TRIGGER markers drawn hollow because a RETRACTION in the table withdraws them.
    """

    keys: tuple[str, ...]           # lane labels, top to bottom
    total_keys: int                 # distinct keys in the input
    windows: int                    # window bars drawn
    sub_lanes: int                  # rows in all lanes together
    markers: Mapping[str, int] = field(default_factory=dict)
    final: int = 0
    crossed_out: int = 0
    closed: int = 0                 # window bars framed as closed (``current`` marks them final)

    @property
    def triggers(self) -> int:
        return sum(self.markers.get(t, 0) for t in (TIMING_EARLY, TIMING_ON_TIME, TIMING_LATE))

    @property
    def retractions(self) -> int:
        return self.markers.get(KIND_RETRACTION, 0)

    def describe(self) -> str:
        """One line: ``3 of 3 keys, 9 windows | TRIGGER 14 (EARLY 5, ...; final 4) | ...``."""
        timings = ", ".join(f"{t} {self.markers.get(t, 0)}"
                            for t in (TIMING_EARLY, TIMING_ON_TIME, TIMING_LATE))
        return (f"{len(self.keys)} of {_plural(self.total_keys, 'key')}, "
                f"{_plural(self.windows, 'window')} | "
                f"TRIGGER {self.triggers} ({timings}; final {self.final}) | "
                f"RETRACTION {self.retractions}" + (f" | closed windows {self.closed}" if self.closed else ""))


class PlotResult(str):
    """The path of the written image (a ``str``), carrying the ``summary`` of what was drawn."""

    summary: PlotSummary

    def __new__(cls, path: str, summary: PlotSummary) -> "PlotResult":
        obj = super().__new__(cls, path)
        obj.summary = summary
        return obj


def load_panes(path: str) -> pa.Table:
    """Read pane rows from a pane sink directory, a Delta table, or parquet; validate the schema.

    * a directory with Delta tables ``triggers`` and/or ``retractions`` (the pane sink): both,
      concatenated; when ``current`` is there too, a column ``window_closed`` says which windows
      it marks final (closed: the watermark passed their end plus ``allowedLateness``);
    * a Delta table directory (has ``_delta_log``);
    * a parquet file, or a directory of parquet files.

    ``path`` is a local path or a URI that ``pyarrow.fs`` understands (``s3://``, ``abfss://`` ...).
    Raises ``FileNotFoundError`` if nothing is there and ``ValueError`` if the rows are not panes.
    """
    import pyarrow.fs as pafs

    fs, base = filesystem(path)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"no pane table at {path!r}")
    if info.type == pafs.FileType.Directory:
        parts = [name for name in HISTORY_TABLES if _is_delta(fs, f"{base}/{name}")]
        if parts:
            tables = [_read_delta(table_uri(path, name)) for name in parts]
            table = pa.concat_tables(tables, promote_options="permissive") if len(tables) > 1 \
                else tables[0]
            if _is_delta(fs, f"{base}/{CURRENT}"):
                table = _with_closed(table, _read_delta(table_uri(path, CURRENT)))
        elif _is_delta(fs, base):
            table = _read_delta(path)
        else:
            import pyarrow.dataset as ds
            table = ds.dataset(base, filesystem=fs, format="parquet").to_table()
    else:
        import pyarrow.parquet as pq
        table = pq.read_table(base, filesystem=fs)
    try:
        split_pane_schema(table.schema)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return table


def plot_panes(panes: pa.Table, output: str, *, keys: Sequence[Any] | None = None,
               max_keys: int = 8, title: str | None = None) -> PlotResult:
    """Draw the pane timeline of ``panes`` (pane rows, e.g. from ``load_panes``) to ``output``.

    ``keys``: the keys to draw, in this order; each is a key value (a tuple for several key
    columns), or its text (``"alice"``; ``"alice,3"`` for two key columns). Default: the
    ``max_keys`` keys with the most pane rows. The image format follows ``output``'s suffix
    (``.png``, ``.svg``, ``.pdf``). Returns the output path as a ``PlotResult`` whose ``summary``
    counts what was drawn. Raises ``ValueError`` for unknown keys or a non-pane table and
    ``ImportError`` (naming ``spark-windowing[plot]``) if matplotlib is missing.
    """
    if max_keys < 1:
        raise ValueError(f"max_keys must be >= 1, got {max_keys}")
    key_fields, _ = split_pane_schema(panes.schema)
    key_names = [f.name for f in key_fields]
    figure_cls, canvas_cls = _matplotlib()
    selected, total_keys = _select_keys(panes, key_names, keys, max_keys)
    lanes = [_build_lane(key, key_names, rows) for key, rows in selected]
    span = _x_span(lanes)
    for lane in lanes:
        lane.place(span)

    n_rows = sum(lane.n_sub for lane in lanes)
    height = max(3.2, 2.05 + _ROW_INCHES * (n_rows + _KEY_GAP * max(len(lanes) - 1, 0)))
    fig = figure_cls(figsize=(13, height), dpi=110)
    canvas_cls(fig)
    ax = fig.add_axes((0.14, 0.8 / height, 0.83, 1 - 1.8 / height))
    counts, final, crossed_out = _draw(ax, lanes, span)
    summary = PlotSummary(keys=tuple(lane.label for lane in lanes), total_keys=total_keys,
                          windows=sum(len(lane.windows) for lane in lanes), sub_lanes=n_rows,
                          markers={c: counts.get(c, 0) for c in CATEGORIES}, final=final,
                          crossed_out=crossed_out, closed=sum(w.closed for lane in lanes for w in lane.windows))
    _decorate(fig, ax, summary, title, height)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output)
    return PlotResult(output, summary)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_windowing.tools.plot <pane table> -o panes.png``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m spark_windowing.tools.plot",
        description="Draw a pane timeline: per key, windows over event time with EARLY / "
                    "ON_TIME / LATE firings and retractions.")
    parser.add_argument("table", help="pane sink directory (with triggers/ and retractions/), "
                                      "a Delta table, or a parquet file or directory")
    parser.add_argument("-o", "--output", default="panes.png",
                        help="image to write (.png, .svg, .pdf); default panes.png")
    parser.add_argument("--keys", type=int, default=8, metavar="N",
                        help="draw the N keys with the most panes (default 8)")
    parser.add_argument("--key", action="append", metavar="VALUE",
                        help="draw this key (repeatable; 'a,b' for several key columns)")
    parser.add_argument("--title", help="title above the plot (default: the table path)")
    args = parser.parse_args(argv)
    try:
        panes = load_panes(args.table)
        result = plot_panes(panes, args.output, keys=args.key, max_keys=args.keys,
                            title=args.title or args.table)
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {result}: {result.summary.describe()}")
    return 0


# --------------------------------------------------------------------------------------------
# Loading

def _is_delta(fs, path: str) -> bool:
    import pyarrow.fs as pafs
    return fs.get_file_info(f"{path}/_delta_log").type == pafs.FileType.Directory


def _read_delta(path: str) -> pa.Table:
    """Read a Delta table through a native ``pyarrow.fs`` filesystem rooted at the table.

    deltalake's default filesystem is implemented in Python (``PyFileSystem``); with pyarrow's
    background I/O threads it can abort the interpreter at exit ("terminate called without an
    active exception", delta-io/delta-rs#2184) — a CLI must not exit with SIGABRT.
    """
    import pyarrow.fs as pafs
    from deltalake import DeltaTable

    fs, root = filesystem(path)
    return DeltaTable(path).to_pyarrow_table(filesystem=pafs.SubTreeFileSystem(root, fs))


def _with_closed(panes: pa.Table, current: pa.Table) -> pa.Table:
    """``panes`` plus ``window_closed``: whether ``current`` marks the pane's key and window final."""
    try:
        key_fields, _ = split_pane_schema(panes.schema)
        on = [f.name for f in key_fields] + ["window_start", "window_end"] + \
            (["window_seq"] if "window_seq" in panes.column_names else [])
        final = current.filter(pc.field("is_final")).select(on)
        final = final.append_column("window_closed", pa.array([True] * final.num_rows, pa.bool_()))
        joined = panes.join(final.cast(pa.schema([panes.schema.field(c) for c in on] +
                                                 [pa.field("window_closed", pa.bool_())])),
                            keys=on, join_type="left outer", use_threads=False)
        return joined.set_column(joined.schema.get_field_index("window_closed"), "window_closed",
                                 pc.fill_null(joined.column("window_closed"), False))
    except (pa.ArrowException, ValueError, KeyError):   # e.g. nested keys: drawn without it
        return panes


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(f"the pane timeline needs matplotlib, which is not installed: "
                          f"{INSTALL_HINT}") from e
    return Figure, FigureCanvasAgg


# --------------------------------------------------------------------------------------------
# Model: keys -> windows -> panes, all times in UTC microseconds

@dataclass
class _Pane:
    kind: str
    timing: str
    index: int
    final: bool
    at_us: int | None               # where it sits on the event-time axis (None: left edge)
    x_us: float = 0.0               # after fanning out
    retracted: bool = False         # a TRIGGER pane crossed out by a RETRACTION


@dataclass
class _Window:
    start_us: int
    end_us: int
    panes: list[_Pane] = field(default_factory=list)
    sub: int = 0                    # sub-lane within the key's lane
    closed: bool = False            # ``current`` marks it final (``load_panes``' ``window_closed``)

    @property
    def bounded(self) -> bool:
        return self.start_us >= _BOUNDED_MIN_US and self.end_us <= _BOUNDED_MAX_US

    @property
    def withdrawn(self) -> bool:
        """The window's latest TRIGGER pane was retracted and nothing replaced it."""
        triggers = [p for p in self.panes if p.kind == KIND_TRIGGER]
        retracted = {p.index for p in self.panes if p.kind == KIND_RETRACTION}
        if not retracted:
            return False
        last = max((p.index for p in triggers), default=-1)
        return last in retracted or (not triggers)


@dataclass
class _Lane:
    label: str
    windows: list[_Window]
    n_sub: int = 1

    def describe(self) -> str:
        kinds = Counter(p.kind for w in self.windows for p in w.panes)
        text = f"{kinds[KIND_TRIGGER]} panes"
        return text + (f", {kinds[KIND_RETRACTION]} retracted" if kinds[KIND_RETRACTION] else "")

    def place(self, span: tuple[float, float]) -> None:
        """Fan out same-watermark panes, then pack windows into as few sub-lanes as possible."""
        lo, hi = span
        width = hi - lo
        ends: list[float] = []       # right edge of the last extent in each sub-lane
        for w in sorted(self.windows, key=lambda w: (w.start_us, w.end_us)):
            _fan_out(w, _DODGE * width, lo + _DODGE * width)
            xs = [p.x_us for p in w.panes]
            left = min([w.start_us, *xs]) if w.bounded else lo
            right = max([w.end_us, *xs]) if w.bounded else hi
            for i, end in enumerate(ends):
                if end + _PACK_GAP * width <= left:
                    w.sub, ends[i] = i, right
                    break
            else:
                w.sub = len(ends)
                ends.append(right)
        self.n_sub = max(len(ends), 1)


def _fan_out(w: _Window, step: float, left: float) -> None:
    """Place TRIGGER panes in firing order, at least ``step`` apart; retractions on their pane.

    A pane without a position (no watermark yet, unbounded window) goes to the ``left`` edge.
    """
    last = -np.inf
    by_index: dict[int, _Pane] = {}
    for p in w.panes:
        if p.kind == KIND_TRIGGER:
            p.x_us = max(left if p.at_us is None else float(p.at_us), last + step)
            last = p.x_us
            by_index.setdefault(p.index, p)
    last = -np.inf
    for p in w.panes:
        if p.kind == KIND_RETRACTION:
            target = by_index.get(p.index)
            if target is None:         # the retracted pane is not in the table
                p.x_us = max(left if p.at_us is None else float(p.at_us), last + step)
                last = p.x_us
            else:
                p.x_us, target.retracted = target.x_us, True


def _select_keys(panes: pa.Table, key_names: list[str], keys: Sequence[Any] | None,
                 max_keys: int) -> tuple[list[tuple[tuple, list[dict]]], int]:
    """[(key tuple, pane rows of that key)] in lane order, and the number of distinct keys."""
    if not key_names:
        rows = _rows(panes, key_names)
        return ([((), rows)] if rows else []), (1 if rows else 0)
    counts = panes.group_by(key_names).aggregate([("kind", "count")])
    distinct = list(zip(*(counts.column(n).to_pylist() for n in key_names)))
    n_rows = counts.column("kind_count").to_pylist()
    if keys is None:
        order = sorted(range(len(distinct)), key=lambda i: (-n_rows[i], _key_text(distinct[i])))
        chosen = [distinct[i] for i in order[:max_keys]]
    else:
        chosen = [_match_key(k, distinct, key_names) for k in keys]
    wanted = pa.table({n: pa.array([k[i] for k in chosen], type=panes.schema.field(n).type)
                       for i, n in enumerate(key_names)})
    subset = panes.join(wanted, keys=key_names, join_type="inner") if chosen else panes.slice(0, 0)
    grouped: dict[tuple, list[dict]] = {k: [] for k in chosen}
    for row in _rows(subset, key_names):
        grouped[row["key"]].append(row)
    return [(k, grouped[k]) for k in chosen], len(distinct)


def _match_key(wanted: Any, distinct: list[tuple], key_names: list[str]) -> tuple:
    for k in distinct:
        if wanted == k or (len(k) == 1 and wanted == k[0]) or \
                (isinstance(wanted, str) and wanted in (_key_text(k), _key_label(k, key_names))):
            return k
    sample = ", ".join(repr(_key_text(k)) for k in distinct[:8])
    raise ValueError(f"key {wanted!r} is not in the pane table (key columns {key_names}; "
                     f"keys include {sample}{', ...' if len(distinct) > 8 else ''})")


def _key_text(key: tuple) -> str:
    return ",".join("null" if v is None else str(v) for v in key)


def _key_label(key: tuple, key_names: list[str]) -> str:
    if not key_names:
        return "(no key)"
    return ", ".join(f"{n}={'null' if v is None else v}" for n, v in zip(key_names, key))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _short(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _us(column: pa.ChunkedArray) -> list[int | None]:
    return pc.cast(column, pa.int64()).to_pylist()


def _rows(table: pa.Table, key_names: list[str]) -> list[dict]:
    """Pane rows as dicts with ``key`` and times in microseconds (only the columns drawn)."""
    if table.num_rows == 0:
        return []
    keys = list(zip(*(table.column(n).to_pylist() for n in key_names))) if key_names \
        else [()] * table.num_rows
    cols = {
        "start": _us(table.column("window_start")), "end": _us(table.column("window_end")),
        "watermark": _us(table.column("watermark")),
        "kind": table.column("kind").to_pylist(), "timing": table.column("pane_timing").to_pylist(),
        "index": table.column("pane_index").to_pylist(),
        "final": table.column("is_final").to_pylist(), "seq": table.column("batch_seq").to_pylist(),
        "closed": table.column("window_closed").to_pylist() if "window_closed" in table.column_names
        else [False] * table.num_rows,
    }
    return [{"key": keys[i], **{c: v[i] for c, v in cols.items()}} for i in range(table.num_rows)]


def _build_lane(key: tuple, key_names: list[str], rows: list[dict]) -> _Lane:
    windows: dict[tuple[int, int], _Window] = {}
    for r in rows:
        if r["kind"] not in _KIND_ORDER or r["timing"] not in _STYLE:
            raise ValueError(f"not a pane row: kind={r['kind']!r}, pane_timing={r['timing']!r} "
                             f"(expected TRIGGER/RETRACTION and EARLY/ON_TIME/LATE)")
    for r in sorted(rows, key=lambda r: (r["seq"], _KIND_ORDER[r["kind"]], r["index"])):
        w = windows.setdefault((r["start"], r["end"]), _Window(r["start"], r["end"]))
        w.closed = w.closed or bool(r["closed"])
        bounded = r["start"] >= _BOUNDED_MIN_US and r["end"] <= _BOUNDED_MAX_US
        at = r["watermark"]
        if at is None and bounded:
            at = r["start"]
        w.panes.append(_Pane(kind=r["kind"], timing=r["timing"], index=r["index"],
                             final=bool(r["final"]), at_us=at))
    return _Lane(label=_key_label(key, key_names), windows=list(windows.values()))


def _x_span(lanes: list[_Lane]) -> tuple[float, float]:
    """Event-time range to draw, in µs: bounded windows and pane positions, with a margin."""
    xs: list[int] = []
    for lane in lanes:
        for w in lane.windows:
            if w.bounded:
                xs += [w.start_us, w.end_us]
            xs += [p.at_us for p in w.panes if p.at_us is not None]
    if not xs:   # only unbounded windows and no watermark yet: any range will do
        return 0.0, 60_000_000.0
    lo, hi = float(min(xs)), float(max(xs))
    width = max(hi - lo, 1_000.0)
    # room on the right for fanned-out markers
    return lo - 0.02 * width, hi + 0.06 * width


# --------------------------------------------------------------------------------------------
# Drawing

def _dates(us: Sequence[float]) -> np.ndarray:
    from matplotlib import dates as mdates
    return mdates.date2num(np.asarray(np.round(us), dtype="int64").astype("datetime64[us]"))


def _draw(ax: "Axes", lanes: list[_Lane],
          span: tuple[float, float]) -> tuple[Counter, int, int]:
    """Draw lanes top to bottom; return markers per category, final ones, crossed-out ones."""
    from matplotlib.patches import Rectangle

    lo, hi = _dates(span)
    ax.set_xlim(lo, hi)
    markers: dict[tuple[str, bool, bool], list[tuple[float, float]]] = {}
    ticks, labels = [], []
    y0 = 0.0
    for n, lane in enumerate(lanes):
        if n % 2 == 1:   # band every other key
            ax.axhspan(y0 - 0.5 - _KEY_GAP / 2, y0 + lane.n_sub - 0.5 + _KEY_GAP / 2,
                       color="#f3f5f8", zorder=0, lw=0)
        for w in lane.windows:
            y = y0 + w.sub
            if w.bounded:
                start, end = _dates([w.start_us, w.end_us])
            else:
                start, end = lo, hi
            withdrawn = w.withdrawn
            ax.add_patch(Rectangle((start, y - _BAR_HEIGHT / 2), end - start, _BAR_HEIGHT,
                                   facecolor="#eef0f3" if withdrawn else _BAR_COLOR,
                                   edgecolor=_FINAL_EDGE if w.closed else _BAR_EDGE,
                                   lw=1.6 if w.closed else 0.8, ls="--" if withdrawn else "-",
                                   hatch="////" if withdrawn else None, zorder=2))
            xs = _dates([p.x_us for p in w.panes]) if w.panes else []
            if len(xs):
                _tails(ax, y, start, end, min(xs), max(xs))
            for p, x in zip(w.panes, xs):
                cat = KIND_RETRACTION if p.kind == KIND_RETRACTION else p.timing
                key = (cat, p.final and p.kind == KIND_TRIGGER, p.retracted)
                markers.setdefault(key, []).append((x, y))
        ticks.append(y0 + (lane.n_sub - 1) / 2)
        labels.append(f"{_short(lane.label)}\n{lane.describe()}")
        y0 += lane.n_sub + _KEY_GAP
        if n < len(lanes) - 1:
            ax.axhline(y0 - 0.5 - _KEY_GAP / 2, color="#c9d0da", lw=0.8, zorder=1)
    counts: Counter = Counter()
    final = crossed_out = 0
    for (cat, is_final, faded), pts in sorted(markers.items(),
                                              key=lambda kv: CATEGORIES.index(kv[0][0])):
        artist = _scatter(ax, cat, is_final, faded, pts)
        drawn = len(artist.get_offsets())
        counts[cat] += drawn
        final += drawn if is_final else 0
        crossed_out += drawn if faded and cat != KIND_RETRACTION else 0
    ax.set_yticks(ticks, labels)
    ax.set_ylim(y0 - _KEY_GAP - 0.5 + 0.1 if lanes else 0.5, -0.6)
    return counts, final, crossed_out


def _tails(ax: "Axes", y: float, start: float, end: float, x_min: float, x_max: float) -> None:
    """Thin lines from the bar to panes that fired before its start or after its end."""
    if x_max > end:
        ax.plot([end, x_max], [y, y], color=_TAIL_COLOR, lw=1.0, zorder=1.5,
                solid_capstyle="butt")
    if x_min < start:
        ax.plot([x_min, start], [y, y], color=_TAIL_COLOR, lw=1.0, ls=(0, (2, 2)), zorder=1.5)


def _scatter(ax: "Axes", cat: str, is_final: bool, faded: bool, pts: list[tuple[float, float]]):
    """One scatter per (category, final, crossed out); a crossed-out pane is drawn hollow."""
    style = _STYLE[cat]
    x, y = zip(*pts)
    if cat == KIND_RETRACTION:
        return ax.scatter(x, y, marker="x", s=0.5 * _MARKER_SIZE, c=style["color"],
                          linewidths=1.8, zorder=6)
    if faded:   # hollow, in the timing colour; the retraction's x sits inside
        return ax.scatter(x, y, marker=style["marker"], s=_MARKER_SIZE, facecolors="white",
                          edgecolors=_FINAL_EDGE if is_final else style["color"],
                          linewidths=1.6, zorder=5)
    return ax.scatter(x, y, marker=style["marker"], s=_MARKER_SIZE, c=style["color"],
                      edgecolors=_FINAL_EDGE if is_final else _PLAIN_EDGE,
                      linewidths=1.8 if is_final else 0.8, zorder=5)


def _decorate(fig, ax: "Axes", summary: PlotSummary, title: str | None, height: float) -> None:
    """Axes, labels, legend and title of the timeline. (Long: one matplotlib call per element of
    the figure.)"""
    from matplotlib import dates as mdates
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if summary.keys:
        locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    else:
        ax.text(0.5, 0.5, "no panes", transform=ax.transAxes, ha="center", va="center",
                fontsize=14, color="#777777")
        ax.set_xticks([])
        ax.set_yticks([])
    ax.grid(axis="x", color="#e3e7ed", lw=0.8, zorder=0)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0, labelsize=9)
    ax.set_xlabel("event time (UTC)  ·  bar = window [start, end)  ·  "
                  "marker = watermark when the pane fired", fontsize=9, color="#444444")

    m = summary.markers
    top = 1 - 0.16 / height
    fig.text(0.5, top, title or "Pane timeline", ha="center", va="top", fontsize=13,
             fontweight="bold")
    shown = (_plural(len(summary.keys), "key") if len(summary.keys) == summary.total_keys
             else f"{len(summary.keys)} of {_plural(summary.total_keys, 'key')}")
    fig.text(0.5, top - 0.30 / height,
             f"TRIGGER {summary.triggers}: EARLY {m[TIMING_EARLY]} · "
             f"ON_TIME {m[TIMING_ON_TIME]} · "
             f"LATE {m[TIMING_LATE]}  (final {summary.final})   |   RETRACTION "
             f"{m[KIND_RETRACTION]}   |   {shown}, {_plural(summary.windows, 'window')}",
             ha="center", va="top", fontsize=10, color="#333333")
    handles = [Line2D([], [], ls="", marker=_STYLE[t]["marker"], color=_STYLE[t]["color"],
                      markeredgecolor=_PLAIN_EDGE, markersize=8, label=_STYLE[t]["label"])
               for t in (TIMING_EARLY, TIMING_ON_TIME, TIMING_LATE)]
    handles += [
        Line2D([], [], ls="", marker="o", color="#bbbbbb", markeredgecolor=_FINAL_EDGE,
               markeredgewidth=1.8, markersize=8, label="final pane (outlined)"),
        (Line2D([], [], ls="", marker="o", markerfacecolor="white", markeredgecolor="#888888",
                markeredgewidth=1.4, markersize=8),
         Line2D([], [], ls="", marker="x", color=_STYLE[KIND_RETRACTION]["color"],
                markeredgewidth=1.8, markersize=5.5)),
        Patch(facecolor=_BAR_COLOR, edgecolor=_BAR_EDGE, label="window"),
        Patch(facecolor="#eef0f3", edgecolor=_BAR_EDGE, hatch="////", ls="--",
              label="window withdrawn (last pane retracted)"),
    ]
    labels = [h.get_label() for h in handles[:4]] + [_STYLE[KIND_RETRACTION]["label"]] + \
        [h.get_label() for h in handles[5:]]
    fig.legend(handles=handles, labels=labels, loc="upper center", ncol=len(handles), frameon=False,
               fontsize=8.5, bbox_to_anchor=(0.5, top - 0.58 / height), handletextpad=0.4,
               columnspacing=1.4)


if __name__ == "__main__":
    sys.exit(main())
