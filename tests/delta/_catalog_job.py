"""Subprocess of test_pane_tables_delta_spark: ``<metastore dir> <pane root>``.

A Hive catalog kept in a Derby database under the metastore dir. A first SparkSession registers
the pane tables (``CREATE TABLE ... USING DELTA LOCATION``) and is stopped; a later SparkSession
(a new SparkContext: nothing of the first one's catalog is left in memory) queries them by name and
prints one JSON line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import delta_session  # noqa: E402

TABLES = ("triggers", "retractions", "current", "late")


def session(metastore: str, app: str):
    spark = delta_session.builder(app, warehouse=f"{metastore}/warehouse", metastore=metastore).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(metastore: str, root: str) -> None:
    first = session(metastore, "catalog-create")
    for t in TABLES:
        first.sql(f"CREATE TABLE panes_{t} USING DELTA LOCATION '{root}/{t}'")
    created_in = first.sparkContext.applicationId
    first.stop()

    later = session(metastore, "catalog-query")
    counts = {t: later.sql(f"SELECT count(*) FROM panes_{t}").first()[0] for t in TABLES}
    totals = later.sql("SELECT user_id, round(sum(total), 6) AS s FROM panes_current GROUP BY user_id").collect()
    names = sorted(r["tableName"] for r in later.sql("SHOW TABLES").collect())
    print(json.dumps({"counts": counts, "total_by_user": {r["user_id"]: r["s"] for r in totals},
                      "tables": names, "created_in": created_in,
                      "queried_in": later.sparkContext.applicationId}))
    later.stop()


if __name__ == "__main__":
    main(*sys.argv[1:3])
