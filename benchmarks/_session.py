"""What the benchmarks' Spark sessions share: the ``--serializer`` choice.

With ``execution=driver`` Spark keeps each micro-batch's panes in its block manager serialized with
``spark.serializer`` (``PythonMicroBatchStream.planInputPartitions``, ``MEMORY_AND_DISK_SER``);
Java serialization, Spark's default, costs ~2 µs a row there, Kryo (Spark's tuning guide's advice)
a fraction. The benchmarks set it for the whole session, so for both engines.
"""

SERIALIZERS = {"kryo": "org.apache.spark.serializer.KryoSerializer",
               "java": "org.apache.spark.serializer.JavaSerializer"}


def add_serializer_arg(ap) -> None:
    """``--serializer {kryo,java}`` (default kryo) on the argument parser ``ap``."""
    ap.add_argument("--serializer", choices=tuple(SERIALIZERS), default="kryo",
                    help="the session's spark.serializer, both engines (execution=driver keeps the panes "
                         "serialized with it in Spark's block manager; Java serialization costs ~2 µs a row)")
