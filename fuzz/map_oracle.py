"""An independent reader of `mapbuffer`'s map formats, from docs/maps.md.

The fuzzer's source of truth for `.mb` (MapBuffer) and `.im` (IntMap) files.
Like oracle.py it never imports sackli: it reads the file with `open()`,
checks crc32c with `google_crc32c` and decodes values with zlib, lzma,
brotli and (zstd) oracle.decode_record's strict rules.

* Header: MapBuffer `mapbufr`, version 0 or 1, compression `none`, `gzip`,
  `00br`, `zstd` or `lzma`, N (u32), 16 bytes; IntMap `intm`, version 0,
  element type 3, N (u32), 10 bytes. A short header, another magic, version,
  compression or element type, or an index that does not fit the file is
  corrupt (the whole map). An IntMap is exactly its header and index.
* Value i (MapBuffer) spans [offset[i], offset[i + 1]) (the last one runs to
  the end of the file) and is judged alone: corrupt when it starts outside
  [16 + 16N, size] or ends before its start or past the end (read by slices
  from an object of unknown size: when its slice comes back short; the last
  value is whatever follows its offset), in format 1 when it is shorter
  than its crc32c or (when crcs are checked) its crc32c differs, and in a
  compressed map when it is empty or does not decompress. A gzip value is
  exactly one gzip member: a second member or any byte after the first is
  corrupt (a reader of the first member alone would lose data silently).
* Sizes: `datasize()` is the map's size less the header and index (unknown
  without the map's size); `size(key)` a value's stored bytes less its
  crc32c, answered like a lookup (without the map's size, from the index
  alone, except the last value's: what its slice gives).
* Lookups: with the keys in Eytzinger order (an in-order walk strictly
  increasing) a key has one answer: its value, or absent. In a damaged index
  no search is specified: a lookup may answer "absent" or the value of any
  position holding that key, never another key's value.
"""

from __future__ import annotations

import lzma
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .oracle import OracleError, decode_record

__all__ = ["ABSENT", "OracleMap", "crc32c", "in_order", "open_map", "read_map"]

MAPBUFFER_MAGIC = b"mapbufr"
INTMAP_MAGIC = b"intm"
COMPRESSIONS = ("none", "gzip", "00br", "zstd", "lzma")
ENTRY = struct.Struct("<QQ")
CRC_BYTES = 4
U64_MAX = 2**64 - 1


class _Absent:
    """The outcome of a lookup of a key the map does not hold."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


def _corrupt(message: str, path: str) -> OracleError:
    return OracleError("corrupt", message, path)


def crc32c(data: bytes) -> int:
    import google_crc32c

    return int.from_bytes(google_crc32c.Checksum(data).digest(), "big")


def _brotli(data: bytes) -> bytes:
    import brotli

    return brotli.decompress(data)


def _gunzip(data: bytes) -> bytes:
    """One gzip member and nothing after it (zlib.decompress alone would
    ignore what follows the first member)."""
    inflater = zlib.decompressobj(wbits=31)
    content = inflater.decompress(data)
    if not inflater.eof:
        raise ValueError("truncated gzip member")
    if inflater.unused_data:
        raise ValueError(f"{len(inflater.unused_data)} bytes after the gzip member")
    return content


_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": _gunzip,
    "00br": _brotli,
    "lzma": lzma.decompress,
    "zstd": decode_record,
}


def in_order(n: int) -> Iterator[int]:
    """The positions of an Eytzinger tree of n nodes in sorted-key order."""
    stack, node = [], 0
    while stack or node < n:
        while node < n:
            stack.append(node)
            node = 2 * node + 1
        node = stack.pop()
        yield node
        node = 2 * node + 2


@dataclass
class OracleMap:
    path: str
    intmap: bool
    version: int
    compression: str  # "none" for an IntMap
    keys: list[int]
    words: list[int]  # value offsets (MapBuffer) or the values (IntMap)
    data: bytes
    size_known: bool = True  # False: read as by an object of unknown size

    @property
    def data_offset(self) -> int:
        return (10 if self.intmap else 16) + 16 * len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def ordered(self) -> bool:
        walk = [self.keys[p] for p in in_order(len(self.keys))]
        return all(a < b for a, b in zip(walk, walk[1:]))

    def stored(self, position: int) -> bytes | OracleError:
        """The stored bytes of a MapBuffer value (crc32c included), or why
        they cannot be read. When the map's size is unknown (an object read
        by slices), the last value runs to wherever the object ends, and a
        value is truncated when its slice comes back short."""
        size, n = len(self.data), len(self.keys)
        begin = self.words[position]
        last = position + 1 == n
        key = self.keys[position]
        if begin < self.data_offset or (self.size_known and begin > size):
            return _corrupt(f"value of key {key}: offset {begin} outside the values", self.path)
        if last and not self.size_known:
            stored = self.data[begin:]
        else:
            end = self.words[position + 1] if not last else size
            if not begin <= end <= (size if self.size_known else U64_MAX):
                return _corrupt(f"value of key {key}: next offset {end} before it or past the end",
                                self.path)
            stored = self.data[begin:end]
            if len(stored) != end - begin:
                return _corrupt(f"value of key {key}: truncated", self.path)
        if self.version >= 1 and len(stored) < CRC_BYTES:
            return _corrupt(f"value of key {key}: {len(stored)} bytes, no room for a crc32c",
                            self.path)
        return stored

    def outcome(self, position: int, check_crc: bool = True) -> Any:
        """The value at index position `position`: bytes (MapBuffer), an int
        (IntMap), or an OracleError."""
        if self.intmap:
            return self.words[position]
        stored = self.stored(position)
        if isinstance(stored, OracleError):
            return stored
        key = self.keys[position]
        if self.version >= 1:
            stored, crc = stored[:-CRC_BYTES], stored[-CRC_BYTES:]
            if check_crc and crc32c(stored) != int.from_bytes(crc, "little"):
                return _corrupt(f"value of key {key}: crc32c mismatch", self.path)
        if self.compression == "none":
            return stored
        if not stored:
            return _corrupt(f"value of key {key}: empty in a compressed map", self.path)
        try:
            return _DECOMPRESS[self.compression](stored)
        except OracleError as error:
            return _corrupt(f"value of key {key}: {error.message}", self.path)
        except Exception as error:  # noqa: BLE001 - each codec has its own errors
            return _corrupt(f"value of key {key}: does not decompress ({error})", self.path)

    def lookup(self, key: Any, check_crc: bool = True) -> list[Any]:
        """Every acceptable answer to a lookup of `key` (see the module
        docstring): outcomes of positions holding it, and ABSENT."""
        positions = [p for p, k in enumerate(self.keys) if k == key]
        answers = [self.outcome(p, check_crc) for p in positions]
        if self.ordered():
            return answers[:1] or [ABSENT]
        return answers + [ABSENT]

    def stored_size(self, position: int) -> int | OracleError:
        """What `size(key)` gives for the value at `position`: its stored
        bytes without the crc32c, or why they cannot be read."""
        key, n = self.keys[position], len(self.keys)
        if self.size_known or position + 1 == n:
            stored = self.stored(position)
            if isinstance(stored, OracleError):
                return stored
            size = len(stored)
        else:
            # Without the map's size, a value's size comes from the index
            # alone (as `validate()` judges it): the value is not fetched.
            begin, end = self.words[position], self.words[position + 1]
            if begin < self.data_offset or end < begin:
                return _corrupt(f"value of key {key}: offsets {begin}, {end} out of order", self.path)
            size = end - begin
        if self.version >= 1 and size < CRC_BYTES:
            return _corrupt(f"value of key {key}: {size} bytes, no room for a crc32c", self.path)
        return size - (CRC_BYTES if self.version >= 1 else 0)

    def size_answers(self, key: int) -> list[Any]:
        """Every acceptable answer to `size(key)`, as `lookup` gives them."""
        positions = [p for p, k in enumerate(self.keys) if k == key]
        answers: list[Any] = [self.stored_size(p) for p in positions]
        if self.ordered():
            return answers[:1] or [ABSENT]
        return answers + [ABSENT]

    def structure_error(self) -> OracleError | None:
        """What `validate()` finds: keys out of order, the first value not
        where the values start, offsets out of order or outside the map, a
        value too short for its crc32c, bytes after an empty map. Without
        the map's size, only what the index alone shows."""
        if not self.ordered():
            return _corrupt("index keys are not in Eytzinger order", self.path)
        if self.intmap:
            return None
        size, n = len(self.data), len(self.keys)
        if n == 0:
            if self.size_known and size != self.data_offset:
                return _corrupt("an empty map with bytes of values", self.path)
            return None
        if self.words[0] != self.data_offset:
            return _corrupt("the first value does not start the values region", self.path)
        for position, begin in enumerate(self.words):
            # Without the size, the last value ends at the largest offset there is.
            end = self.words[position + 1] if position + 1 < n else size if self.size_known else U64_MAX
            if self.size_known and begin > size:
                return _corrupt(f"offset {begin} past the end", self.path)
            if not begin <= end <= (size if self.size_known else U64_MAX):
                return _corrupt(f"next offset {end} before {begin} or past the end", self.path)
            if self.version >= 1 and end - begin < CRC_BYTES:
                return _corrupt(f"{end - begin} bytes, no room for a crc32c", self.path)
        return None


def open_map(path: str, intmap: bool, size_known: bool = True) -> OracleMap | OracleError:
    """The map in file `path`, or the OracleError that opening it gives;
    `size_known` False: as a reader that only slices the file sees it."""
    if not os.path.lexists(path):
        return OracleError("not_found", f"{path}: no such file", path)
    if os.path.isdir(path):
        return OracleError("os", f"{path}: a folder", path)
    with open(path, "rb") as file:
        data = file.read()
    return read_map(data, path, intmap, size_known)


def read_map(data: bytes, path: str, intmap: bool, size_known: bool = True
             ) -> OracleMap | OracleError:
    """The map held by `data` (the bytes of file `path`, which errors
    name), or the OracleError reading it gives; `size_known` as open_map's."""
    header = 10 if intmap else 16
    if len(data) < header:
        return _corrupt(f"truncated header: {len(data)} bytes", path)
    if intmap:
        if data[:4] != INTMAP_MAGIC or data[4] != 0 or data[5] != 3:
            return _corrupt("not an IntMap (magic, version or element type)", path)
        version, compression = 0, "none"
        n = int.from_bytes(data[6:10], "little")
    else:
        if data[:7] != MAPBUFFER_MAGIC:
            return _corrupt("not a MapBuffer (magic)", path)
        version = data[7]
        if version > 1:
            return _corrupt(f"unknown format version {version}", path)
        compression = data[8:12].decode("latin-1")
        if compression not in COMPRESSIONS:
            return _corrupt(f"unknown compression {compression!r}", path)
        n = int.from_bytes(data[12:16], "little")
    end = header + 16 * n
    if len(data) < end:
        return _corrupt(f"truncated index: {n} keys need {end} bytes, the file has {len(data)}",
                        path)
    if intmap and size_known and len(data) != end:
        return _corrupt(f"{len(data) - end} bytes after an IntMap's index", path)
    entries = [ENTRY.unpack_from(data, header + 16 * k) for k in range(n)]
    return OracleMap(path, intmap, version, compression, [e[0] for e in entries],
                     [e[1] for e in entries], data, size_known)

