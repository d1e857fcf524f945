"""Exceptions as the one line the command line prints."""

from __future__ import annotations

__all__ = ["error_message"]


def error_message(error: BaseException) -> str:
    """One line that says what went wrong, naming the file when known."""
    if isinstance(error, OSError) and error.strerror:
        filename = error.filename
        if filename is None or str(filename) in error.strerror:  # already named
            return error.strerror
        return f"{filename}: {error.strerror}"
    return str(error) or type(error).__name__
