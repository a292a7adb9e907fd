"""Single option values as the option parser and the upstream kinds read them (a leaf): each bad
value raises ``OptionError`` naming the option, the value and the accepted forms.

>>> int_option({"shards": "4"}, "shards", minimum=1)
4
>>> int_option({}, "shards", default=2)
2
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

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


def fraction_value(raw: str, option: str) -> float:
    """A number from 0 to 1 (option ``option``'s value ``raw``)."""
    try:
        v = float(raw)
    except ValueError:
        raise OptionError(option, raw, "a number between 0 and 1") from None
    if not 0 <= v <= 1:
        raise OptionError(option, raw, "a number between 0 and 1")
    return v


def instant_value(raw: str, option: str) -> int:
    """An ISO-8601 timestamp as UTC µs (naive: UTC)."""
    try:
        d = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(option, raw, "an ISO-8601 timestamp such as 2026-01-01T00:00:00Z") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=timezone.utc)
    return int(d.timestamp() * 1_000_000)


def suffixed(options: dict[str, str], suffix: str) -> tuple[Callable[..., str | None], Callable[..., int | None]]:
    """``get(name, default)`` and ``num(name, **int_option kw)`` over lower-cased ``options`` for a
    kind's option ``name`` of a join's stream ``suffix`` (``"2"``): ``<name>2``, falling back to
    ``<name>``; errors name the suffixed option."""
    def get(name: str, default: str | None = None) -> str | None:
        return options.get(name.lower() + suffix, options.get(name.lower(), default))

    def num(name: str, **kw) -> int | None:
        return int_option({(name + suffix).lower(): v} if (v := get(name)) is not None else {}, name + suffix, **kw)
    return get, num


def choice_option(options: dict[str, str], name: str, accepted: tuple[str, ...]) -> str:
    """Option ``name`` as one of ``accepted`` (default the first), case-insensitive."""
    raw = options.get(name.lower())
    if raw is None or not str(raw).strip():
        return accepted[0]
    value = str(raw).strip().lower()
    if value not in accepted:
        raise OptionError(name, raw, ", ".join(accepted))
    return value
