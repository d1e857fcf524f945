"""What MapBuffer and IntMap share: where the bytes come from (`buffer`,
replaceable as in `mapbuffer`), the engine core opened on first use, and the
dict-like reading API over index positions."""

from __future__ import annotations

import io
import operator
import os
from collections.abc import Iterator
from typing import Any

from ._errors import ValidationError, corruption_as_validation_error
from .._storage import REMOTE_OPENER, path_argument
from ._ranges import RemoteMapObject
from .._bulk import DEFAULT_MAX_RECORD_BYTES, engine_byte_cap
from ._sources import PathArgument, buffer_of_file, describe, map_path, open_core


_UINT64_LIMIT = 1 << 64


def uint64(number: Any, what: str) -> int:
    """`number` as a map key or IntMap value: TypeError for non-integers,
    OverflowError outside uint64 (as mapbuffer's numpy conversion)."""
    value = operator.index(number)
    if not 0 <= value < _UINT64_LIMIT:
        raise OverflowError(f"map {what} {value} is out of bounds for uint64")
    return value


class MapBase:
    """A map of uint64 keys read through the engine. Subclasses say which
    format (`_KIND`) and what a value is (`getindex`)."""

    _KIND = ""
    HEADER_LENGTH = 0
    # The most one value may decode to, as the engine takes it (MapBuffer's
    # max_value_bytes; IntMap values are 8-byte words).
    _max_value_bytes: int = engine_byte_cap("max_value_bytes", DEFAULT_MAX_RECORD_BYTES)

    def _set_source(self, data: Any, index_cache: str | None = None) -> None:
        self._index_cache = None if index_cache is None else os.fspath(index_cache)
        self._core: Any = None
        self._path: str | None = None
        self._buffer: Any = None
        self._file_name: str | None = None  # a file object's: errors name the file, not its mapping
        if isinstance(data, PathArgument):
            path = path_argument(data, "a map path")
            # A handle for a remote map, None for a local file (the engine maps it).
            remote = REMOTE_OPENER(path)
            if remote is not None:
                self._buffer = RemoteMapObject(remote)
            else:
                self._path = path
            self._core_now()  # a missing file fails here, not at first lookup
        elif isinstance(data, io.IOBase):
            self._buffer = buffer_of_file(data)
            self._file_name = describe(data)
        elif hasattr(data, "__getitem__"):
            self._buffer = data
        else:
            raise TypeError(
                "data must be a dict, bytes, a path, a binary file, an mmap, or support "
                f"__getitem__ with slices for byte ranges. Got: {type(data)}")

    @property
    def buffer(self) -> Any:
        """The bytes of the map (for a path, a read-only mapping of the file).
        Assigning another buffer reads the map from it from then on."""
        if self._buffer is None and self._path is not None:
            self._buffer = map_path(self._path)
        return self._buffer

    @buffer.setter
    def buffer(self, value: Any) -> None:
        self._buffer = value
        self._path = None
        self._file_name = None
        self._core = None

    def _name(self) -> str:
        """How error messages name this map."""
        if self._path is not None:
            return self._path
        return self._file_name if self._file_name is not None else describe(self._buffer)

    def __repr__(self) -> str:
        """`<sackli.maps.MapBuffer of 'm.mb': 3 keys, zstd>`: the kind, where
        the bytes come from, the number of keys and the compression. A map
        that cannot be read says so instead of raising."""
        name = self._name()
        source = name if name.startswith("<") else repr(name)
        try:
            core = self._core_now()
            count = core.count
            details = f"{count} key{'' if count == 1 else 's'}"
            if getattr(core, "compression", "none") != "none":
                details += f", {core.compression}"
        except Exception as error:  # noqa: BLE001 - a repr must not raise
            details = f"unreadable ({error})"
        return f"<sackli.maps.{type(self).__name__} of {source}: {details}>"

    def _core_now(self) -> Any:
        if self._core is None:
            core = open_core(self._KIND, self._buffer, self._path, self._name(),
                             self._index_cache)
            core.max_value_bytes = self._max_value_bytes
            self._core = core
        return self._core

    @property
    def header(self) -> bytes:
        """The header bytes."""
        if self._path is not None and self._buffer is None:
            with open(self._path, "rb") as file:
                return file.read(self.HEADER_LENGTH)
        return bytes(self.buffer[:self.HEADER_LENGTH])

    @property
    def format_version(self) -> int:
        """The format version in the header."""
        return self._core_now().version

    def __len__(self) -> int:
        """Number of keys."""
        return self._core_now().count

    def __iter__(self) -> Iterator[int]:
        yield from self.keys()

    def find_index_position(self, label: Any) -> int | None:
        """The index position of `label`, or None when it is absent."""
        position = self._core_now().find(label)
        return None if position < 0 else position

    def __contains__(self, label: Any) -> bool:
        return self._core_now().find(label) >= 0

    def keys(self) -> Iterator[int]:
        """The keys, in index (Eytzinger) order, as ints."""
        yield from self._core_now().keys()

    def values(self) -> Iterator[Any]:
        """The values, in index order."""
        for _, value in self.items():
            yield value

    def items(self) -> Iterator[tuple[int, Any]]:
        """(key, value) pairs in index order."""
        core = self._core_now()
        for position in range(core.count):
            yield core.key_at(position), self.getindex(position)

    def todict(self) -> dict[int, Any]:
        """Every (key, value) as a dict."""
        return dict(self.items())

    def tobytes(self) -> Any:
        """The map's bytes (the buffer it is read from)."""
        return self.buffer

    def index(self) -> memoryview:
        """The index as an N x 2 uint64 view (key, offset-or-value), in index
        order; ``numpy.asarray(m.index())`` makes it an array."""
        core = self._core_now()
        start = self.HEADER_LENGTH
        raw = bytes(self.buffer[start:start + 16 * core.count])
        return memoryview(raw).cast("B").cast("Q", shape=[core.count, 2])

    def getindex(self, i: int) -> Any:  # pragma: no cover - each subclass has its own
        raise NotImplementedError

    def __getitem__(self, label: Any) -> Any:
        position = self._core_now().find(label)
        if position < 0:
            raise KeyError(f"{label} was not found.")
        return self.getindex(position)

    def setindex(self, i: int, value: Any) -> None:  # pragma: no cover - each subclass has its own
        raise NotImplementedError

    def __setitem__(self, label: Any, value: Any) -> None:
        """Changes the value of an existing key in place (see `setindex`)."""
        position = self._core_now().find(label)
        if position < 0:
            raise KeyError(f"{label} was not found.")
        self.setindex(position, value)

    def get(self, label: Any, default: Any = None) -> Any:
        """The value of `label`, or `default` when it is absent."""
        position = self._core_now().find(label)
        return default if position < 0 else self.getindex(position)

    def validate(self) -> bool:
        """Checks the header and the index (keys in Eytzinger order; for a
        MapBuffer, offsets in order, in range and filling the values region);
        True, or raises ValidationError."""
        with corruption_as_validation_error():
            self._core_now().validate()
        return True

    @staticmethod
    def _overwrite(buffer: Any, start: int, data: bytes) -> None:
        try:
            buffer[start:start + len(data)] = data
        except TypeError:
            raise ValueError("this map's buffer is read-only: read it from a bytearray "
                             "(or a writable mmap) to change values in place") from None


__all__ = ["MapBase", "ValidationError"]
