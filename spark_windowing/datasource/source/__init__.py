"""The windowed source, ``spark.readStream.format("windowed")``: plans micro-batches on the driver
and runs the operator inside Spark's read tasks, one shard of keys per task.

- ``reader``: the ``DataSourceStreamReader`` (offsets, planning, a task's read → step → panes);
- ``sharding``: which shard an event's key belongs to;
- ``affinity``: which task runs which shard (claims), keeping a shard's state open in its executor;
- ``shard_state``: opening a shard's ``StateStore`` at an offset (local copy, store, rescale);
- ``rescale``: re-sharding state when ``shards`` changes;
- ``shard_reports``: what each shard's task tells the driver (watermark, timers, counts);
- ``checks``: the checks of a query's state and schema against its options.

It reads upstreams (``..upstreams``), writes the late-data table (``..tables``) and its state
(``..storage``); it never imports the sink.
"""
