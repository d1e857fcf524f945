"""`checked_pairs`: the (key, value) pairs `sackli.maps.write` takes, checked
one by one as they arrive, with errors that say what was expected.

Without the checks a dict fails with "cannot unpack non-iterable int
object", a str value with "string argument without an encoding", and an int
value is silently written as that many zero bytes (`bytes(5)`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["checked_pairs"]

_EXPECTED = "(int key, bytes-like value) pairs"


def checked_pairs(items: Any) -> Iterator[tuple[int, Any]]:
    """The pairs of `items`, a mapping (its items, as `MapBuffer` takes a
    dict) or an iterable of pairs; TypeError, naming the pair, for anything
    else. The iterable is read lazily, as `write` reads it."""
    if isinstance(items, Mapping):
        items = items.items()
    elif isinstance(items, (str, bytes, bytearray, memoryview)) or not isinstance(items, Iterable):
        raise TypeError(f"items must be a mapping or an iterable of {_EXPECTED}, "
                        f"not {type(items).__name__}")
    return _checked(items)


def _checked(items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
    for number, item in enumerate(items):
        try:
            key, value = item
        except (TypeError, ValueError):
            raise TypeError(f"items must be {_EXPECTED}: item {number} is {_what(item)}") from None
        yield _key(key, number), _value(value, number, key)


def _what(item: Any) -> str:
    """A short description of a bad item: its type, and its size when it has one."""
    name = type(item).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    try:
        return f"{article} {name} of {len(item)}"
    except TypeError:
        return f"{article} {name}"


def _key(key: Any, number: int) -> int:
    try:
        return operator.index(key)
    except TypeError:
        raise TypeError(f"map keys must be integers, not {type(key).__name__} "
                        f"(item {number})") from None


def _value(value: Any, number: int, key: Any) -> Any:
    """`value` when it is bytes-like (bytes, bytearray, memoryview, any
    buffer such as a numpy array)."""
    if isinstance(value, (bytes, bytearray)):
        return value
    if isinstance(value, str):
        raise TypeError(f"map values must be bytes-like, not str: encode it "
                        f"(item {number}, key {key})")
    try:
        memoryview(value).release()
    except TypeError:
        raise TypeError(f"map values must be bytes-like, not {type(value).__name__} "
                        f"(item {number}, key {key})") from None
    return value
