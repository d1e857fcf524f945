"""`-` as a source on the command line: standard input, copied to a file.

A bag on standard input (`sackli cat -`, also head, get and count, and
`sackli convert - DST --from bag`) is copied to a temporary file first: a
bag is read from its end (the limits) and by random access, which a pipe
cannot give. It is read as `.bagz` when its records are zstd frames.
TFRecord, JSON Lines and text on standard input (`sackli convert - DST
--from FORMAT`) are copied to a temporary file too (see _streams).

Messages call standard input `- (standard input)`, never the temporary file.
The temporary folder is removed when the process exits.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
from typing import Any, Iterator

import sackli

from ._errors import UsageError
from ._progress import byte_progress

__all__ = ["STDIN_NAME", "STDIO", "naming_standard_input", "open_stdin_bag", "spool_standard_input",
           "spooled_path"]

STDIO = "-"
STDIN_NAME = "- (standard input)"
_BAG = "bag"  # the format's name, as _endpoints (which reads through this module) calls it
# The spool's name ends as the format's files do, so that the format (and a
# bag's compression) follows it as for any file.
_SPOOL_SUFFIXES = {"bag": ".bag", "tfrecord": ".tfrecord", "jsonl": ".jsonl", "text": ".txt"}
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# How many records tell a .bagz from a .bag (every non-empty one a zstd frame).
_SNIFFED_RECORDS = 16
_COPY_BYTES = 1 << 20

# The temporary folder of the spooled standard input, and the file in it
# (once per process: standard input can be read only once).
_spool: dict[str, Any] = {}


def _copy_standard_input(path: str) -> None:
    """Copies all of standard input to `path`, with a bar of the bytes read
    (a total when standard input is a regular file)."""
    source = sys.stdin.buffer
    copied = 0
    info = os.fstat(source.fileno())
    total = info.st_size - source.tell() if stat.S_ISREG(info.st_mode) else None
    with open(path, "wb") as spool, byte_progress(total, "reading standard input",
                                                  lambda: copied):
        while chunk := source.read1(_COPY_BYTES):
            spool.write(chunk)
            copied += len(chunk)


def _holds_zstd_frames(path: str) -> bool:
    """Whether the bag at `path` has records and every one of its first
    non-empty records is a zstd frame (then it is read as `.bagz`)."""
    with sackli.Reader(path, compression=sackli.CompressionNone()) as raw:
        sample = [record for record in raw[:_SNIFFED_RECORDS] if record]
    return bool(sample) and all(record.startswith(_ZSTD_MAGIC) for record in sample)


def spool_standard_input(kind: str) -> str:
    """The path of a temporary copy of standard input holding `kind` (see
    the module docstring); the same file on every call."""
    if "path" in _spool:
        return _spool["path"]
    folder = tempfile.TemporaryDirectory(prefix="sackli-stdin-")  # removed at exit
    path = os.path.join(folder.name, "stdin" + _SPOOL_SUFFIXES[kind])
    _copy_standard_input(path)
    if kind == _BAG:
        with naming_standard_input(path):
            if _holds_zstd_frames(path):
                os.rename(path, path + "z")
                path += "z"
    _spool.update(folder=folder, path=path)
    return path


def _renamed(error: BaseException, path: str) -> BaseException | None:
    """`error` with `path` called `- (standard input)`; None when it does
    not name `path` or cannot be rebuilt."""
    if isinstance(error, OSError):
        if path not in str(error.filename) and path not in str(error.strerror):
            return None
        renamed = OSError(error.errno, str(error.strerror).replace(path, STDIN_NAME))
        renamed.filename = STDIN_NAME if error.filename is not None else None
        return renamed
    if isinstance(error, ValueError) and path in str(error):  # CorruptionError too
        try:
            return type(error)(str(error).replace(path, STDIN_NAME))
        except TypeError:
            return None
    return None


@contextlib.contextmanager
def naming_standard_input(path: str) -> Iterator[None]:
    """Errors raised inside call the spool `path` `- (standard input)`."""
    try:
        yield
    except (OSError, ValueError) as error:
        renamed = _renamed(error, path)
        if renamed is None:
            raise
        raise renamed from None


def open_stdin_bag(options: dict[str, Any]) -> sackli.Reader:
    """The bag on standard input, opened with the reader `options` (the
    `open_reader` of `-`)."""
    if str(options.get("limits_placement", "TAIL")).rpartition(".")[2] != "TAIL":
        raise UsageError(f"{STDIN_NAME} is one file: its limits must be at its end "
                         "(--limits-placement TAIL)")
    path = spool_standard_input(_BAG)
    with naming_standard_input(path):
        return sackli.Reader(path, **options)


def spooled_path() -> str | None:
    """The temporary copy of standard input, once it has been made."""
    return _spool.get("path")
