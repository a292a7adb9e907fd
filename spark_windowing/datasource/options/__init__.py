"""The options of ``format("windowed")`` and ``window(df)``: their types, values and registry, the
bottom of the plugin (the upstreams parse their own options with ``values`` and ``ddl``; the
source's ``source.parse`` assembles them).

- ``config``: the parsed types (``SourceConfig``);
- ``reference``: the one registry of documented options (generates ``docs/options.md``);
- ``values``: single values (integers, booleans, fractions); ``ddl``: the ``schema`` option;
- ``conf``: ``spark.windowed.*`` conf entries as option defaults.

Imports neither the upstreams nor the source nor the sink.
"""
