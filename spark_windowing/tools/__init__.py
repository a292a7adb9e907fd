"""Tools around the plugin, not part of it: Maven packages for ``spark.jars.packages``
(``packages``) and the JVM class-data sharing archive for a faster Spark start (``jvm_archive``)."""
