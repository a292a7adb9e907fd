"""The Delta tables a windowed query writes and users read: ``triggers``, ``retractions``,
``current`` and the late-data table.

- ``delta``: the delta-rs plumbing (schemas, data files, commits, ``current``'s buckets);
- ``pane_spec``: the spec record of the options that shaped a sink's panes (``P/_spec.json``);
- ``late``: the late-data table;
- ``maintenance``: compaction, vacuum, log checkpoints, ``migrate_current``;
- ``table_reader``: ``spark.read.format("windowed").load(P)`` and ``TOP_KEYS_PER_WINDOW_SQL``.

Shared by the source (late rows), the sink (pane tables) and the ``panes`` upstream; imports
neither the source nor the sink.
"""

from spark_windowing._lazy import lazy_getattr

#: Names the docs show as ``spark_windowing.datasource.tables.<name>`` (from before it was a
#: package), imported on first use.
__getattr__ = lazy_getattr(__name__, {"TOP_KEYS_PER_WINDOW_SQL": f"{__name__}.table_reader", "PaneTableReader": f"{__name__}.table_reader", "table_schema": f"{__name__}.table_reader"})
