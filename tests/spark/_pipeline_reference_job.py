"""The clickstream pipeline's query run with ``writeStream`` (no declarative pipeline), as its own
process so that a test runs one Spark at a time: the reference ``test_declarative_pipelines``
compares the pipeline's tables with.

usage: python _pipeline_reference_job.py PIPELINE_DIR OUT RUN...
Each RUN is ``name:seed:totalEvents``; runs of one name share a checkpoint (a re-run resumes),
each an availableNow run of ``format("windowed")`` into the windowed sink at ``OUT/<name>/panes``
(state and late data under ``OUT/<name>``, as the pipeline's options put them).
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402

import spark_windowing  # noqa: E402


def main(pipeline_dir: str, out: str, runs: list[str]) -> None:
    sys.path.insert(0, pipeline_dir)
    from clickstream_options import windowed_options
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_windowing.register(spark)
    for run in runs:
        name, seed, total = run.split(":")
        output = f"{out}/{name}"
        options = windowed_options(output, total_events=int(total), seed=int(seed))
        q = (spark.readStream.format("windowed").options(**options).load()
             .writeStream.format("windowed").option("path", f"{output}/panes")
             .option("checkpointLocation", f"{output}/checkpoint").trigger(availableNow=True).start())
        q.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
