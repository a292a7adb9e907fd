"""Single option values as the option parser and the upstream kinds read them (a leaf): each bad
value raises ``OptionError`` naming the option, the value and the accepted forms.

>>> int_option({"shards": "4"}, "shards", minimum=1)
4
>>> int_option({}, "shards", default=2)
2
"""

from __future__ import annotations

from spark_windowing.errors import OptionError
from spark_windowing._parse import parse_bool


def int_option(options: dict[str, str], name: str, *, minimum: int = 0, default: int | None = None) -> int | None:
    """The integer option ``name`` (looked up lower-cased), at least ``minimum``; ``default``
    when absent or blank."""
    raw = options.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(name, raw, f"an integer >= {minimum}") from None
    if value < minimum:
        raise OptionError(name, raw, f"an integer >= {minimum}")
    return value


def bool_option(options: dict[str, str], name: str, default: bool) -> bool:
    """The boolean option ``name`` (looked up lower-cased); ``default`` when absent."""
    raw = options.get(name.lower())
    return default if raw is None else parse_bool(name, raw)
