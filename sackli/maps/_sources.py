"""What a map can be read from, turned into the engine's `MapCore`: a buffer
(bytes, bytearray, memoryview, mmap, numpy array: borrowed, no copy), a
local path (mapped by the engine), a binary file object (mapped when it has a
file descriptor), or any object answering ``obj[a:b]`` with bytes (only its
header and index are fetched up front; values are fetched one by one)."""

from __future__ import annotations

import io
import mmap
import os
from collections.abc import Callable
from typing import Any

from .. import _engine
from .._sets import explained_missing
from ._errors import corruption_as_validation_error
from ._files import new_hidden_file

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


def open_core(kind: str, buffer: Any, path: str | None, name: str,
              index_cache: str | None = None) -> Any:
    """The engine's core for a map of `kind` ("mapbuffer" or "intmap") at
    `path` (a local file) or in `buffer`, `name` in error messages. With
    `index_cache` (a local file), the header and index are read from that
    file when it holds them, and saved there otherwise."""
    with corruption_as_validation_error():
        if index_cache is not None:
            source = map_path(path) if path is not None else buffer
            head = _cached_head(index_cache, lambda: _read_head(kind, source, name), kind, name)
            if path is None and not is_buffer(buffer):
                return _engine.MapCore.from_index(head, kind, name, _size(buffer))
        if path is not None:
            try:
                return _engine.MapCore.open_file(path, kind)
            except FileNotFoundError as error:
                # A write that was killed: say so, and how to complete it.
                raise explained_missing(error, path) from None
        if is_buffer(buffer):
            return _engine.MapCore(buffer, kind, name)
        return _engine.MapCore.from_index(_read_head(kind, buffer, name), kind, name,
                                          _size(buffer))


def _size(ranges: Any) -> int | None:
    try:
        return len(ranges)
    except TypeError:
        return None


def _read_head(kind: str, ranges: Any, name: str) -> bytes:
    """The header and index of the map in `ranges` (two slices)."""
    header = bytes(ranges[0:_engine.map_header_bytes(kind)])
    data_offset = _engine.map_data_offset(header, kind, name)
    return header + bytes(ranges[len(header):data_offset])


def _cached_head(cache: str, read: Callable[[], bytes], kind: str, name: str) -> bytes:
    """The header and index from the file `cache` when it holds them all,
    else read() saved there (whole or not at all: a rename)."""
    try:
        with open(cache, "rb") as file:
            head = file.read()
        header_bytes = _engine.map_header_bytes(kind)
        if len(head) >= header_bytes and len(head) >= _engine.map_data_offset(
                head[:header_bytes], kind, cache):
            return head
    except FileNotFoundError:
        pass
    head = read()
    file, temporary = new_hidden_file(cache)  # the umask's mode, as open() gives
    try:
        with file:
            file.write(head)
        os.replace(temporary, cache)
    except BaseException:
        os.unlink(temporary)
        raise
    return head
