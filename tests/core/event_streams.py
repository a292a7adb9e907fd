"""A hypothesis strategy shared by the buffered-window tests (mixed and record_sliding windows)."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def streams(draw, max_steps=8, keys="abc", spread=8):
    """Bundles of (key, ts, id) with out-of-order timestamps (up to the watermark delay + ``spread``
    behind the newest, so some are behind the watermark), watermark moves, and a final flush:
    a list of (events, watermark)."""
    delay = draw(st.integers(0, 15))
    now, w, max_ts, i, steps = 100, 0, 0, 0, []
    for _ in range(draw(st.integers(1, max_steps))):
        now += draw(st.integers(0, 25))
        events = []
        for _ in range(draw(st.integers(0, 6))):
            events.append((draw(st.sampled_from(keys)), now - draw(st.integers(0, delay + spread)), i))
            i += 1
        max_ts = max([max_ts] + [t for _, t, _ in events])
        if draw(st.booleans()):
            w = max(w, max_ts - delay)
        steps.append((events, w))
    steps.append(([], max_ts + 1000))
    return steps


def feed(stream, steps, *, storm_order=False):
    """Drive a ``TestStream`` over ``steps``: each step's (key, ts, id) elements as one bundle at
    the step's watermark, or only the watermark move when there are none. ``storm_order``: each
    bundle arrives under the previous step's watermark, then the watermark moves (Storm's order:
    a tuple is late against the last watermark before it). Returns ``stream``."""
    prev = 0
    for events, w in steps:
        rows = [{"k": k, "ts": ts, "i": i} for k, ts, i in events]
        if rows:
            stream.add_elements(rows, watermark=prev if storm_order else w)
        if storm_order or not rows:
            stream.advance_watermark_to(w)
        prev = w
    return stream


def checked_panes(stream, steps):
    """The panes taken from ``stream`` (aggregating ``collect_list(i) AS ids, first(i) AS f,
    last(i) AS l, sum(i) AS s, count(*) AS n``), after checking what every buffered count-based
    window's pane says: its elements in timestamp order, its bounds and timestamp theirs, fired
    once, ON_TIME and final."""
    ts_of = {i: ts for events, _ in steps for _, ts, i in events}
    panes = stream.take_panes()
    for p in panes:
        times = [ts_of[i] for i in p["ids"]]
        assert times == sorted(times)
        assert (p["window_start"], p["window_end"], p["pane_timestamp"]) == (times[0], times[-1], times[-1])
        assert (p["pane_timing"], p["is_final"], p["pane_index"], p["kind"]) == ("ON_TIME", True, 0, "TRIGGER")
        assert (p["f"], p["l"], p["s"], p["n"]) == (p["ids"][0], p["ids"][-1], sum(p["ids"]), len(p["ids"]))
    return panes


def run_storm(length, sliding, steps, keys="ab"):
    """One Storm window manager (``storm_port.StormWindow``) per key over ``steps``: each step's
    tuples, then its watermark. Returns the managers and, per (key, activation number), the
    watermark that fired the activation."""
    from storm_port import StormWindow
    storm, fired_at = {k: StormWindow(length, sliding) for k in keys}, {}
    for events, w in steps:
        for k, ts, i in events:
            storm[k].add(ts, i)
        for k, sw in storm.items():
            sw.watermark(w)
            fired_at.update({(k, j): w for j in range(len(sw.activations)) if (k, j) not in fired_at})
    return storm, fired_at


def check_restore_continues(start, restore, steps, cut, panes):
    """A stream fed ``steps[:cut]``, snapshot, restored and fed the rest gives, together with what
    it gave before the snapshot, the panes (``panes(stream)``: a sorted list) and late ids of one
    uninterrupted run. ``start()`` makes a fresh stream, ``restore(blob)`` one from a snapshot."""
    whole, first = feed(start(), steps), feed(start(), steps[:cut])
    resumed = feed(restore(first.snapshot()), steps[cut:])
    assert sorted(panes(first) + panes(resumed)) == panes(whole)
    assert sorted(r["i"] for r in first.take_late() + resumed.take_late()) == sorted(r["i"] for r in whole.take_late())
