"""What a file that fails to open as a bag is instead, from its first and
last bytes: `sackli count events.parquet` says "events.parquet: not a bag:
it is a Parquet file: try sackli convert ..." rather than that its last 8
bytes do not point at a limits section, and `sackli.Reader` says the same
(with the Python call as well: see sackli/_open_hints.py).

Sniffing runs only once a bag has failed to open (any bytes may begin a
valid bag: its first record could be a Parquet file), and only on local
files. Each rule looks at both ends where it can, so that a damaged bag is
not taken for something else: a bag ends in binary limits, which are never
text nor a Parquet footer. A file beside its limits file (a SEPARATE bag)
and a `.bagz` starting with a zstd frame (its first record) are left to the
engine's own message.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from typing import Callable, NamedTuple

import google_crc32c

from ._format import has_zstd_suffix, limits_path_for
from ._shard_spec import expand_file_spec
from ._storage import open_local

__all__ = ["Kind", "describe", "explain_open_failure", "sniff", "sniff_folder", "sniffed_kind"]

_HEAD_BYTES = 64 << 10
_TAIL_BYTES = 16
_MAP_MAGICS = ((b"mapbufr", "MapBuffer", ".mb"), (b"intm", "IntMap", ".im"))
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b\x08"
_ARROW_FILE_MAGIC = b"ARROW1"
_ARROW_STREAM_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"
# Formats sackli has nothing to do with, told apart by their first bytes.
# TFRecord's CRC mask (sackli/formats/tfrecord.py writes the same; the core
# cannot import the formats above it).
_TFRECORD_MASK_DELTA = 0xA282EAD8
_OTHER_MAGICS = (
    (b"PK\x03\x04", "a zip archive"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"),
    (b"SQLite format 3\x00", "an SQLite database"),
)


class Kind(NamedTuple):
    """What a file is (`what`, e.g. "a Parquet file"), what to do with it
    from a shell (`hint`, e.g. "try sackli convert x.parquet x.bagz") and,
    when Python has its own way, from Python (`call`, e.g. "convert it with
    sackli.arrow.write_table('x.parquet', 'x.bagz')")."""

    what: str
    hint: str
    call: str | None = None


def _bag_name(path: str) -> str:
    """A bag name for `path`'s content, for the hints: events.parquet ->
    events.bagz."""
    name = os.path.basename(path)
    for suffix in (".gz", ".parquet", ".tfrecords", ".tfrecord", ".jsonl", ".ndjson", ".txt",
                   ".json", ".bagz", ".bag"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return (name or "out") + ".bagz"


def _convert_hint(path: str, suffixes: tuple[str, ...]) -> str:
    """`try sackli convert PATH NAME.bagz`, or when the name does not say
    the format, which ending it needs first."""
    if path.endswith(suffixes):
        return f"try sackli convert {path} {_bag_name(path)}"
    return f"name it {suffixes[0]} and try sackli convert"


def _arrow_call(source: str, path: str) -> str:
    """The Python call that converts the Arrow data `source` reads into a
    bag named after `path`."""
    return f"convert it with sackli.arrow.write_table({source}, {_bag_name(path)!r})"


def _is_text(data: bytes, whole: bool) -> bool:
    """Whether `data` is UTF-8 text (a cut multi-byte character at the end
    is allowed unless `whole`), without NUL and other control characters
    but tab, newline, carriage return and form feed."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        if whole or error.start < len(data) - 3:
            return False
        text = data[:error.start].decode("utf-8")
    return all(ch >= " " or ch in "\t\n\r\f" for ch in text) and "\x7f" not in text


def _json_lines(head: bytes) -> bool:
    """Whether the first line of `head` is a JSON object, array or string."""
    first = head.lstrip().split(b"\n", 1)[0].strip()
    if not first[:1] in (b"{", b"[", b'"'):
        return False
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def _tfrecord(head: bytes) -> bool:
    """Whether `head` starts with a TFRecord frame header: a length and the
    masked crc32c of its 8 bytes."""
    if len(head) < 12:
        return False
    crc = google_crc32c.value(head[:8])
    masked = (((crc >> 15) | (crc << 17)) + _TFRECORD_MASK_DELTA) & 0xFFFFFFFF
    return struct.unpack("<I", head[8:12])[0] == masked


def _content(head: bytes, path: str, size: int, tail: bytes) -> Kind | None:
    """The kind of a file whose first bytes are `head` and last `tail`,
    among the formats sackli converts and those it is mistaken for."""
    whole = len(head) == size
    if head.startswith(b"PAR1") and tail.endswith(b"PAR1"):
        # write_table reads a path named .parquet itself, in bounded memory.
        source = (repr(path) if path.endswith(".parquet")
                  else f"pyarrow.parquet.read_table({path!r})")
        return Kind("a Parquet file", _convert_hint(path, (".parquet",)), _arrow_call(source, path))
    for magic, kind, suffix in _MAP_MAGICS:
        if head.startswith(magic):
            rename = "" if path.lower().endswith(suffix) else f" (name it {suffix})"
            return Kind(f"a map ({kind})",
                        f"sackli info, verify and get read {suffix} maps{rename}",
                        f"open it with sackli.maps.{kind}({path!r})")
    if head.startswith(_ARROW_FILE_MAGIC) and tail.endswith(_ARROW_FILE_MAGIC):
        return Kind("an Arrow IPC file", "read it with pyarrow (pyarrow.ipc.open_file); "
                    "sackli convert reads Parquet",
                    _arrow_call(f"pyarrow.ipc.open_file({path!r}).read_all()", path))
    if head.startswith(b"\xff\xff\xff\xff") and tail.endswith(_ARROW_STREAM_END):
        return Kind("an Arrow IPC stream", "read it with pyarrow (pyarrow.ipc.open_stream); "
                    "sackli convert reads Parquet",
                    _arrow_call(f"pyarrow.ipc.open_stream({path!r})", path))
    if _tfrecord(head):
        return Kind("a TFRecord file", _convert_hint(path, (".tfrecord", ".tfrecords")))
    for magic, what in _OTHER_MAGICS:
        if head.startswith(magic):
            return Kind(what, "sackli reads bags (.bag, .bagz)")
    # Text must hold at both ends: a bag ends in binary limits.
    if _is_text(head, whole) and _is_text(tail, True):
        if _json_lines(head):
            return Kind("JSON Lines", _convert_hint(path, (".jsonl", ".ndjson")))
        return Kind("text", "sackli convert reads text files named .txt, one record a line")
    return None


def _gzip(head: bytes, path: str) -> Kind | None:
    """A gzip file, with what its first bytes hold when that is known."""
    try:
        inner = zlib.decompressobj(wbits=31).decompress(head, _HEAD_BYTES)
    except zlib.error:
        return None
    inner_path = path[:-3] if path.endswith(".gz") else path
    content = _content(inner, inner_path, len(inner) + 1, b"") if inner else None
    gz_suffixes = {"a TFRecord file": (".tfrecord.gz", ".tfrecords.gz"),
                   "JSON Lines": (".jsonl.gz",), "text": (".txt.gz",)}
    if content is not None and content.what in gz_suffixes:
        what = f"a gzip-compressed {content.what[2:]}" if content.what.startswith("a ") \
            else f"gzip-compressed {content.what}"
        return Kind(what, _convert_hint(path, gz_suffixes[content.what]))
    return Kind("gzip-compressed", "decompress it (gunzip); sackli convert reads .tfrecord.gz, "
                                   ".jsonl.gz and .txt.gz")


def sniff(path: str) -> Kind | None:
    """What the local file at `path` is when it is recognisably not a bag,
    else None (unknown, unreadable, remote, or maybe a damaged bag)."""
    try:
        opened = open_local(path)  # None for a remote object: no request
    except IsADirectoryError:
        return sniff_folder(path)
    except OSError:
        return None
    if opened is None:
        return None
    try:
        with opened as file:
            size = os.fstat(file.fileno()).st_size
            head = file.read(_HEAD_BYTES)
            file.seek(max(0, size - _TAIL_BYTES))
            tail = file.read(_TAIL_BYTES)
    except OSError:
        return None
    if head.startswith(_GZIP_MAGIC):
        return _gzip(head, path)
    if head.startswith(_ZSTD_MAGIC):
        if has_zstd_suffix(path):
            return None  # a .bagz starts with its first record's zstd frame
        return Kind("zstd-compressed (as a whole file, not record by record as a .bagz)",
                    "decompress it (zstd -d)")
    return _content(head, path, size, tail)


def sniff_folder(path: str) -> Kind | None:
    """What a local folder that is not a dataset holds, when it is known."""
    try:
        names = os.listdir(path)
    except OSError:
        return None
    if any(name.endswith(".parquet") for name in names):
        folder = path.rstrip("/")
        return Kind("a folder of Parquet files", f"try sackli convert {folder} {_bag_name(folder)}",
                    _arrow_call(repr(folder), folder))
    return None


def _beside_limits_file(path: str) -> bool:
    """Whether a limits file lies beside `path` (a SEPARATE bag: the
    engine's message says how to open it)."""
    return os.path.exists(limits_path_for(path))


def describe(path: str, kind: Kind, python: bool = False) -> str:
    """The one line that names what `path` is: with the command line's
    advice, or (`python`) the Python call first when there is one."""
    advice = f"{kind.call}; from a shell: {kind.hint}" if python and kind.call else kind.hint
    return f"{path}: not a bag: it is {kind.what}: {advice}"


def sniffed_kind(paths: list[str]) -> tuple[str, Kind] | None:
    """The first of the local `paths` (a spec's files) that is
    recognisably not a bag, and what it is; None when none is (remote
    paths are not read: no request)."""
    for path in paths:
        kind = sniff(path)
        if kind is not None and not _beside_limits_file(path):
            return path, kind
    return None


def explain_open_failure(spec: str, error: BaseException,
                         paths: Callable[[str], list[str]] = expand_file_spec) -> None:
    """Raises ValueError naming what a file of `spec` is when `spec` failed
    to open as a bag with `error` and one of its files is recognisably
    something else; returns (the caller re-raises `error`) otherwise."""
    if isinstance(error, OSError) and not isinstance(error, IsADirectoryError):
        return  # missing, unreadable: the error says it
    try:
        files = paths(spec)
    except (OSError, ValueError):
        return
    found = sniffed_kind(files)
    if found is not None:
        raise ValueError(describe(*found)) from None
