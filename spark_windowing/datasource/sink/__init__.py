"""The windowed sink, ``writeStream.format("windowed")``: writes panes to the Delta pane tables
exactly once per micro-batch.

- ``writer``: the ``DataSourceStreamArrowWriter`` (a task writes data files; the driver commits
  them with the batch id as Delta app transaction, then MERGEs ``current``);
- ``lease``: one writer per sink path;
- ``metrics``: what a batch wrote, for the progress line.

The tables themselves (schema, Delta plumbing, upkeep, reads) are ``..tables``; it never imports
the source.
"""
