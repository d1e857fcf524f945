"""`write`: a MapBuffer file from (key, value) pairs in any order, without
holding every value in memory. Values are encoded as they arrive and spilled
to a file; only each key with its value's spill offset and length stays in
memory (about a hundred bytes a key). The map is then laid out from the
spill and appears under its name at once (a rename, or an upload committed
at the end).

A local write of `dir/name` keeps its files in the hidden folder
`dir/.name.sackli-partial-<tag>/`: first the journal `sackli-write.json`
(kind "map", the compression), then the spill `values.spill`, whose entries
(key, length, value with its crc32c) reach the disk in arrival order. A
process killed before the map appears leaves that folder, and
`sackli.recover("dir/name")` lays the map out from every complete entry
(see _recover). A write that raises removes it. A remote write spills to
local temporary files, which vanish with the process."""

from __future__ import annotations

import mmap
import operator
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO, Optional

from .. import _engine
from .._sets import JOURNAL as JOURNAL_FILE, make_write_folder, write_journal
from .._storage import WriteDestination, path_argument, resolve_write_links, write_destination
from ._compression import normalize
from ._base import uint64
from ._pairs import checked_pairs
from ._map_buffer import FORMAT_VERSION, HEADER_LENGTH, MAGIC_NUMBERS, encode_value
from ._map_buffer import _ZSTD_LEVEL as ZSTD_LEVEL

_TAGS = {None: b"none", "gzip": b"gzip", "br": b"00br", "zstd": b"zstd", "lzma": b"lzma"}
_COPY_CHUNK = 1 << 20

# A local write keeps its files in `.<name>.sackli-partial-<tag>/`: the
# journal, the spill of values and, once laid out, the map.
SPILL_FILE = "values.spill"
_LAYOUT_FILE = "map.layout"
_RECOVER_MODULE = "sackli.maps._recover"
# The head of a spilled entry: key, length of the stored value (crc32c included).
SPILL_ENTRY = struct.Struct("<QQ")
# An entry of the map's index: key, offset of its value.
_INDEX_ENTRY = struct.Struct("<QQ")
_MAX_KEY = (1 << 64) - 1
# The buffer of the spill (entries reach the disk this many bytes at a
# time) and of the map laid out: fewer, larger writes.
_FILE_BUFFER = 256 << 10


def write(path: Any, items: Iterable[tuple[Any, Any]], compress: Optional[str] = None,
          *, durable: bool = False) -> int:
    """Writes the MapBuffer of `items` ((int key, bytes-like value) pairs, any
    order, each key once, or a mapping such as a dict) to `path` (a local
    path, or a `gs://` / `s3://` URL), with values compressed by `compress` (None, "gzip", "br", "zstd",
    "lzma"). Returns the number of keys. A duplicate key raises ValueError and
    leaves nothing at `path`. The result is what `MapBuffer(dict(items),
    compress=compress).tobytes()` holds (identical without compression and
    with gzip). A local file gets the mode `open()` gives: 0666 less the umask.
    A symbolic link is written through (the file it points to is replaced;
    not another user's link in a sticky, world-writable folder: PermissionError).
    `durable`: the file is fsynced before the rename that publishes it and
    its folder after, so a return survives power loss (an uploaded object is
    committed durably by its store). A pair that is not (int, bytes-like),
    a str value among them, raises TypeError and leaves nothing at `path`."""
    items = checked_pairs(items)  # TypeError at once for a non-iterable
    method = normalize(compress)
    target = path_argument(path, "path")
    if os.path.islink(target):  # its partial folder goes beside the file it names
        target = resolve_write_links(target)
    destination = write_destination(target)  # decided once, where the path enters
    if not destination.keeps_unfinished:
        return _write_unkept(destination, items, method)
    folder = start_partial(target, method, durable)
    try:
        with open(os.path.join(folder, SPILL_FILE), "w+b", buffering=_FILE_BUFFER) as spill:
            keys, offsets, lengths = _spill(items, method, spill)
            publish(keys, offsets, lengths, method, spill, folder, destination, durable)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    remove_partial(folder)
    return len(keys)


def _write_unkept(destination: WriteDestination, items: Iterable[tuple[int, Any]],
                  method: Optional[str]) -> int:
    """`write` where nothing of a write cut short is kept (a bucket):
    spilled and laid out in local temporary files, then uploaded whole (an
    interrupted write leaves nothing there)."""
    with tempfile.TemporaryFile(buffering=_FILE_BUFFER) as spill:
        keys, offsets, lengths = _spill(items, method, spill)
        with tempfile.TemporaryFile(buffering=_FILE_BUFFER) as staged:
            _lay_out(keys, offsets, lengths, method, spill, staged)
            staged.seek(0)
            with destination.output() as upload:
                shutil.copyfileobj(staged, upload, _COPY_CHUNK)
    return len(keys)


def start_partial(target: str, method: Optional[str], durable: bool) -> str:
    """Makes the hidden folder of a local write of `target`
    (`.<name>.sackli-partial-<tag>/`) with its journal, before any value is
    spilled, and returns its path."""
    folder = make_write_folder(os.path.abspath(target))
    journal = {"kind": "map", "target": os.path.basename(target), "module": _RECOVER_MODULE,
               "version": 1, "compress": method, "spill": SPILL_FILE, "durable": durable}
    try:
        write_journal(folder, journal)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def publish(keys: list[int], offsets: list[int], lengths: list[int], method: Optional[str],
            spill: BinaryIO, folder: str, destination: WriteDestination,
            durable: bool) -> None:
    """Lays the map out in `folder` from the spilled values and renames it
    onto the target of the local `destination` (fsynced first, and the
    folder after, when `durable`)."""
    with destination.output(os.path.join(folder, _LAYOUT_FILE), durable=durable) as out:
        _lay_out(keys, offsets, lengths, method, spill, out)


def remove_partial(folder: str) -> None:
    """Deletes the hidden folder of a write that was published: the journal
    first, so that no recovery redoes the write from a spill half deleted."""
    try:
        os.remove(os.path.join(folder, JOURNAL_FILE))
    except FileNotFoundError:
        pass
    shutil.rmtree(folder, ignore_errors=True)


def _spill(items: Iterable[tuple[Any, Any]], method: Optional[str],
           spill: BinaryIO) -> tuple[list[int], list[int], list[int]]:
    """Spills each value as an entry (key u64, stored length u64, the stored
    value: encoded, crc32c appended) in arrival order, and returns the keys
    (sorted) with the spill offset and length of each stored value. The
    entries carry their keys so that an interrupted write can be recovered
    from the spill alone (see _recover)."""
    entries = []
    offset = 0
    # Looked up once: this loop runs once a value.
    write = spill.write
    pack = SPILL_ENTRY.pack
    crc32c = _engine.crc32c
    encode = _value_encoder(method)
    index = operator.index
    head = SPILL_ENTRY.size
    for label, value in items:
        key = index(label)
        if not 0 <= key <= _MAX_KEY:
            uint64(label, "key")  # raises the OverflowError
        stored = encode(value)
        length = len(stored) + 4
        write(b"".join((pack(key, length), stored, crc32c(stored).to_bytes(4, "little"))))
        entries.append((key, offset + head, length))
        offset += head + length
    spill.flush()
    return sorted_entries(entries)


def _value_encoder(method: Optional[str]) -> Callable[[Any], bytes]:
    """value -> stored bytes (`encode_value` of its bytes), with the
    compression chosen once rather than once a value."""
    if method is None:
        return bytes  # a bytes value is itself, as encode_value returns it
    if method == "zstd":  # encode_value's zstd call, one Python call less
        zstd, level = _engine.zstd_map_value, ZSTD_LEVEL
        return lambda value: zstd(bytes(value), level)
    return lambda value: encode_value(method, bytes(value))


def sorted_entries(entries: list[tuple[int, int, int]]
                   ) -> tuple[list[int], list[int], list[int]]:
    """(key, offset, length) entries sorted by key, as three lists;
    ValueError when a key appears twice."""
    entries.sort(key=operator.itemgetter(0))
    for (first, _, _), (second, _, _) in zip(entries, entries[1:]):
        if first == second:
            raise ValueError(f"key {first} appears more than once")
    return ([key for key, _, _ in entries], [offset for _, offset, _ in entries],
            [length for _, _, length in entries])


def _lay_out(keys: list[int], offsets: list[int], lengths: list[int], method: Optional[str],
             spill: BinaryIO, out: BinaryIO) -> None:
    """Writes the map to `out`: the header, the index in Eytzinger order,
    then each key's stored value copied from the spill, in index order."""
    count = len(keys)
    if count >= 1 << 32:
        raise ValueError("a map holds at most 2**32 - 1 keys")
    order = _engine.eytzinger_order(count)
    out.write(MAGIC_NUMBERS + bytes([FORMAT_VERSION]) + _TAGS[method] +
              count.to_bytes(4, "little"))
    position = HEADER_LENGTH + 16 * count
    index = bytearray(16 * count)
    pack_into = _INDEX_ENTRY.pack_into  # these loops run once a key
    for slot, k in enumerate(order):
        pack_into(index, 16 * slot, keys[k], position)
        position += lengths[k]
    out.write(index)
    if spill.seek(0, os.SEEK_END) == 0:
        return
    write = out.write
    with mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ) as spilled:
        for k in order:
            start = offsets[k]
            write(spilled[start:start + lengths[k]])


