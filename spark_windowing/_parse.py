"""A tiny parser for the call expressions used by options: ``sliding(10 minutes, 2 minutes)``,
``AfterWatermark(early=AfterCount(2), late=AfterProcessingTime(1 minute))``, ``session(gapColumn=g)``.

An argument is either a nested call or raw text (a duration, a number, a column name). Bare names
(``global``, ``Default``) parse as calls without arguments.

>>> parse_call("AfterWatermark(early=AfterCount(2))", option="trigger")
Call(name='AfterWatermark', args=(), kwargs=(('early', Call(name='AfterCount', args=('2',), kwargs=())),))
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from spark_windowing.errors import OptionError

Arg = Union["Call", str]
_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*")


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Arg, ...] = ()
    kwargs: tuple[tuple[str, Arg], ...] = ()

    def kw(self) -> dict[str, Arg]:
        return dict(self.kwargs)


class _Parser:
    def __init__(self, text: str, option: str, accepted: str) -> None:
        self.text, self.option, self.accepted, self.pos = text, option, accepted, 0

    def fail(self, why: str) -> OptionError:
        return OptionError(self.option, self.text, self.accepted, why=why)

    def call(self) -> Call:
        m = _NAME.match(self.text, self.pos)
        if not m:
            raise self.fail(f"expected a name at position {self.pos}")
        self.pos = m.end()
        name = m.group(1)
        if self.pos < len(self.text) and self.text[self.pos] == "(":
            self.pos += 1
            args, kwargs = self.arguments()
            return Call(name, tuple(args), tuple(kwargs))
        return Call(name)

    def arguments(self) -> tuple[list[Arg], list[tuple[str, Arg]]]:
        args: list[Arg] = []
        kwargs: list[tuple[str, Arg]] = []
        self.skip_ws()
        if self.peek() == ")":
            self.pos += 1
            return args, kwargs
        while True:
            self.skip_ws()
            kw = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)").match(self.text, self.pos)
            key = None
            if kw:
                key = kw.group(1)
                self.pos = kw.end()
            value = self.argument()
            if key is None:
                if kwargs:
                    raise self.fail("positional argument after keyword argument")
                args.append(value)
            else:
                kwargs.append((key, value))
            self.skip_ws()
            ch = self.peek()
            self.pos += 1
            if ch == ")":
                return args, kwargs
            if ch != ",":
                raise self.fail("expected ',' or ')'" if ch else "missing ')'")

    def argument(self) -> Arg:
        self.skip_ws()
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*\(").match(self.text, self.pos)
        if m:
            return self.call()
        start, depth = self.pos, 0
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                break
            self.pos += 1
        raw = self.text[start:self.pos].strip()
        if not raw:
            raise self.fail("empty argument")
        return raw

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1


def parse_call(text: str, *, option: str, accepted: str = "") -> Call:
    """Parse one call expression; raise OptionError naming ``option`` on bad syntax."""
    p = _Parser(str(text), option, accepted)
    call = p.call()
    p.skip_ws()
    if p.pos != len(p.text):
        raise p.fail(f"unexpected text {p.text[p.pos:]!r}")
    return call


def parse_bool(option: str, value: object) -> bool:
    """A boolean option: true/1/yes or false/0/no (any case, spaces trimmed)."""
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise OptionError(option, value, "true, false")
