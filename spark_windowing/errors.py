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


class SnapshotError(WindowingError):
    """A state snapshot is missing, corrupt, of another format version or of another spec."""


class ProcessError(WindowingError):
    """A process function (``process`` option) returned something other than its declared
    ``output_fields``; names the function, the pane and the offending column."""
