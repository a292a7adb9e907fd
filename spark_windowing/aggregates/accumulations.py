"""Ready-made custom accumulations, for ``aggregate="spark_windowing.aggregates.accumulations:<Class>(...)"``.

``TopN(n, value, label)``
    The ``n`` elements with the largest ``value`` (ties: smallest ``label``) as a list of
    ``{label, value}`` structs, largest first. It keeps every (label, value) of the window as a
    multiset, so it can take back retracted rows: with ``window=inherit`` over the pane tables of
    a per-key query it gives the top keys per window, always consistent with the latest pane of
    every key (the chained-queries example, ``examples/chained_top_keys.py``).

>>> import pyarrow as pa
>>> top = TopN("2", "total", "user")
>>> acc = top.add(top.initial(), pa.table({"user": ["a", "b", "c"], "total": [5.0, 9.0, 7.0]}))
>>> acc = top.retract(acc, pa.table({"user": ["b"], "total": [9.0]}))
>>> top.output(acc)["top"]
[{'label': 'c', 'value': 7.0}, {'label': 'a', 'value': 5.0}]
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

__all__ = ["TopN"]


class TopN:
    """Top ``n`` (label, value) pairs of a window by value, retractable (see the module docstring)."""

    output_fields = [("top", pa.list_(pa.struct([("label", pa.string()), ("value", pa.float64())])))]

    def __init__(self, n: str = "3", value: str = "value", label: str = "label") -> None:
        if not str(n).isdigit() or int(n) < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        self.n, self.value, self.label = int(n), value, label

    def initial(self) -> Counter:
        return Counter()

    def _pairs(self, elements: pa.Table) -> list[tuple[str, float]]:
        for col in (self.value, self.label):
            if col not in elements.column_names:
                raise KeyError(f"TopN: no column {col!r} in {elements.column_names}")
        labels = elements.column(self.label).cast(pa.string()).to_pylist()
        values = elements.column(self.value).cast(pa.float64()).to_pylist()
        return [(lb, v) for lb, v in zip(labels, values) if v is not None]

    def add(self, acc: Counter, elements: pa.Table) -> Counter:
        acc.update(self._pairs(elements))
        return acc

    def retract(self, acc: Counter, elements: pa.Table) -> Counter:
        acc.subtract(self._pairs(elements))
        return +acc  # drop pairs whose count reached 0

    def merge(self, accs: list[Counter]) -> Counter:
        out: Counter = Counter()
        for a in accs:
            out.update(a)
        return out

    def output(self, acc: Counter) -> dict:
        best = sorted(acc, key=lambda p: (-p[1], "" if p[0] is None else p[0]))[:self.n]
        return {"top": [{"label": lb, "value": v} for lb, v in best]}
