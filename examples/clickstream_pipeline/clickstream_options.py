"""The windowed source's options of the clickstream pipeline: the demo's
(``conf/clickstream_sessions.conf``), with the state and late data under ``output``.

Kept out of ``transformations/`` (which the pipeline imports as definitions) so that a plain
``writeStream`` run of the same query can use them (``tests/spark/test_declarative_pipelines.py``).
"""

from __future__ import annotations


def windowed_options(output: str, *, total_events: int = 2400, seed: int = 7) -> dict[str, str]:
    """Generated clicks -> per-user sessions (30 s gap), EARLY panes every 5 clicks, ON_TIME and
    LATE panes, accumulating and retracting. ``newCheckpoint=reset``: a full refresh of the
    pipeline (a new checkpoint) starts the windowed state over instead of being refused."""
    return {
        "source": "generator", "totalEvents": str(total_events), "eventsPerBatch": "200", "keys": "12",
        "eventInterval": "1 second", "disorder": "90 seconds", "lateFraction": "0.01", "seed": str(seed),
        "timestampColumn": "event_time", "keyColumns": "user_id", "window": "session(30 seconds)",
        "aggregate": "count(*) AS clicks, sum(amount) AS revenue, count_distinct(page) AS pages, "
                     "min(event_time) AS first_click, max(event_time) AS last_click",
        "trigger": "AfterWatermark(early=AfterCount(5), late=AfterCount(1))",
        "accumulationMode": "accumulating_and_retracting", "watermark": "bounded(5 seconds)",
        "allowedLateness": "2 minutes", "shards": "2",
        "stateLocation": f"{output}/state/session_panes", "lateDataPath": f"{output}/late",
        "newCheckpoint": "reset",
    }
