"""Tools around the core and the plugin, part of neither: Maven packages for
``spark.jars.packages`` (``packages``), the JVM class-data sharing archive for a faster Spark start
(``jvm_archive``), the pane timeline (``plot``: ``python -m spark_windowing.tools.plot``) and NEXMark
events written where a query reads them (``nexmark``). Tools may import the plugin; the core never
imports a tool."""
