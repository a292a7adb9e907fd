"""The ``schema`` option's DDL: ``'name type, ...'`` as an Arrow schema (a leaf: upstream readers
and the Kafka value decoder both parse it).

>>> parse_ddl("user string, ts timestamp, n long")
user: string
ts: timestamp[us, tz=UTC]
n: int64
"""

from __future__ import annotations

import pyarrow as pa

from spark_windowing.errors import OptionError

DDL_TYPES = {"string": pa.string(), "long": pa.int64(), "bigint": pa.int64(), "int": pa.int32(),
             "integer": pa.int32(), "double": pa.float64(), "float": pa.float32(), "boolean": pa.bool_(),
             "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32()}
#: The accepted forms, as errors name them.
DDL_FORMS = "'name type, ...' with types " + ", ".join(DDL_TYPES)


def parse_ddl(ddl: str, option: str = "schema") -> pa.Schema:
    """``ddl`` as a schema; raise OptionError naming ``option`` for an item that is not ``name type``."""
    fields = []
    for item in ddl.split(","):
        parts = item.split()
        if len(parts) != 2 or parts[1].lower() not in DDL_TYPES:
            raise OptionError(option, ddl, DDL_FORMS, why=f"cannot parse {item.strip()!r}")
        fields.append(pa.field(parts[0].strip("`"), DDL_TYPES[parts[1].lower()]))
    return pa.schema(fields)
