"""What a map can be read from, turned into the engine's `MapCore`: a buffer
(bytes, bytearray, memoryview, mmap, numpy array: borrowed, no copy), a
local path (mapped by the engine), a binary file object (mapped when it has a
file descriptor), or any object answering ``obj[a:b]`` with bytes (only its
header and index are fetched up front; values are fetched one by one)."""

from __future__ import annotations

import io
import mmap
import os
from typing import Any

from .. import _engine
from ._errors import corruption_as_validation_error

#: `data` arguments taken as paths.
PathArgument = (str, os.PathLike)


def describe(buffer: Any) -> str:
    """How error messages name a map held by `buffer`."""
    if isinstance(buffer, (bytes, bytearray, memoryview)):
        return "<bytes>"
    name = getattr(buffer, "name", None)
    return name if isinstance(name, str) else f"<{type(buffer).__name__}>"


def is_buffer(obj: Any) -> bool:
    """True for objects exposing the buffer protocol."""
    try:
        memoryview(obj).release()
    except TypeError:
        return False
    return True


class FileRanges:
    """A binary file object without a file descriptor, read by slices."""

    def __init__(self, file: Any) -> None:
        self._file = file
        self.name = describe(file)

    def __len__(self) -> int:
        return self._file.seek(0, io.SEEK_END)

    def __getitem__(self, window: slice) -> bytes:
        start, stop, _ = window.indices(len(self))
        self._file.seek(start)
        return self._file.read(max(0, stop - start))


def buffer_of_file(file: Any) -> Any:
    """The buffer a binary file object is read through: a read-only mapping
    of it (as `mapbuffer` does), its own buffer (BytesIO) or slices."""
    try:
        fileno = file.fileno()
    except (OSError, AttributeError, io.UnsupportedOperation):
        if isinstance(file, io.BytesIO):
            return file.getbuffer()
        return FileRanges(file)
    if os.fstat(fileno).st_size == 0:
        return b""  # an empty file cannot be mapped
    return mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)


def map_path(path: str) -> Any:
    """A read-only mapping of the file at `path` (b"" for an empty file)."""
    with open(path, "rb") as file:
        return buffer_of_file(file)


def open_core(kind: str, buffer: Any, path: str | None) -> Any:
    """The engine's core for a map of `kind` ("mapbuffer" or "intmap") at
    `path` (a local file) or in `buffer`."""
    with corruption_as_validation_error():
        if path is not None:
            return _engine.MapCore.open_file(path, kind)
        name = describe(buffer)
        if is_buffer(buffer):
            return _engine.MapCore(buffer, kind, name)
        return _core_of_ranges(kind, buffer, name)


def _core_of_ranges(kind: str, ranges: Any, name: str) -> Any:
    header = bytes(ranges[0:_engine.map_header_bytes(kind)])
    data_offset = _engine.map_data_offset(header, kind, name)
    head = header + bytes(ranges[len(header):data_offset])
    try:
        size = len(ranges)
    except TypeError:
        size = None
    return _engine.MapCore.from_index(head, kind, name, size)
