"""Maps byte by byte (docs/maps.md), for the corpus and the mutators: built
without sackli, and parsed leniently (a damaged map still has a header and
an index to aim at)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .map_oracle import CRC_BYTES, INTMAP_MAGIC, MAPBUFFER_MAGIC, crc32c, in_order

__all__ = ["MapLayout", "build_intmap", "build_map", "parse_layout", "stored_value"]

ENTRY = struct.Struct("<QQ")


def _eytzinger(items: list[tuple[int, int | bytes]]) -> list[tuple[int, int | bytes]]:
    """`items` (any order) in Eytzinger order of their keys."""
    ordered = sorted(items)
    out: list[tuple[int, int | bytes]] = [(0, 0)] * len(ordered)
    for rank, position in enumerate(in_order(len(ordered))):
        out[position] = ordered[rank]
    return out


def stored_value(payload: bytes, version: int) -> bytes:
    """A value as format `version` stores it: the payload, then its crc32c in format 1."""
    return payload + (crc32c(payload).to_bytes(CRC_BYTES, "little") if version >= 1 else b"")


def build_map(items: dict[int, bytes], compression: bytes = b"none", version: int = 1) -> bytes:
    """A MapBuffer of `items` whose values are already compressed (stored as given)."""
    entries = _eytzinger(list(items.items()))
    header = MAPBUFFER_MAGIC + bytes([version]) + compression + len(entries).to_bytes(4, "little")
    offset = len(header) + ENTRY.size * len(entries)
    index, values = bytearray(), bytearray()
    for key, payload in entries:
        assert isinstance(payload, bytes)
        index += ENTRY.pack(key, offset + len(values))
        values += stored_value(payload, version)
    return bytes(header + index + values)


def build_intmap(items: dict[int, int]) -> bytes:
    entries = _eytzinger(list(items.items()))
    header = INTMAP_MAGIC + bytes([0, 3]) + len(entries).to_bytes(4, "little")
    return header + b"".join(ENTRY.pack(key, value) for key, value in entries)


@dataclass
class MapLayout:
    """What a (maybe damaged) map file says about itself."""

    intmap: bool
    header: int  # bytes of header
    version: int
    count: int  # the header's N
    keys: list[int]  # of the entries the file holds (at most N)
    words: list[int]

    def entry_offset(self, position: int) -> int:
        return self.header + ENTRY.size * position

    def extent(self, position: int, size: int) -> tuple[int, int] | None:
        """[begin, end) of a MapBuffer value when its offsets are sane."""
        if self.intmap or position >= len(self.words):
            return None
        begin = self.words[position]
        end = self.words[position + 1] if position + 1 < len(self.words) else size
        data_offset = self.entry_offset(self.count)
        if data_offset <= begin <= end <= size:
            return begin, end
        return None


def parse_layout(data: bytes, intmap: bool) -> MapLayout | None:
    """The header and the entries present, whatever their values; None
    when not even the header is there."""
    header = 10 if intmap else 16
    if len(data) < header:
        return None
    count = int.from_bytes(data[6:10] if intmap else data[12:16], "little")
    version = data[4] if intmap else data[7]
    present = min(count, (len(data) - header) // ENTRY.size)
    entries = [ENTRY.unpack_from(data, header + ENTRY.size * k) for k in range(present)]
    return MapLayout(intmap, header, version, count, [e[0] for e in entries], [e[1] for e in entries])
