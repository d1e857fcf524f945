"""Exceptions as the one line the command line prints."""

from __future__ import annotations

from .. import EngineError
from .._sets import explain_open_failure
from ._escapes import escape_name

__all__ = ["EXPECTED_ERRORS", "BadArgument", "UsageError", "error_message", "opening_error"]


class BadArgument(ValueError):
    """An argument that is wrong for this input, found once it is open (an
    index outside the bag, a key not in the map, a bag option given for a
    dataset). Still a wrong argument: `main` prints it as argparse prints its
    own usage errors (the subcommand's prefix, one line) with exit status 2."""


class UsageError(BadArgument):
    """A wrong argument that argparse cannot see (a flag that does not go
    with the target, a value out of range): exit status 2 and the
    subcommand's usage prefix, exactly as argparse's own usage errors.
    Raise this one; BadArgument is the older name of the same rule."""


# What the command line reports as one line: failures a user can meet and
# fix (missing or damaged files, I/O, bad arguments). Anything else, e.g. a
# TypeError or IndexError from inside sackli, is a bug and shows its traceback.
# MemoryError: a record too large for this machine (the engine names the file
# and record); sackli.EngineError: a C++ failure the engine did not expect,
# still one line (it names what failed), never a traceback.
EXPECTED_ERRORS = (OSError, ValueError, MemoryError, EngineError)
# (sackli.CorruptionError, RecordTooLargeError and BadArgument are ValueErrors.)


# The library's advice names Python calls; on the command line, the flags.
_CLI_WORDING = (
    ("Open it with limits_placement=LimitsPlacement.SEPARATE", "Read it with --limits-placement SEPARATE"),
    ("sackli.recover(path) (from a shell: sackli recover PATH)", "sackli recover PATH"),
)


def error_message(error: BaseException) -> str:
    """One line that says what went wrong, naming the file when known."""
    if isinstance(error, OSError) and error.strerror:
        filename = error.filename
        if filename is None or str(filename) in error.strerror:  # already named
            message = error.strerror
        else:
            message = f"{filename}: {error.strerror}"
    else:
        message = str(error) or type(error).__name__
    for library, command_line in _CLI_WORDING:
        message = message.replace(library, command_line)
    return escape_name(message)


def opening_error(path: str, error: BaseException) -> str:
    """The one line that says why the file `path` did not open as a bag:
    what it is when that is known (sackli/_sniff.py), else `error`'s own
    message."""
    try:
        explain_open_failure(path, error, paths=lambda spec: [spec])
    except ValueError as named:
        return str(named)
    return error_message(error)
