"""The check every `write_many` makes of its argument before writing.

A str or bytes-like object is iterable, so `write_many("abc")` would write
three one-character records and `write_many(b"abc")` would fail on the int
b"abc"[0]: both are one record passed where many were meant.
"""

from __future__ import annotations

from typing import Any

__all__ = ["refuse_single_record"]

_SINGLE_RECORD = (str, bytes, bytearray, memoryview)


def refuse_single_record(records: Any) -> None:
    """TypeError when `records` is one record (str or bytes-like) rather
    than an iterable of records. One isinstance call: cheap enough for
    every `write_many`."""
    if isinstance(records, _SINGLE_RECORD):
        raise TypeError(
            f"write_many takes an iterable of records, not a single {type(records).__name__}: "
            "pass a list of records (write_many([record])) or use write(record)")
