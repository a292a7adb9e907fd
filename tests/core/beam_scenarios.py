"""Apache Beam's trigger transcripts, as our own Python data, and the harness that replays them.

The ten in-scope behavioural transcripts of Beam's ``trigger_transcripts.yaml`` (see
``/work/shared/conformance/beam/README.md``), re-expressed in this project's vocabulary:

* Beam's time unit is read as milliseconds; each element is ``{"ts": t, "value": t}`` and the
  aggregate is ``collect_list(value) AS values``.
* Beam's window ``[start, max_ts]`` is written ``window=(start, max_ts + 1)`` (exclusive end).
* ``timestamp`` -> ``pane_timestamp``, ``index`` -> ``pane_index``, ``final`` -> ``is_final``;
  ``early`` / ``late`` / ``nonspeculative_index`` -> ``pane_timing`` (a string, or a set of
  allowed values where Beam only says what the timing is *not*).
* ``Sessions(10)`` -> ``session(10 milliseconds)``; our sessions also merge when they touch.
* Beam's transcript defaults: allowed lateness 0, accumulation mode accumulating.

Our extension: ``ExpectLate`` lists the dropped elements an action must report (Beam's driver
drops them silently). Matching follows Beam's harness: partial match on the given fields, every
output of an action must be expected, greedy one-to-one; after the last action the watermark goes
to +infinity and nothing is checked.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

TIMINGS = ("EARLY", "ON_TIME", "LATE")
NOT_LATE = frozenset({"EARLY", "ON_TIME"})
NOT_EARLY = frozenset({"ON_TIME", "LATE"})


# --- scenario data types ------------------------------------------------------------------------

@dataclass(frozen=True)
class Input:
    """One bundle; each element's value is its timestamp."""
    timestamps: tuple[int, ...]

    def __init__(self, *timestamps: int) -> None:
        object.__setattr__(self, "timestamps", tuple(timestamps))


@dataclass(frozen=True)
class Watermark:
    t: int


@dataclass(frozen=True)
class Expect:
    """Every pane the preceding action emits (partial match on the given fields)."""
    panes: tuple[dict, ...]

    def __init__(self, *panes: dict) -> None:
        object.__setattr__(self, "panes", tuple(panes))


@dataclass(frozen=True)
class ExpectLate:
    """Every dropped element the preceding action reports (partial match)."""
    rows: tuple[dict, ...]

    def __init__(self, *rows: dict) -> None:
        object.__setattr__(self, "rows", tuple(rows))


def pane(start: int, end: int, **fields) -> dict:
    return {"window": (start, end), **fields}


def dropped(ts: int, reason: str, start: int | None, end: int | None) -> dict:
    return {"ts": ts, "reason": reason, "window_start": start, "window_end": end}


@dataclass(frozen=True)
class Scenario:
    name: str
    actions: tuple
    window: str = "tumbling(10 milliseconds)"
    trigger: str = "Default()"
    accumulation_mode: str = "accumulating"       # Beam's transcript default
    allowed_lateness: int = 0                     # Beam's transcript default
    timestamp_combiner: str = "end_of_window"
    notes: str = field(default="", compare=False)

    def stream_kwargs(self, key_columns=None) -> dict:
        return dict(window=self.window, trigger=self.trigger,
                    accumulation_mode=self.accumulation_mode,
                    allowed_lateness=f"{self.allowed_lateness} milliseconds",
                    aggregate="collect_list(value) AS values",
                    timestamp_combiner=self.timestamp_combiner, key_columns=key_columns,
                    timestamp_column="ts", timestamp_unit="ms")

    @property
    def order_independent(self) -> bool:
        """Beam's TestStream harness re-bundles the input for Default + accumulating."""
        return self.trigger == "Default()" and self.accumulation_mode == "accumulating"


# --- the ten in-scope transcripts ---------------------------------------------------------------

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "fixed_default",
        actions=(
            Input(1, 2, 3, 10, 11),
            Watermark(25),
            Expect(pane(0, 10, values=[1, 2, 3], pane_index=0),
                   pane(10, 20, values=[10, 11])),
        )),
    Scenario(
        "fixed_default_late_data", allowed_lateness=100,
        actions=(
            Input(1, 2, 3, 10, 11, 25),
            Watermark(100),
            Expect(pane(0, 10, values=[1, 2, 3], pane_timestamp=9, is_final=False),
                   pane(10, 20, values=[10, 11], pane_timestamp=19),
                   pane(20, 30, values=[25], pane_timestamp=29, pane_timing=NOT_LATE)),
            Input(7),
            Expect(pane(0, 10, values=[1, 2, 3, 7], pane_timestamp=9, pane_timing="LATE")),
        )),
    Scenario(
        "fixed_drop_late_data_after_allowed_lateness",
        trigger="AfterWatermark(early=AfterCount(3), late=AfterCount(1))", allowed_lateness=20,
        actions=(
            Input(1, 2, 10, 11, 80, 81),
            Watermark(100),
            Expect(pane(0, 10, values=[1, 2], pane_timestamp=9),
                   pane(10, 20, values=[10, 11], pane_timestamp=19),
                   pane(80, 90, values=[80, 81], pane_timestamp=89, pane_timing=NOT_LATE)),
            Input(7, 8),            # no pane: 10 + 20 <= 100
            ExpectLate(dropped(7, "too_late", 0, 10), dropped(8, "too_late", 0, 10)),
            Input(17, 18),          # no pane: 20 + 20 <= 100
            ExpectLate(dropped(17, "too_late", 10, 20), dropped(18, "too_late", 10, 20)),
            Input(82),
            Expect(pane(80, 90, values=[80, 81, 82], pane_timestamp=89, pane_timing="LATE")),
        )),
    Scenario(
        "timestamp_combiner_earliest", timestamp_combiner="earliest",
        actions=(
            Input(1, 2, 3, 10, 11, 25),
            Watermark(100),
            Expect(pane(0, 10, values=[1, 2, 3], pane_timestamp=1),
                   pane(10, 20, values=[10, 11], pane_timestamp=10),
                   pane(20, 30, values=[25], pane_timestamp=25, pane_timing=NOT_LATE)),
        )),
    Scenario(
        "timestamp_combiner_latest", timestamp_combiner="latest",
        actions=(
            Input(1, 2, 3, 10, 11, 25),
            Watermark(100),
            Expect(pane(0, 10, values=[1, 2, 3], pane_timestamp=3),
                   pane(10, 20, values=[10, 11], pane_timestamp=11),
                   pane(20, 30, values=[25], pane_timestamp=25, pane_timing=NOT_LATE)),
        )),
    Scenario(
        "early_late_sessions", window="session(10 milliseconds)",
        trigger="AfterWatermark(early=AfterCount(2), late=AfterCount(3))", allowed_lateness=100,
        notes="a merge starts a new window: pane_index (and the on-time pane) start again",
        actions=(
            Input(1, 2),
            Expect(pane(1, 12, values=[1, 2], pane_timestamp=11, pane_timing="EARLY",
                        pane_index=0)),
            Input(3),               # no pane: the merged [1, 13) has count 1 since its reset
            Input(4),
            Expect(pane(1, 14, values=[1, 2, 3, 4], pane_timestamp=13, pane_timing="EARLY",
                        pane_index=0)),
            Input(5),
            Watermark(100),
            Expect(pane(1, 15, values=[1, 2, 3, 4, 5], pane_timestamp=14, pane_index=0,
                        pane_timing=NOT_EARLY)),          # nonspeculative_index 0
            Input(1),
            Input(3, 4),
            Expect(pane(1, 15, values=[1, 1, 2, 3, 3, 4, 4, 5], pane_timestamp=14,
                        is_final=False, pane_index=1, pane_timing=NOT_EARLY)),
        )),
    Scenario(
        "discarding_early_fixed", trigger="AfterWatermark(early=AfterCount(2))",
        accumulation_mode="discarding",
        actions=(
            Input(1, 2),
            Expect(pane(0, 10, values=[1, 2], pane_timestamp=9, pane_timing="EARLY",
                        pane_index=0)),
            Input(4),
            Input(14),
            Input(5),
            Expect(pane(0, 10, values=[4, 5], pane_timestamp=9, pane_timing="EARLY",
                        pane_index=1)),
            Input(18),
            Expect(pane(10, 20, values=[14, 18], pane_timestamp=19, pane_timing="EARLY",
                        pane_index=0)),
            Input(6),
            Watermark(100),
            Expect(pane(0, 10, values=[6], pane_timestamp=9, pane_timing="ON_TIME",
                        is_final=True, pane_index=2),
                   pane(10, 20, values=[], pane_timestamp=19, pane_timing="ON_TIME",
                        is_final=True, pane_index=1)),
        )),
    Scenario(
        "garbage_collection", trigger="AfterCount(2)", allowed_lateness=10,
        accumulation_mode="discarding",
        actions=(
            Input(1, 2, 3, 10, 11, 25),
            Expect(pane(0, 10, pane_timestamp=9),
                   pane(10, 20, pane_timestamp=19)),
        )),
    Scenario(
        "known_late_data_watermark", timestamp_combiner="earliest",
        notes="only elements with t >= watermark on arrival hold the output timestamp",
        actions=(
            Watermark(5),
            Input(2, 3, 7, 8),
            Watermark(11),
            Expect(pane(0, 10, values=[2, 3, 7, 8], pane_timestamp=7)),
        )),
    Scenario(
        "known_late_data_no_watermark_hold_possible", timestamp_combiner="earliest",
        actions=(
            Watermark(8),
            Input(2, 3, 7),
            Watermark(11),
            Expect(pane(0, 10, values=[2, 3, 7], pane_timestamp=9)),
        )),
)

# Beam's negative transcripts: a harness that cannot fail checks nothing.
NEGATIVE_SCENARIOS: tuple[tuple[Scenario, str], ...] = (
    (Scenario("bad_output", actions=(
        Input(1, 2, 3), Expect(pane(0, 10, values=[1, 2, 3])), Watermark(100))),
     "Unmatched output"),
    (Scenario("bad_expected_values", actions=(
        Input(1, 2, 3), Watermark(100), Expect(pane(0, 10, values=[1, 2])))),
     "Unmatched output"),
    (Scenario("bad_expected_window", actions=(
        Input(1, 2, 3), Watermark(100), Expect(pane(0, 20, values=[1, 2, 3])))),
     "Unmatched output"),
    (Scenario("missing_output", actions=(
        Input(1, 2, 3), Watermark(100), Watermark(200))),
     "Unexpected output"),
    (Scenario("missing_output_at_end", actions=(
        Input(1, 2, 3), Watermark(100))),
     "Unexpected output"),
)


# --- bundlings and keys -------------------------------------------------------------------------

def _bundle_original(xs): return [list(xs)]
def _bundle_reversed(xs): return [list(xs)[::-1]]
def _bundle_shuffled(xs): return [random.Random(len(xs) * 7919 + sum(xs)).sample(list(xs), len(xs))]
def _bundle_singles(xs): return [[x] for x in xs]
def _bundle_reversed_singles(xs): return [[x] for x in reversed(xs)]
def _bundle_pairs(xs): return [list(xs[i:i + 2]) for i in range(0, len(xs), 2)]


BUNDLINGS: dict[str, Callable] = {
    "original": _bundle_original, "reversed": _bundle_reversed, "shuffled": _bundle_shuffled,
    "singles": _bundle_singles, "reversed_singles": _bundle_reversed_singles,
    "pairs": _bundle_pairs,
}

# variant name -> {key: bundling}; key None = non-keyed input
VARIANTS: dict[str, dict] = {
    "unkeyed": {None: "original"},
    "two_keys": {"a": "original", "b": "original"},
    "rebundled": {name: name for name in BUNDLINGS},
}


# --- matching -----------------------------------------------------------------------------------

def _matches_pane(expected: dict, got: dict) -> bool:
    for name, want in expected.items():
        if name == "window":
            if (got["window_start"], got["window_end"]) != tuple(want):
                return False
        elif name == "values":
            if sorted(got["values"]) != sorted(want):
                return False
        elif name == "pane_timing" and isinstance(want, frozenset):
            if got["pane_timing"] not in want:
                return False
        elif got.get(name) != want:
            return False
    return True


def _matches_late(expected: dict, got: dict) -> bool:
    return all(got.get(name) == want for name, want in expected.items())


def _consume(expected: list[dict], outputs: list[dict], matches, what: str) -> None:
    """Greedy one-to-one: remove one matching output per expectation."""
    for want in expected:
        for i, got in enumerate(outputs):
            if matches(want, got):
                del outputs[i]
                break
        else:
            raise AssertionError(f"Unmatched output: expected {what} {want} not among {outputs}")


def _check_consumed(panes: list[dict], late: list[dict], where: str) -> None:
    if panes or late:
        raise AssertionError(f"Unexpected output {where}: panes {panes}, late {late}")


def run_scenario(scenario: Scenario, make_stream: Callable[..., object],
                 variant: str = "unkeyed") -> None:
    """Replay `scenario` on make_stream(**kwargs); raise AssertionError on any mismatch."""
    keys = VARIANTS[variant]
    keyed = list(keys) != [None]
    stream = make_stream(**scenario.stream_kwargs(key_columns="k" if keyed else None))
    panes: list[dict] = []
    late: list[dict] = []

    def row(key, t):
        return {"k": key, "ts": t, "value": t} if keyed else {"ts": t, "value": t}

    def per_key(items: tuple[dict, ...]) -> list[dict]:
        return [{**it, "k": key} if keyed else it for key in keys for it in items]

    for i, action in enumerate(scenario.actions):
        if isinstance(action, Expect):
            _consume(per_key(action.panes), panes, _matches_pane, "pane")
            continue
        if isinstance(action, ExpectLate):
            _consume(per_key(action.rows), late, _matches_late, "late row")
            continue
        _check_consumed(panes, late, f"before action {i} ({action})")
        if isinstance(action, Watermark):
            stream.advance_watermark_to(action.t)
        elif isinstance(action, Input):
            bundles = {key: BUNDLINGS[how](action.timestamps) for key, how in keys.items()}
            for step in range(max(len(b) for b in bundles.values())):
                stream.add_elements([row(key, t) for key, b in bundles.items()
                                     if step < len(b) for t in b[step]])
        else:
            raise TypeError(action)
        panes += [p for p in stream.take_panes() if p["kind"] == "TRIGGER"]
        late += stream.take_late()
    _check_consumed(panes, late, "at the end")
    stream.advance_watermark_to_infinity()      # Beam does this; nothing after it is checked
    stream.take_panes()
    stream.take_late()


def variants_for(scenario: Scenario) -> list[str]:
    out = ["unkeyed", "two_keys"]
    if scenario.order_independent:
        out.append("rebundled")
    return out
