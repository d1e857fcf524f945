"""Facts of the Bagz format that Python code needs, in one place.

The engine (native/bagz/format.h) is the authority: the values below are read
from it, so Python and C++ cannot drift. Python code asks this module
instead of spelling a fact out again (`8`, `"limits."`, `".bagz"`, 99999).
"""

from __future__ import annotations

import os

from . import _engine

__all__ = [
    "LIMIT_BYTES", "LIMITS_PREFIX", "LOCAL_PREFIXES", "MAX_SHARDS", "PARTIAL_MARKER",
    "checksums_path_for", "has_zstd_suffix", "limits_path_for", "move_checks", "partial_folder_prefix",
    "stored_bytes",
    "without_local_prefix",
]

LIMIT_BYTES: int = _engine.LIMIT_BYTES
"""Bytes of one limit (a little-endian u64): what a record costs in a bag
beyond its payload."""

MAX_SHARDS = 99999
"""The largest shard count of `name@N.ext` (five digits, as in bagz)."""

PARTIAL_MARKER: str = _engine.PARTIAL_MARKER
"""Marks the hidden folder of an unfinished write (`.<name><marker><tag>/`)."""

# `posix:` marks a local path; `/posix:` is how pathlib spells it
# (`pathlib.Path("/posix:" + path)`), as bagz accepts.
LOCAL_PREFIXES = ("posix:", "/posix:")


def limits_path_for(records_path: str) -> str:
    """`dir/limits.name` for `dir/name`: where SEPARATE placement (and a
    write in progress) keeps the limits. Works for local paths and for
    `gs://` / `s3://` URLs alike (it splits at the last '/')."""
    return _engine.limits_path_for(records_path)


def checksums_path_for(records_path: str) -> str:
    """`dir/name.crc32c` for `dir/name`: the CRC-32C sidecar that
    `record_checksums=True` writes beside a raw bag (docs/format.md).
    Local paths and URLs alike."""
    return _engine.checksums_path_for(records_path)


def move_checks(source: str, target: str) -> None:
    """Moves the CRC-32C sidecar of the local bag `source` onto `target`'s
    (before the bag itself moves); without one, deletes a sidecar beside
    `target`: it checked the records being replaced."""
    try:
        os.replace(checksums_path_for(source), checksums_path_for(target))
    except FileNotFoundError:
        try:
            os.remove(checksums_path_for(target))
        except FileNotFoundError:
            pass


LIMITS_PREFIX: str = limits_path_for("")
"""The prefix `limits_path_for` puts before a file name (`"limits."`)."""


def has_zstd_suffix(path: str) -> bool:
    """Whether `path` names a compressed bag (`.bagz`: one zstd frame per
    non-empty record). Detection is per file, never per spec."""
    return _engine.has_zstd_suffix(path)


def partial_folder_prefix(path: str) -> str:
    """The start of the hidden folder names that unfinished writes of
    `path` use (`dir/.name.sackli-partial-`)."""
    return _engine.partial_folder_prefix(path)


def without_local_prefix(path: str) -> str:
    """`path` without a leading `posix:` (or pathlib's `/posix:`); `path`
    itself, the same object, when it has none."""
    for prefix in LOCAL_PREFIXES:
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def stored_bytes(payload_bytes: int | float, records: int) -> int | float:
    """Bytes a bag file takes for `records` records of `payload_bytes`
    stored bytes in all: the payloads plus one limit each."""
    return payload_bytes + LIMIT_BYTES * records
