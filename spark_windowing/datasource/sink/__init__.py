"""The windowed sink, ``writeStream.format("windowed")``: writes panes to the Delta pane tables
exactly once per micro-batch.

- ``writer``: the ``DataSourceStreamArrowWriter`` Spark creates (the protocol, in its docstring);
- ``task``: what a task writes (data files, staged retraction-only windows);
- ``commit``: the driver's commit of a batch (appends with the batch id as Delta app transaction,
  the MERGE into ``current``, closing windows);
- ``config``: the sink's options and the message a task sends the commit;
- ``lease``: one writer per sink path;
- ``metrics``: what a batch wrote, for the progress line.

The tables themselves (schema, Delta plumbing, upkeep, reads) are ``..tables``; it never imports
the source.
"""
