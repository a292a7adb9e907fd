"""Arrow <-> Spark type and schema conversion for the ``windowed`` plugin.

One mapping, used by the pane sink, the pane-table reader and the stream reader, so a pane
column has the same type in Arrow batches, in Spark and in the Delta tables:

=========================================  ==========================================
Arrow                                      Spark
=========================================  ==========================================
``bool``                                   ``BooleanType``
``int8`` / ``int16`` / ``int32`` / ``int64``  ``ByteType`` / ``ShortType`` / ``IntegerType`` / ``LongType``
``uint8`` / ``uint16`` / ``uint32``        widened: ``ShortType`` / ``IntegerType`` / ``LongType``
``float32`` / ``float64``                  ``FloatType`` / ``DoubleType``
``decimal128(p, s)`` (p <= 38)             ``DecimalType(p, s)``
``string`` / ``large_string`` / view       ``StringType``
``binary`` / ``large_binary`` / fixed      ``BinaryType``
``date32`` / ``date64``                    ``DateType``
``timestamp(unit, tz=<any zone>)``         ``TimestampType`` (an instant; Arrow side is ``us``, UTC)
``timestamp(unit)`` (no zone)              ``TimestampNTZType``
``list`` / ``large_list`` / fixed list     ``ArrayType`` (``containsNull`` = element nullability)
``struct``                                 ``StructType``
``map``                                    ``MapType``
``dictionary<_, v>``                       the Spark type of ``v``
``null``                                   ``NullType``
=========================================  ==========================================

Spark -> Arrow always gives the canonical form: ``timestamp("us", tz="UTC")`` for
``TimestampType`` (whatever the session time zone), ``timestamp("us")`` for ``TimestampNTZType``,
``string``, ``binary``, ``date32``, ``list``. Field nullability is kept both ways. Anything else
(unsigned 64-bit, intervals, unions, ...) raises ``TypeError`` naming the column.

>>> import pyarrow as pa
>>> arrow_to_spark_schema(pa.schema([("k", pa.string()), ("t", pa.timestamp("ms", tz="UTC"))])).simpleString()
'struct<k:string,t:timestamp>'
>>> spark_to_arrow_schema(arrow_to_spark_schema(pa.schema([("t", pa.timestamp("ms", tz="UTC"))])))
t: timestamp[us, tz=UTC]
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["arrow_to_spark_schema", "spark_to_arrow_schema", "arrow_to_spark_type",
           "spark_to_arrow_type", "UTC_TIMESTAMP"]

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")

_ARROW_SIMPLE: tuple[tuple[pa.DataType, DataType], ...] = (
    (pa.bool_(), BooleanType()),
    (pa.int8(), ByteType()),
    (pa.int16(), ShortType()),
    (pa.int32(), IntegerType()),
    (pa.int64(), LongType()),
    (pa.uint8(), ShortType()),
    (pa.uint16(), IntegerType()),
    (pa.uint32(), LongType()),
    (pa.float32(), FloatType()),
    (pa.float64(), DoubleType()),
    (pa.date32(), DateType()),
    (pa.date64(), DateType()),
    (pa.null(), NullType()),
)

_SPARK_SIMPLE: dict[type, pa.DataType] = {
    BooleanType: pa.bool_(),
    ByteType: pa.int8(),
    ShortType: pa.int16(),
    IntegerType: pa.int32(),
    LongType: pa.int64(),
    FloatType: pa.float32(),
    DoubleType: pa.float64(),
    StringType: pa.string(),
    BinaryType: pa.binary(),
    DateType: pa.date32(),
    TimestampType: UTC_TIMESTAMP,
    TimestampNTZType: pa.timestamp("us"),
    NullType: pa.null(),
}


def arrow_to_spark_schema(schema: pa.Schema) -> StructType:
    """The Spark ``StructType`` of an Arrow schema (field order and nullability kept)."""
    return StructType([_arrow_field_to_spark(f, f.name) for f in schema])


def spark_to_arrow_schema(schema: StructType) -> pa.Schema:
    """The canonical Arrow schema of a Spark ``StructType`` (timestamps as ``us``, UTC)."""
    return pa.schema([_spark_field_to_arrow(f, f.name) for f in schema.fields])


def arrow_to_spark_type(arrow_type: pa.DataType, *, column: str = "<value>") -> DataType:
    """The Spark type of one Arrow type; ``column`` only names the culprit in errors."""
    for a, s in _ARROW_SIMPLE:
        if arrow_type.equals(a):
            return s
    t = pa.types
    if t.is_string(arrow_type) or t.is_large_string(arrow_type) or _is_view(arrow_type, "string"):
        return StringType()
    if (t.is_binary(arrow_type) or t.is_large_binary(arrow_type) or t.is_fixed_size_binary(arrow_type)
            or _is_view(arrow_type, "binary")):
        return BinaryType()
    if t.is_timestamp(arrow_type):
        return TimestampType() if arrow_type.tz is not None else TimestampNTZType()
    if t.is_decimal(arrow_type) and arrow_type.precision <= 38:
        return DecimalType(arrow_type.precision, arrow_type.scale)
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return ArrayType(arrow_to_spark_type(arrow_type.value_type, column=column),
                         containsNull=arrow_type.value_field.nullable)
    if t.is_struct(arrow_type):
        return StructType([_arrow_field_to_spark(arrow_type.field(i), f"{column}.{arrow_type.field(i).name}")
                           for i in range(arrow_type.num_fields)])
    if t.is_map(arrow_type):
        return MapType(arrow_to_spark_type(arrow_type.key_type, column=column),
                       arrow_to_spark_type(arrow_type.item_type, column=column),
                       valueContainsNull=arrow_type.item_field.nullable)
    if t.is_dictionary(arrow_type):
        return arrow_to_spark_type(arrow_type.value_type, column=column)
    raise TypeError(f"column {column!r}: Arrow type {arrow_type} has no Spark equivalent here; "
                    "supported: bool, (u)int8-32, int64, float32/64, decimal128(<=38), string, binary, "
                    "date, timestamp, list, struct, map, dictionary")


def spark_to_arrow_type(spark_type: DataType, *, column: str = "<value>") -> pa.DataType:
    """The canonical Arrow type of one Spark type; ``column`` only names the culprit in errors."""
    simple = _SPARK_SIMPLE.get(type(spark_type))
    if simple is not None:
        return simple
    if isinstance(spark_type, DecimalType):
        return pa.decimal128(spark_type.precision, spark_type.scale)
    if isinstance(spark_type, ArrayType):
        element = spark_to_arrow_type(spark_type.elementType, column=column)
        return pa.list_(pa.field("element", element, nullable=spark_type.containsNull))
    if isinstance(spark_type, StructType):
        return pa.struct([_spark_field_to_arrow(f, f"{column}.{f.name}") for f in spark_type.fields])
    if isinstance(spark_type, MapType):
        return pa.map_(spark_to_arrow_type(spark_type.keyType, column=column),
                       pa.field("value", spark_to_arrow_type(spark_type.valueType, column=column),
                                nullable=spark_type.valueContainsNull))
    raise TypeError(f"column {column!r}: Spark type {spark_type.simpleString()} has no Arrow equivalent "
                    "here; supported: boolean, byte, short, int, long, float, double, decimal, string, "
                    "binary, date, timestamp, timestamp_ntz, array, struct, map")


def _arrow_field_to_spark(field: pa.Field, column: str) -> StructField:
    return StructField(field.name, arrow_to_spark_type(field.type, column=column), nullable=field.nullable)


def _spark_field_to_arrow(field: StructField, column: str) -> pa.Field:
    return pa.field(field.name, spark_to_arrow_type(field.dataType, column=column), nullable=field.nullable)


def _is_view(arrow_type: pa.DataType, kind: str) -> bool:
    checker = getattr(pa.types, f"is_{kind}_view", None)
    return bool(checker is not None and checker(arrow_type))
