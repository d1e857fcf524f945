"""`MapBuffer`: uint64 keys to bytes, the format of `mapbuffer` 1.2.0 (see
native/maps/int_map.h), searched and decoded by the engine."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Optional

from .. import _engine
from ._base import MapBase
from ._compression import compress_in_python, decompress, decompressor, normalize
from .. import CorruptionError
from .._bulk import DEFAULT_MAX_RECORD_BYTES, default_parallelism, engine_byte_cap
from ._errors import ValidationError, as_validation_error, corruption_as_validation_error
from ._ranges import fetch_spans, fetcher

FORMAT_VERSION = 1
MAGIC_NUMBERS = b"mapbufr"
HEADER_LENGTH = 16
# Threads a batched lookup or a build may use: one a core (lookups of a
# mapped map are memory-bound; more threads only switch in and out).
_LOOKUP_PARALLELISM = default_parallelism()
# A scan (items(), values(), todict()) reads about this many stored bytes,
# in at most this many values, at a time.
_SCAN_BATCH_BYTES = 4 << 20
_SCAN_BATCH_KEYS = 4096
_ZSTD_LEVEL = 3  # zstandard's default, which mapbuffer uses
# No cap, for Python's decompressors (whose limits are Py_ssize_t).
_PYTHON_CAP = sys.maxsize - 1


def build(data: dict, compress: Optional[str], tobytesfn: Optional[Callable[[Any], bytes]],
          compute_crc: bool) -> bytes:
    """The bytes of a MapBuffer holding `data`; identical to `mapbuffer`'s
    without compression."""
    # The engine checks the keys (OverflowError outside uint64) and sorts them.
    values = list(data.values())
    if tobytesfn is not None:
        values = [tobytesfn(value) for value in values]
    encode = compress_in_python(compress)
    if encode is not None:
        values = [encode(value) for value in values]
    return _engine.build_map_buffer(data.keys(), values, compress or "none",
                                    FORMAT_VERSION if compute_crc else 0, _ZSTD_LEVEL,
                                    _LOOKUP_PARALLELISM)


class MapBuffer(MapBase):
    """A dict of uint64 keys to byte values stored in one buffer and read
    without parsing it: a drop-in for `mapbuffer.MapBuffer` 1.2.0.

    `data` is a dict (builds the map, with `compress` one of None, "gzip",
    "br", "zstd", "lzma" and `tobytesfn` turning values into bytes), or the
    map's bytes: bytes, bytearray, memoryview, mmap, a binary file object, a
    path (memory-mapped) or any object answering ``obj[a:b]`` with bytes.
    `frombytesfn` turns stored bytes back into values. `check_crc=False`
    skips the crc32c checks of format 1; `compute_crc=False` builds format 0
    (no crc32c). `index_cache` names a local file that keeps the header and
    index once read, so later opens of a remote map skip fetching them.
    `max_value_bytes` (a sackli extension) is the most one value may decode
    to (default 4 GiB; None: no cap): a larger one raises
    sackli.RecordTooLargeError naming the map and key, before it is
    allocated (zstd, no compression) or once decoding passes the cap (gzip,
    br, lzma). Missing keys raise KeyError; damaged maps raise
    ValidationError naming the file and key. Keys come back as ints."""

    _KIND = "mapbuffer"
    HEADER_LENGTH = HEADER_LENGTH

    def __init__(
        self,
        data: Any = None,
        compress: Optional[str] = None,
        tobytesfn: Optional[Callable[[Any], bytes]] = None,
        frombytesfn: Optional[Callable[[bytes], Any]] = None,
        check_crc: bool = True,
        compute_crc: bool = True,
        index_cache: Optional[str] = None,
        *,
        max_value_bytes: Optional[int] = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._max_value_bytes = engine_byte_cap("max_value_bytes", max_value_bytes)
        self.tobytesfn = tobytesfn
        self.frombytesfn = frombytesfn
        self.check_crc = check_crc
        self.compute_crc = compute_crc
        self.index_cache = index_cache
        # The core mb[key] last checked, and whether the engine decodes its
        # values (so that a lookup is one engine call).
        self._engine_core: Any = None
        self._engine_decodes = False
        if isinstance(data, dict):
            data = build(data, normalize(compress), tobytesfn, compute_crc)
        self._set_source(data, index_cache)

    @property
    def compress(self) -> Optional[str]:
        """The compression of the values: None, "gzip", "br", "zstd" or "lzma"."""
        name = self._core_now().compression
        return None if name == "none" else name

    def datasize(self) -> int:
        """Size of the values region in bytes. TypeError naming the map when
        it is read from an object without `__len__` (its size is unknown)."""
        core = self._core_now()
        if core.map_size is None:
            # Measuring would mean fetching every value: the caller decides.
            raise TypeError(f"{self._name()}: datasize() needs the map's size, and the "
                            f"{type(self.buffer).__name__} it is read from has no __len__ "
                            "(give it one, or read the map from bytes, a file or a path)")
        return core.map_size - core.data_offset

    def _finish(self, position: int | None, value: bytes, label: Any = None) -> Any:
        # Values the engine could not decode (gzip, br, lzma), then frombytesfn.
        # A value found by `label` is searched for again (to name its key and
        # offset in a decoding error) only when it needs decoding here.
        core = self._core
        if decompressor(core.compression) is not None:
            if position is None:
                position = core.find(label)
            value = decompress(core.compression, value, self._name(), core.key_at(position),
                               core.extent(position)[0], min(core.max_value_bytes, _PYTHON_CAP))
        return value if self.frombytesfn is None else self.frombytesfn(value)

    def getindex(self, i: int) -> Any:
        """The value at index position `i`."""
        core = self._core_now()
        with corruption_as_validation_error():
            if core.has_values:
                value = core.value_at(i, self.check_crc)
            else:
                begin, end = core.extent(i)
                value = core.check_value(i, self.buffer[begin:end], self.check_crc)
        return self._finish(i, value)

    def __getitem__(self, label: Any) -> Any:
        core = self._core or self._core_now()
        if core is not self._engine_core:
            # First lookup through this core: may the engine answer alone?
            self._engine_core = core if core.has_values else None
            self._engine_decodes = decompressor(core.compression) is None
        if self._engine_core is None:
            return super().__getitem__(label)
        try:
            value = core.get(label, self.check_crc)
        except CorruptionError as error:
            raise as_validation_error(error) from None
        if value is None:
            raise KeyError(f"{label} was not found.")
        if self._engine_decodes and self.frombytesfn is None:
            return value
        return self._finish(None, value, label)

    def items(self) -> Iterator[tuple[int, Any]]:
        """(key, value) pairs in index order; values are read a batch at a
        time (about _SCAN_BATCH_BYTES), checked and decoded by the engine in
        parallel (for a remote map, fetched in coalesced ranged GETs)."""
        core = self._core_now()
        keys = core.keys()
        step = _SCAN_BATCH_KEYS
        if core.map_size is not None:  # else: an object of unknown size
            average = max(1, self.datasize() // max(1, len(keys)))
            step = max(1, min(step, _SCAN_BATCH_BYTES // average))
        for first in range(0, len(keys), step):
            count = min(step, len(keys) - first)
            if not core.has_values:  # fetched by ranges: a batch in a request or two
                positions = range(first, first + count)
                batch = self._values_by_ranges(list(positions))
                yield from zip(keys[first:first + count], [batch[p] for p in positions])
                continue
            try:
                values = core.values_at(first, count, self.check_crc, _LOOKUP_PARALLELISM)
            except CorruptionError as error:
                raise as_validation_error(error) from None
            if self._needs_finish():
                values = [self._finish(first + k, value) for k, value in enumerate(values)]
            yield from zip(keys[first:first + count], values)

    def get(self, label: Any, *args: Any, **kwargs: Any) -> Any:
        """The value of `label`, or the default (positional or ``default=``,
        None when not given) when it is absent."""
        default = args[0] if args else kwargs.get("default")
        try:
            return self[label]
        except KeyError:
            return default

    def get_many(self, labels: Iterable[Any], default: Any = None) -> list[Any]:
        """The values of `labels` (any iterable of ints or an integer array),
        in order, `default` for absent keys. Searched, checked and decoded in
        parallel by the engine, without the GIL."""
        core = self._core_now()
        if not isinstance(labels, (list, tuple)) and not hasattr(labels, "__array__"):
            labels = list(labels)  # a one-shot iterable is read twice below
        if not core.has_values:
            return self._get_many_by_ranges(labels, default)
        if not self._needs_finish():
            with corruption_as_validation_error():
                return core.get_many(labels, self.check_crc, _LOOKUP_PARALLELISM, default)
        with corruption_as_validation_error():
            values = core.get_many(labels, self.check_crc, _LOOKUP_PARALLELISM)
        return [default if value is None else self._finish(None, value, label)
                for label, value in zip(labels, values)]

    def _get_many_by_ranges(self, labels: Iterable[Any], default: Any) -> list[Any]:
        # The values are fetched by the Python side (remote or sliceable
        # objects): each distinct value once, in coalesced ranges.
        positions = [self._core.find(label) for label in labels]
        values = self._values_by_ranges(sorted({p for p in positions if p >= 0}))
        return [default if position < 0 else values[position] for position in positions]

    def _values_by_ranges(self, positions: list[int]) -> dict[int, Any]:
        """{position: value} of `positions` (sorted, distinct) of a map whose
        bytes are fetched by ranges: neighbouring values in one request."""
        core = self._core_now()  # a value written since may have dropped it
        with corruption_as_validation_error():
            extents = [core.extent(position) for position in positions]
        if any(end is None for _, end in extents):  # an object of unknown size
            return {position: self.getindex(position) for position in positions}
        values = {}
        for position, stored in zip(positions, fetch_spans(extents, fetcher(self.buffer))):
            with corruption_as_validation_error():
                value = core.check_value(position, stored, self.check_crc)
            values[position] = self._finish(position, value)
        return values

    def _needs_finish(self) -> bool:
        return self.frombytesfn is not None or decompressor(self._core.compression) is not None

    def size(self, label: Any) -> int:
        """The stored size of `label`'s value in bytes (compressed, without
        its crc32c)."""
        core = self._core_now()
        position = core.find(label)
        if position < 0:
            raise KeyError(f"{label} was not found.")
        begin, end = self._extent(position)
        return end - begin - (4 if core.version >= 1 else 0)

    def _extent(self, position: int) -> tuple[int, int]:
        """[begin, end) of the stored value at `position`, crc32c included.
        In a map of unknown size (an object without `__len__`) the last
        value runs to wherever the object's slice from `begin` ends: what a
        lookup of it reads, so no length is needed."""
        core = self._core_now()
        with corruption_as_validation_error():
            begin, end = core.extent(position)
        if end is not None:
            return begin, end
        end = begin + len(self.buffer[begin:])
        if core.version >= 1 and end - begin < 4:
            raise ValidationError(
                f"{self._name()}: value of key {core.key_at(position)}: {end - begin} bytes, "
                f"no room for its crc32c (byte offset {begin})")
        return begin, end

    def setindex(self, i: int, data: Any) -> None:
        """Overwrites the value at index position `i` with one of exactly the
        same stored size (the buffer must be writable)."""
        core = self._core_now()
        begin, end = self._extent(i)
        if self.tobytesfn is not None:
            data = self.tobytesfn(data)
        data = encode_value(core.compression, bytes(data))
        if core.version >= 1:
            data += _engine.crc32c(data).to_bytes(4, "little")
        if len(data) != end - begin:
            raise ValueError("Can only overwrite data of exactly the same length. "
                             f"Expected: {end - begin} bytes, Got: {len(data)} bytes")
        self._overwrite(self.buffer, begin, data)
        if not core.has_values:
            self._core = None  # its copy of the map is stale

    @staticmethod
    def validate_buffer(buf: Any) -> bool:
        """`MapBuffer(buf).validate()`."""
        return MapBuffer(buf).validate()


def encode_value(compression: str | None, data: bytes) -> bytes:
    """One value compressed as a map of `compression` stores it."""
    if compression == "zstd":
        return _engine.zstd_map_value(data, _ZSTD_LEVEL)
    encode = compress_in_python(compression)
    return data if encode is None else encode(data)


__all__ = ["FORMAT_VERSION", "HEADER_LENGTH", "MAGIC_NUMBERS", "MapBuffer", "ValidationError"]
