"""JVM packages from Maven Central through a resolver chain the project controls.

Spark fetches ``spark.jars.packages`` with Ivy. Its default chain reads the local Maven cache
(``~/.m2/repository``) first, where a pom without its jar breaks the resolution (see
``ivysettings.xml``). ``jar_confs`` gives the Spark conf that resolves from Maven Central only,
into a cache used by nothing else:

>>> from spark_windowing.tools.packages import jar_confs          # doctest: +SKIP
>>> builder = SparkSession.builder                                      # doctest: +SKIP
>>> for k, v in jar_confs("io.delta:delta-spark_4.2_2.13:4.4.0").items():  # doctest: +SKIP
...     builder = builder.config(k, v)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ivy_settings_path", "ivy_cache_dir", "jar_confs"]


def ivy_settings_path() -> str:
    """The path of the shipped ``ivysettings.xml`` (Maven Central only), for
    ``spark.jars.ivySettings``."""
    return str(Path(__file__).with_name("ivysettings.xml"))


def ivy_cache_dir() -> str:
    """The Ivy directory for those settings: ``$SPARK_WINDOWING_CACHE/ivy-central`` (default
    ``~/.cache/spark-windowing``). A directory of its own: a cache that Spark's default chain
    filled may record ``~/.m2`` as the resolver of a module, and is not reused."""
    cache = os.environ.get("SPARK_WINDOWING_CACHE") or str(Path.home() / ".cache" / "spark-windowing")
    return str(Path(cache) / "ivy-central")


def jar_confs(*packages: str) -> dict[str, str]:
    """The Spark conf that fetches ``packages`` (Maven coordinates ``group:artifact:version``)
    from Maven Central only, cached in ``ivy_cache_dir()``."""
    return {"spark.jars.packages": ",".join(packages), "spark.jars.ivySettings": ivy_settings_path(),
            "spark.jars.ivy": ivy_cache_dir()}
