"""The options of ``format("windowed")``: parsed once on the driver at ``load()``.

- ``config``: the parsed types (``SourceConfig``); a leaf that the upstreams and the source import;
- ``parse``: ``parse_options`` (reader options) and the operator's spec from options;
- ``reference``: the one registry of documented options (generates ``docs/options.md``);
- ``values``: single values (integers, booleans); ``ddl``: the ``schema`` option;
- ``conf``: ``spark.windowed.*`` conf entries as option defaults.

``parse`` imports the upstreams (each kind parses its own options), and the upstreams import
``config``, ``values`` and ``ddl``: so this package's ``__init__`` imports nothing eagerly.
"""

from spark_windowing._lazy import lazy_getattr

#: Names the docs show as ``spark_windowing.datasource.options.<name>`` (from before it was a
#: package), imported on first use.
__getattr__ = lazy_getattr(__name__, {"parse_options": f"{__name__}.parse", "SourceConfig": f"{__name__}.config", "KNOWN_OPTIONS": f"{__name__}.parse"})
