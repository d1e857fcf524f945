"""`sackli verify`'s look at a raw bag's CRC-32C sidecar (`<name>.crc32c`,
docs/format.md): the checks of the sidecar itself that a reader skips (its
own CRC, and the CRC of the bag's limits it records). The records are
checked against it by the reader, as every read does."""

from __future__ import annotations

import struct

import google_crc32c

import sackli

from .._bulk import record_offsets
from .._sets import checksums_path_for
from .._storage import CHECKS_KEY, is_remote, object_exists, read_object, stat_object

_TRAILER = struct.Struct("<8sQQII")
_MAGIC = b"SKLCRC32"
# Limits are hashed this many at a time (record_offsets reads only those).
_LIMITS_PER_STEP = 1 << 16


def has_sidecar(path: str) -> bool:
    """Whether the bag at `path` has a sidecar beside it, as readers decide:
    a bag sackli uploaded says so in its metadata (an older object's
    sidecar beside it does not count); otherwise, whether one exists."""
    if is_remote(path):
        mark = stat_object(path).metadata.get(CHECKS_KEY)
        if mark is not None:
            return mark == "crc32c"
    return object_exists(checksums_path_for(path))


def sidecar_problems(path: str, reader: sackli.Reader) -> list[str]:
    """What is wrong with the sidecar of the bag at `path` (open as
    `reader`, one file): nothing when its own CRC and its CRC of the bag's
    limits hold."""
    sidecar = checksums_path_for(path)
    data = read_object(sidecar)
    if len(data) < _TRAILER.size:
        return [f"{sidecar}: too short for its trailer ({len(data)} bytes)"]
    magic, _, _, limits_crc, self_crc = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
    if magic != _MAGIC:
        return [f"{sidecar}: no SKLCRC32 trailer"]
    problems = []
    if google_crc32c.value(data[:-4]) != self_crc:
        problems.append(f"{sidecar}: its own CRC-32C does not match: the sidecar is damaged")
    if _limits_crc(reader) != limits_crc:
        problems.append(f"{sidecar}: the CRC-32C of {path}'s limits does not match the one it "
                        "recorded: the limits are damaged (or the sidecar is)")
    return problems


def _limits_crc(reader: sackli.Reader) -> int:
    """The CRC-32C of the bag's limits as stored (little-endian u64s)."""
    checksum = google_crc32c.Checksum()
    total = len(reader)
    for first in range(0, total, _LIMITS_PER_STEP):
        count = min(_LIMITS_PER_STEP, total - first)
        ends = record_offsets(reader, 0, first, count)[1:]
        checksum.update(struct.pack(f"<{count}Q", *ends))
    return int.from_bytes(checksum.digest(), "big")
