"""Clickstream sessions: the demo (quick start: ``bash scripts/demo.sh``).

Generated clicks -> per-user session windows (30 s gap) with EARLY panes every 5 clicks, an
ON_TIME pane when a session closes and LATE panes for late clicks, accumulating and retracting
-> the windowed sink (Delta tables ``triggers``, ``retractions``, ``current``) -> Spark SQL over
the tables -> a pane timeline PNG.

Sessions grow and merge as clicks arrive, so a session that already fired an EARLY pane is
replaced by a larger one: its pane is withdrawn by a RETRACTION row and ``current`` keeps only
the live session. Clicks hours late are dropped to the late-data table — except in the first
micro-batch, which runs before any watermark exists (their sessions are the lone ones hours
before the rest).

Every windowing setting comes from ``conf/clickstream_sessions.conf`` (``spark.windowed.*``)::

    spark-submit --properties-file conf/clickstream_sessions.conf examples/clickstream_sessions.py
    python examples/clickstream_sessions.py [--output DIR] [--conf spark.windowed.keys=5 ...]

Outputs go to ``./out/clickstream_sessions/`` (emptied first). Runs in about a minute on two cores.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Sequence

import _common

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

NAME = "clickstream_sessions"

#: The longest sessions in the current table (retractions applied: merged-away sessions are gone).
LONGEST_SESSIONS_SQL = """\
SELECT user_id, window_start AS session_start, window_end AS session_end,
       clicks, pages, round(revenue, 2) AS revenue, pane_timing, pane_index, is_final
FROM clicks
ORDER BY clicks DESC, user_id, session_start
LIMIT 8"""

#: Top 3 users per 10-minute period, by clicks in the sessions that started in it.
TOP_USERS_SQL = """\
SELECT period, user_id, sessions, clicks, rank
FROM (
  SELECT period, user_id, sessions, clicks,
         ROW_NUMBER() OVER (PARTITION BY period ORDER BY clicks DESC, user_id) AS rank
  FROM (SELECT window(window_start, '10 minutes').start AS period, user_id,
               count(*) AS sessions, sum(clicks) AS clicks
        FROM clicks GROUP BY 1, 2)
)
WHERE rank <= 3
ORDER BY period, rank"""

#: Sessions that grew into their neighbours: each withdrawn pane of a window that is gone from
#: ``current``, next to the live session that swallowed it.
MERGED_SESSIONS_SQL = """\
SELECT r.user_id, r.window_start AS old_start, r.window_end AS old_end, r.clicks AS old_clicks,
       c.window_start AS session_start, c.window_end AS session_end, c.clicks, c.pane_timing
FROM clicks_retractions r
JOIN clicks c
  ON c.user_id = r.user_id AND c.window_start <= r.window_start AND r.window_end <= c.window_end
 AND NOT (c.window_start = r.window_start AND c.window_end = r.window_end)
ORDER BY r.user_id, old_start
LIMIT 10"""


def main(argv: Sequence[str] | None = None, *, spark: "SparkSession | None" = None) -> _common.Outputs:
    """Run the demo; return where its outputs are. ``spark``: use this session (tests)."""
    args = _common.Args.parse(NAME, __doc__, argv)
    out = _common.Outputs.fresh(args.output)
    with _common.windowed_session(args, spark) as session:
        _common.print_banner("Clickstream sessions", session, args)
        panes = (session.readStream.format("windowed")          # the rest: spark.windowed.*
                 .option("stateLocation", out.state)
                 .option("lateDataPath", out.late)
                 .load())
        seconds = _common.run_to_end(panes, out, query_name="clicks", spark=session)

        _common.create_views(session, out, "clicks")
        _common.show_sql(session, "Panes by kind and timing",
                         _common.PANE_COUNTS_SQL.format(name="clicks"))
        _common.show_sql(session, "Longest sessions (current table)", LONGEST_SESSIONS_SQL)
        _common.show_sql(session, "Top 3 users per 10 minutes", TOP_USERS_SQL)
        _common.show_sql(session, "Sessions merged into a later, larger one (their panes retracted)",
                         MERGED_SESSIONS_SQL)
        _common.show_late_data(session, out, "clicks_late", event_id="event_id")
        _common.plot_timeline(out, title="Clickstream sessions: sessions starting in a 5-minute slice",
                              minutes=5)
    _common.print_outputs("Clickstream sessions", out, seconds)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)
