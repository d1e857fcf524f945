"""`IntMap`: uint64 keys to uint64 values, the format of `mapbuffer` 1.2.0's
IntMap (see native/maps/int_map.h): the index alone, searched by the engine."""

from __future__ import annotations

from typing import Any

from .. import _engine
from ._base import MapBase, uint64

_ENTRY_BYTES = 16


class IntMap(MapBase):
    """A dict of uint64 keys to uint64 values in one buffer: a drop-in for
    `mapbuffer.IntMap`. `data` is a dict (builds the map) or the map's bytes
    in any form `MapBuffer` reads. ``im[key] = value`` changes the value of an
    existing key in place when the buffer is writable (a bytearray)."""

    _KIND = "intmap"
    MAGIC_NUMBER = b"intm"
    FORMAT_VERSION = 0
    HEADER_LENGTH = 10

    def __init__(self, data: Any) -> None:
        if isinstance(data, dict):
            # The engine checks keys and values (OverflowError outside
            # uint64) and sorts the keys.
            data = _engine.build_int_map(data.keys(), data.values())
        self._set_source(data)

    def getindex(self, i: int) -> int:
        """The value at index position `i`."""
        return self._core_now().word_at(i)

    def setindex(self, i: int, value: Any) -> None:
        """Sets the value at index position `i` (the buffer must be writable)."""
        number = uint64(value, "value")
        core = self._core_now()
        core.key_at(i)  # IndexError for a position out of range
        start = self.HEADER_LENGTH + i * _ENTRY_BYTES + 8
        self._overwrite(self.buffer, start, number.to_bytes(8, "little"))
        if not core.has_values:
            self._core = None  # its copy of the index is stale


__all__ = ["IntMap"]
