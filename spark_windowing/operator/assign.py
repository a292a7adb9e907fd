"""``WindowAssigner``: elements into window rows (assignment apart from firing).

It finds or creates the window row of every (element, window) pair and folds the pairs'
pre-aggregated values into the window table:

* fixed windows (tumbling, sliding, cumulate, inherited): rows identified by (key, start) — or
  (key, start, end) where starts are shared — hashed to dense ids and matched with a hash index;
* sliding windows with size a multiple of slide: per (key, slide bucket) first, then combined
  into the bucket's windows (work per bucket, not per pair: ``bucketable``/``add_buckets``);
* sessions: the pairs' proto-windows merged per key with the existing sessions (overlapping or
  touching); a session that grows gets a new row, the rows merged into it are folded in and
  removed (their last panes retracted under ``accumulating_and_retracting``);
* count windows: per-key arrival ordinals (``ordinals``), continuing the counts so far.

Which windows an element belongs to is the window function's (``windows.WindowFn.assign``);
when they fire is the trigger driver's (``firing.TriggerDriver``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from spark_windowing._arrow import factorize, pd
from spark_windowing._groups import Groups
from spark_windowing.aggregates.binding import BoundAggregate
from spark_windowing.aggregates.partials import COMBINABLE, combine_partials, merge_partials, merge_rows, subtract_partials
from spark_windowing.aggregates.preaggregate import preaggregate
from spark_windowing.operator.firing import TriggerDriver
from spark_windowing.operator.output import Clock, StepOutput
from spark_windowing.operator.window_table import I64_MAX, WindowTable
from spark_windowing.windows.kinds import Sliding, Tumbling

if TYPE_CHECKING:
    from spark_windowing.operator.spec import OperatorSpec


class WindowAssigner:
    """Assigns and folds elements into ``table`` under ``spec`` (``aggs``: the operator's bound
    aggregates; ``firing``: to retract and close merged sessions)."""

    def __init__(self, spec: "OperatorSpec", table: WindowTable, aggs: list[BoundAggregate],
                 firing: TriggerDriver) -> None:
        self.spec, self.table, self.aggs, self.firing = spec, table, aggs, firing

    def fold(self, g: np.ndarray, pairs: pa.Table, pts: np.ndarray, clock: Clock, sign: int = 1,
             arrival: np.ndarray | None = None, groups: Groups | None = None) -> tuple[np.ndarray, dict]:
        """Pre-aggregate (element, window) pairs per target row ``g`` and fold them into state;
        ``sign=-1``: take them out (retracted input rows of window=inherit). ``arrival``: the
        pairs' arrival numbers (default: this batch, in the pairs' order); ``groups``: ``g``'s
        grouping, when ``assign_fixed`` found it."""
        hold = None
        if self.spec.timestamp_combiner != "end_of_window" and sign > 0:
            hold = np.where(pts >= clock.wm, pts, I64_MAX)
        if arrival is None:
            arrival = (clock.seq << 32) + np.arange(len(g), dtype=np.int64)
        rows, res, partials = preaggregate(self.aggs, pairs, g, pts, hold, arrival, groups)
        if sign < 0:
            subtract_partials(self.aggs, self.table.cols, rows, partials)
        else:
            self.merge_into(rows, res, partials)
        if "net" in self.table.cols:
            self.table.cols["net"][rows] += sign * res["n"]
        return rows, res

    def merge_into(self, rows: np.ndarray, res: dict, partials: dict) -> None:
        merge_partials(self.aggs, self.table.cols, rows, partials)
        if "hold_min" in res:
            self.table.cols["hold_min"][rows] = np.minimum(self.table.cols["hold_min"][rows], res["hold_min"])
            self.table.cols["hold_max"][rows] = np.maximum(self.table.cols["hold_max"][rows], res["hold_max"])
        if self.spec.window.count_based:
            self.table.cols["cnt"][rows] += res["n"]
            self.table.cols["tmin"][rows] = np.minimum(self.table.cols["tmin"][rows], res["min_ts"])
            self.table.cols["tmax"][rows] = np.maximum(self.table.cols["tmax"][rows], res["max_ts"])

    def bucketable(self, ts: np.ndarray, clock: Clock) -> np.ndarray | None:
        """Elements that may take the per-slide path: sliding windows with size a multiple of
        slide, combinable aggregates only, no finished windows, and every window of the element
        still alive (its earliest window ends at bucket + slide)."""
        w = self.spec.window
        if not isinstance(w, Sliding) or w.size % w.slide or w.size == w.slide:
            return None
        if any(a.spec.func not in COMBINABLE for a in self.aggs):
            return None
        if len(self.table) and self.table.closed.any():
            return None
        bucket = (ts - w.offset) // w.slide * w.slide + w.offset
        return bucket + w.slide + self.spec.allowed_lateness > clock.wm

    def add_buckets(self, events: pa.Table, key_table: pa.Table, ts: np.ndarray, clock: Clock
                    ) -> tuple[np.ndarray, dict]:
        """Sliding windows the "panes" way: pre-aggregate per (key, slide bucket), then combine
        each bucket's partials into its size/slide windows — work per bucket, not per (event,
        window) pair."""
        w = self.spec.window
        k = w.size // w.slide
        start = (ts - w.offset) // w.slide * w.slide + w.offset
        kid = factorize([key_table])[0]
        b_ids = pd().factorize(start)[0]
        bucket = pd().factorize(kid * (int(b_ids.max()) + 1) + b_ids)[0].astype(np.int64)
        needed = sorted({a.spec.column for a in self.aggs if a.spec.column is not None})
        hold = None
        if self.spec.timestamp_combiner != "end_of_window":
            hold = np.where(ts >= clock.wm, ts, I64_MAX)
        b_rows, b_res, b_part = preaggregate(self.aggs, events.select(needed), bucket, ts, hold)
        first = np.empty(int(bucket.max()) + 1, dtype=np.int64)
        first[bucket[::-1]] = np.arange(len(bucket))[::-1]
        rep = first[b_rows]                                   # an element of each bucket
        src = np.repeat(np.arange(len(b_rows)), k)            # expanded row -> bucket partial
        ws = (start[rep][:, None] - np.arange(k, dtype=np.int64)[None, :] * w.slide).ravel()
        g, _, _ = self.assign_fixed(key_table, rep[src], ws, ws + w.size)
        rows, res, partials = combine_partials(self.aggs, g, src, b_res, b_part)
        self.merge_into(rows, res, partials)
        return rows, res

    @staticmethod
    def ordinals(key_table: pa.Table, key_counts: dict[tuple, int]) -> np.ndarray:
        """Per-key arrival ordinals of this batch's elements, continuing the counts so far
        (``key_counts``: elements seen per key tuple, updated)."""
        kid = factorize([key_table])[0]
        within = pd().Series(kid).groupby(kid).cumcount().to_numpy().astype(np.int64)
        n_keys = int(kid.max()) + 1 if len(kid) else 0
        first = np.full(n_keys, -1, dtype=np.int64)
        first[kid[::-1]] = np.arange(len(kid))[::-1]
        names = key_table.column_names
        uniq = key_table.take(pa.array(first)).to_pylist() if n_keys else []
        tuples = [tuple(r[c] for c in names) for r in uniq]
        base = np.array([key_counts.get(t, 0) for t in tuples], dtype=np.int64)
        added = np.bincount(kid, minlength=n_keys)
        for t, b, a in zip(tuples, base.tolist(), added.tolist()):
            key_counts[t] = b + a
        return base[kid] + within if n_keys else within

    def assign_fixed(self, keys: pa.Table, which: np.ndarray, ws: np.ndarray, we: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, Groups]:
        """Row index per (element, window) pair, creating rows for new windows, which pairs fell
        into a closed window, and the pairs grouped by row (for ``fold``). Pair ``i`` is the
        window ``[ws[i], we[i])`` of key row ``which[i]`` of ``keys``.

        A window is identified by (key, start) — or (key, start, end) where starts are shared
        (cumulate) — as one int64 per pair and per candidate state row: key ids (hashed once per
        row of ``keys``, not per pair; numbered by first appearance in ``keys``) times the number
        of starts, plus the start's id. Tumbling and sliding starts lie on a grid, so their ids
        are arithmetic and the combined ids usually fit a dense range: they are then matched by
        counting and array lookups (``_groups``), otherwise by hashing. The candidates are the
        state rows whose start lies within the pairs' starts: in a stream in time order, most
        windows in state started before this batch's (they are about to fire) and are not looked
        at. New windows are created in the order of their combined ids (dense) or of their first
        pair (hashed): both depend only on the batch's events, not on which rows are in memory.
        """
        if len(ws) == 0:  # every pair of the batch was too late
            none = np.zeros(0, dtype=np.int64)
            return none, np.zeros(0, dtype=bool), Groups.known(none, none, none)
        n = len(self.table)
        cand = np.flatnonzero((self.table.ws >= ws.min()) & (self.table.ws <= ws.max()))
        kid_keys, kid_state = factorize([keys, self.table.keys if len(cand) == n else self.table.key_rows(cand)])
        ws_ids, n_ws = self._start_ids(np.concatenate([self.table.ws[cand], ws]),
                                       np.concatenate([self.table.we[cand], we]))
        comp_state = kid_state * n_ws + ws_ids[:len(cand)]
        comp_pairs = kid_keys[which] * n_ws + ws_ids[len(cand):]
        group, row, rep, sizes = _match(comp_pairs, comp_state, cand)
        new = row < 0
        if new.any():
            row[new] = self.table.append(keys.take(pa.array(which[rep[new]])), ws[rep[new]], we[rep[new]])
        g = row[group]
        closed = np.zeros(len(g), dtype=bool)
        if n:
            closed = (g < n) & self.table.closed[np.minimum(g, n - 1)]
        return g, closed, Groups.known(group, row, sizes)

    def _start_ids(self, ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, int]:
        """Dense ids of the window starts ``ws`` (of (start, end) for shared starts) and their
        number: arithmetic on the grid of tumbling / sliding windows, hashed otherwise."""
        w = self.spec.window
        grid = w.size if isinstance(w, Tumbling) else w.slide if isinstance(w, Sliding) else None
        if grid:
            lo = int(ws.min())
            return (ws - lo) // grid, int((ws.max() - lo) // grid) + 1
        ws_ids = pd().factorize(ws)[0]
        if w.same_start:  # windows told apart by (start, end)
            we_ids = pd().factorize(we)[0]
            ws_ids = pd().factorize(ws_ids * (int(we_ids.max()) + 1) + we_ids)[0]
        return ws_ids, int(ws_ids.max()) + 1

    def assign_sessions(self, pair_keys: pa.Table, ws: np.ndarray, we: np.ndarray, clock: Clock,
                        out: StepOutput) -> tuple[np.ndarray, np.ndarray]:
        """Merge the pairs' proto-windows with the existing sessions of their keys; returns the
        row per pair and which pairs fell into a closed session. (Long: one vectorized pass —
        sort, segmented running max, reduce — whose intermediate arrays are shared throughout;
        split, they would have to be passed around by the dozen.)"""
        n = len(self.table)
        kid_state, kid_pairs = factorize([self.table.keys, pair_keys])
        in_batch = np.isin(kid_state, kid_pairs) if n else np.zeros(0, dtype=bool)
        ex_rows = np.flatnonzero(in_batch)
        kid = np.concatenate([kid_state[ex_rows], kid_pairs])
        start = np.concatenate([self.table.ws[ex_rows], ws])
        end = np.concatenate([self.table.we[ex_rows], we])
        is_ex = np.concatenate([np.ones(len(ex_rows), bool), np.zeros(len(ws), bool)])
        ref = np.concatenate([ex_rows, np.arange(len(ws))])  # row id (existing) or pair index
        # by key, then start; the segmented running max of `end` per key, on times relative to
        # the earliest start (or, when key offsets could overflow, on ranks of the times)
        lo = int(start.min()) if len(start) else 0
        span = int(end.max()) - lo + 2 if len(end) else 2
        if (int(kid.max()) + 1 if len(kid) else 1) * span < 2 ** 62:
            order = np.argsort(kid * span + (start - lo))  # ties (same key and start) may be in any order
            kid_o, start_o, end_o = kid[order], start[order], end[order]
            r_start, r_end = start_o - lo, end_o - lo
        else:
            order = np.lexsort((end, start, kid))
            kid_o, start_o, end_o = kid[order], start[order], end[order]
            values, inv = np.unique(np.concatenate([start_o, end_o]), return_inverse=True)
            r_start, r_end = inv[:len(order)], inv[len(order):]
            span = len(values) + 1
        run = np.maximum.accumulate(r_end + kid_o * span) - kid_o * span
        new_session = np.ones(len(order), dtype=bool)
        new_session[1:] = (kid_o[1:] != kid_o[:-1]) | (r_start[1:] > run[:-1])
        sid_o = np.cumsum(new_session) - 1
        n_sess = int(sid_o[-1]) + 1 if len(sid_o) else 0
        heads = np.flatnonzero(new_session)
        s_start = start_o[heads]
        s_end = np.maximum.reduceat(end_o, heads) if len(heads) else np.empty(0, np.int64)
        sid = np.empty(len(order), dtype=np.int64)
        sid[order] = sid_o
        ex_sid, pair_sid = sid[:len(ex_rows)], sid[len(ex_rows):]
        n_ex = np.bincount(ex_sid, minlength=n_sess)
        closed_s = np.zeros(n_sess, dtype=bool)
        if len(ex_rows):
            np.logical_or.at(closed_s, ex_sid, self.table.closed[ex_rows])
        one_row = np.full(n_sess, -1, dtype=np.int64)
        one_row[ex_sid] = ex_rows
        same = (n_ex == 1)
        same[same] = (self.table.ws[one_row[same]] == s_start[same]) & \
                     (self.table.we[one_row[same]] == s_end[same])
        target = np.where(same, one_row, -1)
        has_pairs = np.bincount(pair_sid, minlength=n_sess) > 0
        # a session that grows gets a new row; one holding a closed window stays closed (Beam: a
        # window merged with a finished one is finished) and grows, so what overlaps it later is
        # dropped too, whatever the bundling
        need_new = (~same) & has_pairs
        if need_new.any():
            sess_new = np.flatnonzero(need_new)
            rep_pair = np.full(n_sess, -1, dtype=np.int64)
            rep_pair[pair_sid[::-1]] = np.arange(len(ws))[::-1]
            # create in order of each session's first pair: row ids must not depend on which
            # rows happen to be in memory (the state store loads key buckets lazily)
            sess_new = sess_new[np.argsort(rep_pair[sess_new])]  # distinct values: any sort
            target[sess_new] = self.table.append(pair_keys.take(pa.array(rep_pair[sess_new])),
                                                 s_start[sess_new], s_end[sess_new])
            merged_away = np.flatnonzero(need_new[ex_sid] if len(ex_rows) else np.zeros(0, bool))
            if len(merged_away):
                src = ex_rows[merged_away]
                dst = target[ex_sid[merged_away]]
                self.merge_windows(src, dst, clock, out)
                self.firing.close(target[sess_new[closed_s[sess_new]]])
                g_pairs = target[pair_sid]
                keep = np.ones(len(self.table), dtype=bool)
                keep[src] = False
                remap = np.cumsum(keep) - 1
                self.table.keep(keep)
                closed_p = closed_s[pair_sid]
                g_pairs = np.where(closed_p, -1, remap[np.maximum(g_pairs, 0)])
                return g_pairs, closed_p
        closed_p = closed_s[pair_sid]
        return np.where(closed_p, -1, target[pair_sid]), closed_p

    def merge_windows(self, src: np.ndarray, dst: np.ndarray, clock: Clock, out: StepOutput) -> None:
        """Fold windows ``src`` into new windows ``dst`` (retracting their last panes if needed;
        a closed window's final pane stands)."""
        if self.spec.retracting:
            fired = (self.table.cols["lp_idx"][src] >= 0) & ~self.table.closed[src]
            if fired.any():
                out.merged_away(self.table.rid[src[fired]], self.firing.retractions(src[fired], clock))
        for name, column in self.spec.trigger.columns():
            col = self.table.cols[name]
            op = {"sum": np.add, "any": np.logical_or, "max": np.maximum, "min": np.minimum}[column.combine]
            op.at(col, dst, col[src])
        np.minimum.at(self.table.cols["hold_min"], dst, self.table.cols["hold_min"][src])
        np.maximum.at(self.table.cols["hold_max"], dst, self.table.cols["hold_max"][src])
        for s, d in sorted(zip(src.tolist(), dst.tolist()), key=lambda p: (p[1], self.table.ws[p[0]])):
            merge_rows(self.aggs, self.table.cols, s, d)


def _match(comp_pairs: np.ndarray, comp_state: np.ndarray, cand: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group pairs by window id and find each window among the candidate state rows: (group per
    pair, state row per group or -1, a pair of each group, pairs per group). Ids in a dense range
    are counted and looked up in an array; others are hashed (groups in order of first appearance)."""
    top = int(max(comp_pairs.max(), comp_state.max(initial=0))) + 1
    if top <= 2 * (len(comp_pairs) + len(comp_state)) + 1024:
        grp = Groups(comp_pairs)
        rep = np.empty(len(grp), dtype=np.int64)
        rep[grp.ids] = np.arange(len(comp_pairs), dtype=np.int64)
        slot = np.full(top, -1, dtype=np.int64)
        slot[comp_state] = cand
        return grp.ids, slot[grp.rows], rep, grp.sizes
    group, uniques = pd().factorize(comp_pairs)
    rep = np.full(len(uniques), -1, dtype=np.int64)
    rep[group[::-1]] = np.arange(len(group))[::-1]
    row = np.full(len(uniques), -1, dtype=np.int64)
    if len(cand):
        at = pd().Index(comp_state).get_indexer(uniques)
        row[at >= 0] = cand[at[at >= 0]]
    return group.astype(np.int64), row, rep, np.bincount(group, minlength=len(uniques))
