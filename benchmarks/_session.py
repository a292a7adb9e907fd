"""What the benchmarks' Spark sessions share: the ``--serializer`` choice.

With ``execution=driver`` Spark keeps each micro-batch's panes in its block manager serialized with
``spark.serializer`` (``PythonMicroBatchStream.planInputPartitions``, ``MEMORY_AND_DISK_SER``);
Java serialization, Spark's default, costs ~2 µs a row there, Kryo (Spark's tuning guide's advice)
a fraction. The benchmarks set it for the whole session, so for both engines; by default Spark's
own (Java), which a README reader runs (before 2026-11-29 the default was Kryo).
"""

SERIALIZERS = {"kryo": "org.apache.spark.serializer.KryoSerializer",
               "java": "org.apache.spark.serializer.JavaSerializer"}


def add_serializer_arg(ap) -> None:
    """``--serializer {java,kryo}`` (default java, Spark's own: what a README reader runs) on the
    argument parser ``ap``."""
    ap.add_argument("--serializer", choices=tuple(SERIALIZERS), default="java",
                    help="the session's spark.serializer, both engines (default: Spark's own, java; the driver "
                         "route keeps the panes serialized with it in Spark's block manager)")
