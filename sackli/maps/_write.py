"""`write`: a MapBuffer file from (key, value) pairs in any order, without
holding every value in memory. Values are encoded as they arrive and spilled
to a temporary file beside the target; only each key with its value's spill
offset and length stays in memory (about a hundred bytes a key). The map is then laid out from the spill and
appears under its name at once (a rename, or an upload committed at the end)."""

from __future__ import annotations

import mmap
import operator
import os
import struct
import tempfile
from collections.abc import Iterable
from typing import Any, BinaryIO, Optional

from .. import _engine
from .._storage import is_remote, open_upload
from .._whole_files import sync_folders
from ._compression import normalize
from ._files import new_hidden_file
from ._base import uint64
from ._map_buffer import FORMAT_VERSION, HEADER_LENGTH, MAGIC_NUMBERS, encode_value

_TAGS = {None: b"none", "gzip": b"gzip", "br": b"00br", "zstd": b"zstd", "lzma": b"lzma"}
_COPY_CHUNK = 1 << 20


def write(path: Any, items: Iterable[tuple[Any, Any]], compress: Optional[str] = None,
          *, durable: bool = False) -> int:
    """Writes the MapBuffer of `items` ((key, bytes-like value) pairs, any
    order, each key once) to `path` (a local path, or a `gs://` / `s3://`
    URL), with values compressed by `compress` (None, "gzip", "br", "zstd",
    "lzma"). Returns the number of keys. A duplicate key raises ValueError and
    leaves nothing at `path`. The result is what `MapBuffer(dict(items),
    compress=compress).tobytes()` holds (identical without compression and
    with gzip). A local file gets the mode `open()` gives: 0666 less the umask.
    A symbolic link is written through (the file it points to is replaced).
    `durable`: the file is fsynced before the rename that publishes it and
    its folder after, so a return survives power loss (an uploaded object is
    committed durably by its store)."""
    method = normalize(compress)
    target = os.fspath(path)
    remote = is_remote(target)
    if not remote and os.path.islink(target):
        target = os.path.realpath(target)
    folder = None if remote else os.path.dirname(os.path.abspath(target))
    with tempfile.TemporaryFile(dir=folder) as spill:
        keys, offsets, lengths = _spill(items, method, spill)
        if remote:
            with tempfile.TemporaryFile() as staged:
                _lay_out(keys, offsets, lengths, method, spill, staged)
                _upload(staged, target)
        else:
            # Not mkstemp: the map gets the umask's mode, as open() gives.
            out, temporary = new_hidden_file(target, suffix=".partial")
            try:
                with out:
                    _lay_out(keys, offsets, lengths, method, spill, out)
                    if durable:
                        out.flush()
                        os.fsync(out.fileno())
                os.replace(temporary, target)
                if durable:
                    sync_folders([target])
            except BaseException:
                os.unlink(temporary)
                raise
    return len(keys)


def _spill(items: Iterable[tuple[Any, Any]], method: Optional[str],
           spill: BinaryIO) -> tuple[list[int], list[int], list[int]]:
    """Keys (sorted) with the spill offset and length of each stored value
    (encoded, crc32c appended)."""
    entries = []
    offset = 0
    for label, value in items:
        stored = encode_value(method, bytes(value))
        stored += _engine.crc32c(stored).to_bytes(4, "little")
        spill.write(stored)
        entries.append((uint64(label, "key"), offset, len(stored)))
        offset += len(stored)
    entries.sort(key=operator.itemgetter(0))
    for (first, _, _), (second, _, _) in zip(entries, entries[1:]):
        if first == second:
            raise ValueError(f"key {first} appears more than once")
    spill.flush()
    return ([key for key, _, _ in entries], [offset for _, offset, _ in entries],
            [length for _, _, length in entries])


def _lay_out(keys: list[int], offsets: list[int], lengths: list[int], method: Optional[str],
             spill: BinaryIO, out: BinaryIO) -> None:
    count = len(keys)
    if count >= 1 << 32:
        raise ValueError("a map holds at most 2**32 - 1 keys")
    order = _engine.eytzinger_order(count)
    out.write(MAGIC_NUMBERS + bytes([FORMAT_VERSION]) + _TAGS[method] +
              count.to_bytes(4, "little"))
    position = HEADER_LENGTH + 16 * count
    index = bytearray(16 * count)
    for slot, k in enumerate(order):
        struct.pack_into("<QQ", index, 16 * slot, keys[k], position)
        position += lengths[k]
    out.write(index)
    if spill.seek(0, os.SEEK_END) == 0:
        return
    with mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ) as spilled:
        for k in order:
            out.write(spilled[offsets[k]:offsets[k] + lengths[k]])


def _upload(staged: BinaryIO, url: str) -> None:
    staged.seek(0)
    upload = open_upload(url)
    try:
        while chunk := staged.read(_COPY_CHUNK):
            upload.write(chunk)
        upload.commit()
    except BaseException:
        upload.abort()
        raise
