"""Decompression bombs for the limit tests, made in the test (nothing big on
disk): zstd frames of RLE blocks, each 4 stored bytes that decode to 128 KiB,
so a 99 KB frame decodes to 3 GiB. The frames are valid zstd; only their
size is hostile."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BLOCK = 128 << 10  # the largest zstd block
GiB = 1 << 30


def _rle_blocks(decoded: int) -> bytes:
    """RLE blocks of zero bytes decoding to `decoded` bytes (a multiple of
    nothing in particular: the last block is shorter)."""
    full, rest = divmod(decoded, BLOCK)
    sizes = [BLOCK] * full + ([rest] if rest else [])
    out = bytearray()
    for k, size in enumerate(sizes):
        last = k == len(sizes) - 1
        out += ((size << 3) | (1 << 1) | int(last)).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def unsized_bomb(decoded: int) -> bytes:
    """A zstd frame without its content size that decodes to `decoded` zero
    bytes (a 128 KiB window; no checksum)."""
    return ZSTD_MAGIC + b"\x00" + bytes([(17 - 10) << 3]) + _rle_blocks(decoded)


def sized_bomb(decoded: int) -> bytes:
    """The same with its content size (an 8-byte field) in the header."""
    return ZSTD_MAGIC + b"\xc0" + bytes([(17 - 10) << 3]) + decoded.to_bytes(8, "little") \
        + _rle_blocks(decoded)


def write_bag(path: os.PathLike[str] | str, records: list[bytes]) -> None:
    """`records` (stored bytes, written as they are) as a TAIL bag."""
    limits, end = [], 0
    for record in records:
        end += len(record)
        limits.append(end)
    with open(path, "wb") as file:
        file.write(b"".join(records) + b"".join(n.to_bytes(8, "little") for n in limits))


def _limit_address_space(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_limited(code: str, limit: int, cwd: os.PathLike[str] | str,
                command: list[str] | None = None) -> subprocess.CompletedProcess:
    """Runs `code` (or `command`) in a subprocess whose address space is
    capped at `limit` bytes, so that running out of memory there cannot take
    pytest down."""
    args = command if command is not None else [sys.executable, "-c", textwrap.dedent(code)]
    return subprocess.run(args, cwd=cwd, capture_output=True, timeout=60,
                          preexec_fn=lambda: _limit_address_space(limit))
