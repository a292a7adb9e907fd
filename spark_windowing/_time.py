"""One time model: int64 microseconds since the epoch (UTC); windows are half-open [start, end).

>>> parse_duration("1 hour 30 minutes", option="allowedLateness")
5400000000
>>> parse_duration("500 milliseconds", option="x")
500000
"""

from __future__ import annotations

import re

from spark_windowing.errors import OptionError

US = 1
MS = 1_000
SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY

#: "No watermark yet" / "+infinity". Far outside any real timestamp, and safe to add durations to.
MIN_TIME = -(2 ** 62)
MAX_TIME = 2 ** 62
#: The global window, as far as Spark's TimestampType reaches: [0001-01-01, 9999-12-31T23:59:59.999999].
GLOBAL_START = -62_135_596_800_000_000
GLOBAL_END = 253_402_300_799_999_999

_UNITS = {
    "microsecond": US, "microseconds": US, "us": US, "micros": US,
    "millisecond": MS, "milliseconds": MS, "ms": MS, "millis": MS,
    "second": SECOND, "seconds": SECOND, "s": SECOND, "sec": SECOND, "secs": SECOND,
    "minute": MINUTE, "minutes": MINUTE, "m": MINUTE, "min": MINUTE, "mins": MINUTE,
    "hour": HOUR, "hours": HOUR, "h": HOUR, "hr": HOUR, "hrs": HOUR,
    "day": DAY, "days": DAY, "d": DAY,
    "week": WEEK, "weeks": WEEK, "w": WEEK,
}
UNIT_FACTORS = {"s": SECOND, "ms": MS, "us": US}

DURATION_FORMS = ("a Spark interval such as '10 seconds', '5 minutes', '1 hour 30 minutes', "
                  "'500 milliseconds' (units: microseconds, milliseconds, seconds, minutes, hours, days, weeks)")
_PART = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


def parse_duration(text: str, *, option: str, allow_zero: bool = True,
                   allow_negative: bool = False) -> int:
    """Parse a Spark-interval-like duration into integer microseconds; raise OptionError."""
    raw = str(text).strip()
    body = raw[len("interval"):].strip() if raw.lower().startswith("interval") else raw
    body = body.strip("'\"")
    pos, total, parts = 0, 0, 0
    while pos < len(body):
        m = _PART.match(body, pos)
        if not m or m.group(2).lower() not in _UNITS:
            raise OptionError(option, text, DURATION_FORMS)
        factor = _UNITS[m.group(2).lower()]
        number = m.group(1)
        if "." in number:
            whole, frac = number.split(".")
            value = int(whole) * factor + (1 if not number.startswith("-") else -1) * (
                int(frac) * factor // 10 ** len(frac))
        else:
            value = int(number) * factor
        total += value
        parts += 1
        pos = m.end()
    if parts == 0:
        raise OptionError(option, text, DURATION_FORMS)
    if total < 0 and not allow_negative:
        raise OptionError(option, text, DURATION_FORMS, why="must not be negative")
    if total == 0 and not allow_zero:
        raise OptionError(option, text, DURATION_FORMS, why="must be greater than zero")
    return total


def format_duration(us: int) -> str:
    """The shortest exact spelling of ``us`` microseconds, e.g. ``90 seconds``."""
    for name, factor in (("days", DAY), ("hours", HOUR), ("minutes", MINUTE), ("seconds", SECOND),
                         ("milliseconds", MS)):
        if us and us % factor == 0:
            return f"{us // factor} {name}"
    return f"{us} microseconds"
