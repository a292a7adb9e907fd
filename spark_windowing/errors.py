"""The one exception module of spark_windowing."""

from __future__ import annotations


class WindowingError(Exception):
    """Base class of every error this package raises on purpose."""


class OptionError(WindowingError, ValueError):
    """An invalid option or spec value; names the option, the value and the accepted forms.

    >>> str(OptionError("window", "sliding(5 minutes, 0 seconds)", "sliding(<size>, <slide>)",
    ...                 why="slide must be > 0"))
    "invalid option 'window' = 'sliding(5 minutes, 0 seconds)': slide must be > 0. Accepted: sliding(<size>, <slide>)"
    """

    def __init__(self, option: str, value: object, accepted: str, *, why: str = "") -> None:
        self.option, self.value, self.accepted, self.why = option, value, accepted, why
        detail = f": {why}" if why else ""
        super().__init__(f"invalid option {option!r} = {value!r}{detail}. Accepted: {accepted}")

    def __reduce__(self):  # keep picklable across Spark workers
        return (_rebuild_option_error, (self.option, self.value, self.accepted, self.why))


def _rebuild_option_error(option, value, accepted, why):
    return OptionError(option, value, accepted, why=why)


class UnknownOptionError(OptionError):
    """An option name no reader knows. The first line names it and the closest known names in
    their documented casing; the accepted names follow on the next line.

    >>> print(UnknownOptionError("acumulationMode", "accumulating", "the README's Options table",
    ...                          suggestions=["accumulationMode"]))
    unknown option 'acumulationMode': did you mean 'accumulationMode'?
    Accepted: the README's Options table
    """

    def __init__(self, option: str, value: object, accepted: str, *, suggestions=()) -> None:
        super().__init__(option, value, accepted, why="unknown option")
        self.suggestions = tuple(suggestions)
        if self.suggestions:
            hint = ": did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        else:
            hint = " (no known option is close)"
        self.args = (f"unknown option {option!r}{hint}\nAccepted: {accepted}",)

    def __reduce__(self):
        return (_rebuild_unknown_option_error, (self.option, self.value, self.accepted, self.suggestions))


def _rebuild_unknown_option_error(option, value, accepted, suggestions):
    return UnknownOptionError(option, value, accepted, suggestions=suggestions)


class SnapshotError(WindowingError):
    """A state snapshot is missing, corrupt, of another format version or of another spec."""


class ProcessError(WindowingError):
    """A process function (``process`` option) returned something other than its declared
    ``output_fields``; names the function, the pane and the offending column."""
