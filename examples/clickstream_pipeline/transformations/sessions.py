"""Clickstream sessions as a declarative pipeline (``spark-pipeline.yml`` beside this folder).

* ``session_panes``: a streaming table whose rows are the panes of ``format("windowed")``; its
  state follows the flow's checkpoint (a re-run resumes; a full refresh starts over:
  ``newCheckpoint=reset``).
* ``pane_tables``: the windowed sink (Delta tables ``triggers``, ``retractions``, ``current``
  under ``<clickstream.output>/panes``), fed exactly once by the append flow ``panes_to_tables``
  from the streaming table.
* ``live_sessions``: a materialized view of the sessions still live (not retracted), each at its
  latest pane: what the sink's ``current`` holds, computed from a table the pipeline knows it
  depends on.
"""

import sys
from pathlib import Path

from pyspark import pipelines as dp
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from clickstream_options import windowed_options  # noqa: E402

OUTPUT = spark.conf.get("clickstream.output")  # noqa: F821  (SDP puts `spark` into this module)
OPTIONS = windowed_options(OUTPUT, total_events=int(spark.conf.get("clickstream.totalEvents")),  # noqa: F821
                           seed=int(spark.conf.get("clickstream.seed")))  # noqa: F821
WINDOW = ["user_id", "window_start", "window_end"]


@dp.table(comment="pane rows of per-user click sessions: EARLY, ON_TIME, LATE panes and retractions")
def session_panes():
    return spark.readStream.format("windowed").options(**OPTIONS).load()  # noqa: F821


dp.create_sink("pane_tables", format="windowed", options={"path": f"{OUTPUT}/panes"})


@dp.append_flow(target="pane_tables")
def panes_to_tables():
    # one file a micro-batch: a file holds one batch of one shard, so at most one pane per window
    # (the sink's rule); the panes reach the sink in their order
    return spark.readStream.option("maxFilesPerTrigger", 1).table("session_panes")  # noqa: F821


@dp.materialized_view(comment="sessions not retracted, each at its latest pane (as the sink's current)")
def live_sessions():
    panes = spark.read.table("session_panes")  # noqa: F821
    balance = panes.groupBy(*WINDOW).agg(F.sum(F.when(F.col("kind") == "TRIGGER", 1).otherwise(-1)).alias("open"))
    latest = (panes.where(F.col("kind") == "TRIGGER").groupBy(*WINDOW)
              .agg(F.max_by(F.struct("clicks", "revenue", "pages", "pane_timing", "pane_index"), "pane_index")
                   .alias("pane")))
    return latest.join(balance.where(F.col("open") > 0), WINDOW).select(*WINDOW, "pane.*")
