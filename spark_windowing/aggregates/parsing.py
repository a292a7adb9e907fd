"""The ``aggregate`` option parsed: ``parse_aggregates`` gives one ``AggregateSpec`` per item
(unbound: no types yet; ``aggregates.binding`` binds them to the upstream schema).

Built-ins (SQL null semantics: nulls are ignored; an aggregate over no non-null value is null,
counts are 0):

=====================  ==========================================================================
``sum(x)``             int64 for integer input, float64 otherwise
``count(*)``           elements; ``count(x)``: non-null values
``avg(x)``             float64
``min(x)``/``max(x)``  numbers, timestamps, dates, strings, booleans
``first(x)``           value of the element with the smallest event time (ties: earliest arrival)
``last(x)``            value of the element with the largest event time (ties: latest arrival)
``collect_list(x)``    non-null values in arrival order (upstream order within a micro-batch)
``count_distinct(x)``  distinct non-null values
``top(n, x, c, ...)``  the rows whose ``x`` ranks in the n largest, ties kept (SQL ``RANK() <= n``),
                       as a list of structs ``{x, c, ...}`` (the columns' types), best first;
                       ``bottom(n, ...)`` the n smallest; ``max_rows(x, c, ...)`` = ``top(1, ...)``,
                       ``min_rows(x, c, ...)`` = ``bottom(1, ...)`` (``spark_windowing.aggregates.ranked``)
``most_frequent(n, x)`` the non-null values of ``x`` whose count ranks in the n largest, ties kept,
                       as a list of structs ``{x, count}``, most frequent first, equal counts by
                       value (NEXMark q5's "the auctions with the most bids" in one aggregate)
=====================  ==========================================================================

Each may carry ``AS alias``; the default name is ``func(x)``, e.g. ``sum(amount)``.

Custom accumulation: ``module:Class`` (or ``module:Class(arg, ...)``, arguments passed as strings)
names a class with::

    output_fields = [("total", pa.int64()), ...]    # the pane columns it produces
    def initial(self) -> acc
    def add(self, acc, elements: pa.Table) -> acc   # one (key, window)'s new elements, arrival order
    def merge(self, accs: list) -> acc              # session merges
    def output(self, acc) -> dict                   # {column: value} for output_fields
    def retract(self, acc, elements) -> acc         # optional: take back RETRACTION rows (window=inherit)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spark_windowing.aggregates import ranked
from spark_windowing.errors import OptionError

AGGREGATE_FORMS = ("a comma-separated list of sum(x), count(*), count(x), avg(x), min(x), max(x), first(x), "
                   "last(x), collect_list(x), count_distinct(x), top(n, x, col, ...), bottom(n, x, col, ...), "
                   "max_rows(x, col, ...), min_rows(x, col, ...), most_frequent(n, x), each optionally followed by 'AS <name>'; "
                   "or module:Class for a custom accumulation")
FUNCS = ("sum", "count", "avg", "min", "max", "first", "last", "collect_list", "count_distinct")
_ITEM = re.compile(r"^\s*([A-Za-z_]\w*)\s*\(\s*(\*|[A-Za-z_][\w.]*|`[^`]+`)\s*\)\s*(?:(?i:AS)\s+([A-Za-z_]\w*|`[^`]+`))?\s*$")
_RANKED = re.compile(r"^\s*(top|bottom|max_rows|min_rows|most_frequent)\s*\(([^()]*)\)\s*(?:(?i:AS)\s+([A-Za-z_]\w*|`[^`]+`))?\s*$",
                     re.IGNORECASE)
_NAME = re.compile(r"^([A-Za-z_][\w.]*|`[^`]+`)$")
_CUSTOM = re.compile(r"^\s*([A-Za-z_][\w.]*):([A-Za-z_]\w*)\s*(\([^()]*\))?\s*(?:(?i:AS)\s+([A-Za-z_]\w*))?\s*$")


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate of the ``aggregate`` option (unbound: no types yet)."""

    func: str            # one of FUNCS, "count_star", "custom" or "process"
    column: str | None   # input column (None for count(*), custom and process)
    alias: str
    target: str | None = None  # "module:Class" for custom, "module:function" for process
    hidden: bool = False       # internal (join side counters): kept in state, not a pane column
    n: int = 0                 # ranked rows (``spark_windowing.aggregates.ranked``): the rank kept
    carry: tuple[str, ...] = ()   # ranked rows: the input columns carried beside ``column``
    labels: tuple[str, ...] = ()  # ranked rows: the struct's field names (``column``, then ``carry``)


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_aggregates(text: str) -> tuple[AggregateSpec, ...]:
    """Parse the ``aggregate`` option; raise OptionError naming the bad item."""
    specs: list[AggregateSpec] = []
    if not str(text).strip():
        raise OptionError("aggregate", text, AGGREGATE_FORMS, why="empty")
    for item in _split_top_level(str(text)):
        custom = _CUSTOM.match(item)
        if custom:
            args = custom.group(3) or ""
            specs.append(AggregateSpec("custom", None, custom.group(4) or custom.group(2),
                                       target=f"{custom.group(1)}:{custom.group(2)}{args.replace(' ', '')}"))
            continue
        rank = _RANKED.match(item)
        if rank:
            specs.append(_parse_ranked(text, item, rank))
            continue
        m = _ITEM.match(item)
        if not m:
            raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"cannot parse {item.strip()!r}")
        func, col, alias = m.group(1).lower(), m.group(2).strip("`"), m.group(3)
        if func not in FUNCS:
            raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"unknown aggregate function {m.group(1)!r}")
        if col == "*":
            if func != "count":
                raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"{func}(*) is not allowed; only count(*)")
            func, col = "count_star", None
        name = alias.strip("`") if alias else f"{m.group(1).lower()}({m.group(2)})"
        specs.append(AggregateSpec(func, col, name))
    names = [s.alias for s in specs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise OptionError("aggregate", text, AGGREGATE_FORMS, why=f"duplicate output name(s) {sorted(dup)}; use AS")
    return tuple(specs)


def _parse_ranked(text: str, item: str, m: re.Match) -> AggregateSpec:
    """``top(n, x, c, ...)``, ``bottom(n, ...)``, ``max_rows(x, c, ...)``, ``min_rows(x, ...)``,
    ``most_frequent(n, x)``."""
    func = m.group(1).lower()
    args = [a.strip() for a in m.group(2).split(",")]
    n = 1
    if func in ("top", "bottom", ranked.FREQUENT):
        if not args or not args[0].isdigit() or int(args[0]) < 1:
            raise OptionError("aggregate", text, AGGREGATE_FORMS,
                              why=f"{item.strip()!r}: {func}'s first argument is how many ranks, a positive integer")
        n, args = int(args[0]), args[1:]
    bad = [a for a in args if not _NAME.match(a)]
    if not args or bad:
        raise OptionError("aggregate", text, AGGREGATE_FORMS,
                          why=f"{item.strip()!r}: needs the value column, then the columns to carry, by name"
                              + (f" ({bad[0]!r} is not a column name)" if bad else ""))
    cols = [a.strip("`") for a in args]
    if func == ranked.FREQUENT:
        if len(cols) != 1 or cols[0] == "count":
            raise OptionError("aggregate", text, AGGREGATE_FORMS,
                              why=f"{item.strip()!r}: most_frequent(n, x) takes one column, not named 'count' "
                                  "(the struct's other field)")
        alias = m.group(3).strip("`") if m.group(3) else f"{func}({cols[0]})"
        return AggregateSpec(func, cols[0], alias, n=n, labels=(cols[0], "count"))
    labels = tuple(dict.fromkeys(cols))
    alias = m.group(3).strip("`") if m.group(3) else f"{func}({cols[0]})"
    return AggregateSpec(func, cols[0], alias, n=n, carry=labels[1:], labels=labels)
