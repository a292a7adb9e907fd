"""The ``trigger`` option's grammar: ``parse_trigger`` builds the trigger tree from its text.

>>> parse_trigger("AfterWatermark(early=AfterCount(2), late=AfterProcessingTime(1 minute))").spec()
'AfterWatermark(early=AfterCount(2), late=AfterProcessingTime(60000000us))'
"""

from __future__ import annotations

from typing import Callable

from spark_windowing._parse import Call, parse_call
from spark_windowing._time import parse_duration
from spark_windowing.errors import OptionError
from spark_windowing.triggers.composites import AfterAll, AfterAny, AfterEach, AfterWatermark, OrFinally, Repeatedly
from spark_windowing.triggers.leaves import (AfterCount, AfterProcessingTime, ContinuousEventTime,
                                             ContinuousProcessingTime, Default, Never)
from spark_windowing.triggers.tree import TRIGGER_FORMS, Trigger


def parse_trigger(text: str) -> Trigger:
    """Parse the ``trigger`` option; raise OptionError naming the value and accepted forms."""
    call = parse_call(text, option="trigger", accepted=TRIGGER_FORMS)
    return _build(call, str(text))


def _fail(text: str, why: str) -> OptionError:
    return OptionError("trigger", text, TRIGGER_FORMS, why=why)


def _sub(arg, text: str) -> Trigger:
    if not isinstance(arg, Call):
        if isinstance(arg, str) and arg.replace("_", "").isalnum() and not arg[0].isdigit():
            return _build(Call(arg), text)
        raise _fail(text, f"expected a trigger, got {arg!r}")
    return _build(arg, text)


def _duration(call: Call, text: str, *, allow_zero: bool) -> int:
    if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], str):
        raise _fail(text, f"{call.name} takes one duration")
    try:
        return parse_duration(call.args[0], option="trigger", allow_zero=allow_zero)
    except OptionError as e:
        raise _fail(text, f"{call.name}: {call.args[0]!r} is not a valid duration ({e.why or 'unknown unit'})") from None


def _build(call: Call, text: str) -> Trigger:
    name = call.name.lower()
    builders: dict[str, Callable[[], Trigger]] = {
        "default": lambda: _noargs(call, text, Default()),
        "never": lambda: _noargs(call, text, Never()),
        "aftercount": lambda: _after_count(call, text),
        "afterprocessingtime": lambda: AfterProcessingTime(_duration(call, text, allow_zero=True)),
        "continuouseventtime": lambda: ContinuousEventTime(_duration(call, text, allow_zero=False)),
        "continuousprocessingtime": lambda: ContinuousProcessingTime(_duration(call, text, allow_zero=False)),
        "repeatedly": lambda: Repeatedly(_one(call, text)),
        "afterany": lambda: AfterAny(_many(call, text, 1)),
        "afterall": lambda: AfterAll(_many(call, text, 1)),
        "aftereach": lambda: AfterEach(_many(call, text, 1)),
        "orfinally": lambda: OrFinally(_many(call, text, 2, 2)),
        "afterwatermark": lambda: _after_watermark(call, text),
    }
    if name not in builders:
        raise _fail(text, f"unknown trigger {call.name!r}")
    return builders[name]()


def _noargs(call: Call, text: str, trigger: Trigger) -> Trigger:
    if call.args or call.kwargs:
        raise _fail(text, f"{call.name}() takes no arguments")
    return trigger


def _after_count(call: Call, text: str) -> Trigger:
    if len(call.args) != 1 or call.kwargs or not isinstance(call.args[0], str):
        raise _fail(text, "AfterCount takes one integer")
    try:
        n = int(call.args[0])
    except ValueError:
        raise _fail(text, f"AfterCount: {call.args[0]!r} is not an integer") from None
    if n < 1:
        raise _fail(text, f"AfterCount: count must be >= 1, got {n}")
    return AfterCount(n)


def _one(call: Call, text: str) -> Trigger:
    if len(call.args) != 1 or call.kwargs:
        raise _fail(text, f"{call.name} takes one trigger")
    return _sub(call.args[0], text)


def _many(call: Call, text: str, lo: int, hi: int | None = None) -> tuple[Trigger, ...]:
    if call.kwargs or len(call.args) < lo or (hi is not None and len(call.args) > hi):
        want = f"{lo}" if hi == lo else f"at least {lo}"
        raise _fail(text, f"{call.name} takes {want} trigger(s)")
    return tuple(_sub(a, text) for a in call.args)


def _after_watermark(call: Call, text: str) -> Trigger:
    kw = {k.lower(): v for k, v in call.kwargs}
    unknown = set(kw) - {"early", "late"}
    if call.args or unknown:
        raise _fail(text, "AfterWatermark takes only early=<trigger> and late=<trigger>")
    return AfterWatermark(early=_sub(kw["early"], text) if "early" in kw else None,
                          late=_sub(kw["late"], text) if "late" in kw else None)
