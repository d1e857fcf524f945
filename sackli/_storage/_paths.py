"""The one check of a path argument, so every entry point refuses a wrong
type with the same message."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["path_argument"]


def path_argument(value: Any, name: str) -> str:
    """`value`, a path given as `str` or `os.PathLike[str]`, as a str.

    `name` is the argument's name in the message. Anything else, bytes
    paths included (whether bytes or an `os.PathLike` giving bytes), raises
    TypeError "{name} must be a str or os.PathLike, not {type}", where type
    is what the path turned out to be (bytes for a bytes path).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        if isinstance(path, str):
            return path
        value = path  # a bytes path: the message names bytes
    raise TypeError(f"{name} must be a str or os.PathLike, not {type(value).__name__}")
