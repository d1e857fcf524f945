"""Exceptions as the one line the command line prints."""

from __future__ import annotations

__all__ = ["EXPECTED_ERRORS", "BadArgument", "error_message"]


class BadArgument(ValueError):
    """An argument the command cannot use, found once the bag is open (an
    index outside it): printed as one line, like argparse's own errors."""


# What the command line reports as one line: failures a user can meet and
# fix (missing or damaged files, I/O, bad arguments). Anything else, e.g. a
# TypeError or IndexError from inside sackli, is a bug and shows its traceback.
EXPECTED_ERRORS = (OSError, ValueError)  # sackli.CorruptionError and BadArgument are ValueErrors


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
    return message
