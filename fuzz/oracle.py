"""An independent reader of the Bagz format, written from docs/format.md.

This module is the fuzzer's source of truth. It never imports sackli: it
reads files with plain `open()` and decodes zstd frames with the `zstandard`
module, after checking their framing itself. Everything is strict:

* TAIL / SEPARATE parsing as format.md section 3 (0-byte file: 0 records,
  1-7 bytes: corrupt; trailer checks; a SEPARATE limits file whose size is
  not a multiple of 8 is corrupt; a missing file is `not_found`). A TAIL file
  with `limits.<name>` beside it whose tail does not parse, or that is empty,
  is an interrupted write (corrupt).
* Record i is valid iff `limits[i-1] <= limits[i] <= records_end`
  (limits[-1] = 0), each record judged alone.
* A non-empty stored record of a compressed file is exactly one standard
  zstd frame, nothing after it, that decodes without error to exactly its
  header's content size (when it has one); a checksum, when flagged, must
  verify; the header's unused bit must be clear (zstd never sets it, and a
  flip there is invisible to the checksum); a content size above `(len(stored) // 4 + 1) * 131072` is corrupt.
* Shard specs and the CONCATENATED / INTERLEAVED layouts as sections 7-8.
* A raw shard with `<name>.crc32c` beside it (section 12): the sidecar is
  corrupt unless it ends in a 32-byte SKLCRC32 trailer naming the shard's
  record count and records-section size, with exactly 4 bytes per record
  before it; a record whose stored bytes' CRC-32C is not its entry is corrupt.

Outcomes are bytes or an `OracleError` whose `kind` is one of KINDS.
"""

from __future__ import annotations

import io
import os
import re
import struct
from dataclasses import dataclass, field
from typing import Iterable

import google_crc32c
import zstandard

__all__ = [
    "KINDS", "OracleError", "OracleBag", "OracleShard", "FrameInfo", "BlockInfo",
    "ZSTD_MAGIC", "decode_record", "expand_spec", "limits_path_for", "max_decoded_size",
    "open_bag", "parse_frame", "parse_tail",
]

# The error classes of an outcome.
KINDS = ("corrupt", "not_found", "index", "invalid", "os")

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BLOCK_SIZE_MAX = 128 * 1024
LIMIT_BYTES = 8
U64 = struct.Struct("<Q")
MAX_SHARDS = 99999
CHECKS_MAGIC = b"SKLCRC32"
CHECKS_TRAILER = struct.Struct("<8sQQII")  # magic, records, records end, limits CRC, own CRC


class OracleError(Exception):
    """An expected error: `kind` is one of KINDS, `message` says why and
    `path` is the file it is about (or None)."""

    def __init__(self, kind: str, message: str, path: str | None = None) -> None:
        assert kind in KINDS, kind
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path

    def __repr__(self) -> str:
        return f"OracleError({self.kind!r}, {self.message!r})"


def _corrupt(message: str, path: str | None = None) -> OracleError:
    return OracleError("corrupt", message, path)


# --- zstd frames ----------------------------------------------------------------


@dataclass
class BlockInfo:
    offset: int  # of the 3-byte block header within the frame
    last: bool
    type: int  # 0 raw, 1 RLE, 2 compressed, 3 reserved
    size: int  # Block_Size field
    end: int  # offset just after the block's content


@dataclass
class FrameInfo:
    """The parsed framing of one zstd frame (its header fields and blocks)."""

    descriptor: int
    single_segment: bool
    checksum_flag: bool
    dict_id_size: int
    fcs_field_size: int
    header_size: int  # magic + descriptor + optional fields
    window_descriptor: int | None
    dict_id: int | None
    content_size: int | None  # None: not in the header
    blocks: list[BlockInfo] = field(default_factory=list)
    end: int = 0  # offset just after the frame (checksum included)

    @property
    def fcs_offset(self) -> int:
        return self.header_size - self.fcs_field_size


def max_decoded_size(stored_length: int) -> int:
    """No valid frame of `stored_length` bytes decodes to more than this: a
    block of at most 128 KiB costs at least 4 bytes (header + 1 RLE byte)."""
    return (stored_length // 4 + 1) * BLOCK_SIZE_MAX


def parse_frame(data: bytes, complete: bool = True) -> FrameInfo:
    """Parses the framing of the zstd frame at the start of `data`: header,
    block headers, checksum. Raises OracleError("corrupt") when it is not a
    standard frame, is truncated, or (with `complete`) is followed by any
    byte. Block contents are not checked here (zstd does that)."""
    if len(data) < 4 or data[:4] != ZSTD_MAGIC:
        if len(data) >= 4 and 0x184D2A50 <= int.from_bytes(data[:4], "little") <= 0x184D2A5F:
            raise _corrupt("a skippable frame, not a zstd frame holding the record")
        raise _corrupt("not a zstd frame (bad magic number)")
    if len(data) < 5:
        raise _corrupt("zstd frame header truncated")
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = bool(fhd & 0x20)
    if fhd & 0x08:
        raise _corrupt("zstd frame header descriptor has its reserved bit set")
    if fhd & 0x10:
        raise _corrupt("zstd frame header has its unused bit set")
    checksum_flag = bool(fhd & 0x04)
    dict_id_size = (0, 1, 2, 4)[fhd & 0x03]
    fcs_field_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    position = 5
    window_descriptor = None
    if not single_segment:
        if len(data) < position + 1:
            raise _corrupt("zstd frame header truncated")
        window_descriptor = data[position]
        position += 1
    if len(data) < position + dict_id_size + fcs_field_size:
        raise _corrupt("zstd frame header truncated")
    dict_id = int.from_bytes(data[position:position + dict_id_size], "little") if dict_id_size else None
    position += dict_id_size
    content_size = None
    if fcs_field_size:
        content_size = int.from_bytes(data[position:position + fcs_field_size], "little")
        if fcs_field_size == 2:
            content_size += 256
        position += fcs_field_size
    info = FrameInfo(fhd, single_segment, checksum_flag, dict_id_size, fcs_field_size, position,
                     window_descriptor, dict_id, content_size)
    while True:
        if len(data) < position + 3:
            raise _corrupt("zstd frame truncated (in a block header)")
        header = int.from_bytes(data[position:position + 3], "little")
        last, block_type, size = bool(header & 1), (header >> 1) & 3, header >> 3
        if block_type == 3:
            raise _corrupt("zstd block of the reserved type")
        content = 1 if block_type == 1 else size
        end = position + 3 + content
        if end > len(data):
            raise _corrupt("zstd frame truncated (in a block)")
        info.blocks.append(BlockInfo(position, last, block_type, size, end))
        position = end
        if last:
            break
    if checksum_flag:
        if len(data) < position + 4:
            raise _corrupt("zstd frame truncated (in its checksum)")
        position += 4
    info.end = position
    if complete and position != len(data):
        raise _corrupt(f"{len(data) - position} bytes after the zstd frame")
    return info


_DICTIONARIES: dict[bytes, zstandard.ZstdCompressionDict] = {}


def _dictionary(content: bytes) -> zstandard.ZstdCompressionDict:
    found = _DICTIONARIES.get(content)
    if found is None:
        if len(_DICTIONARIES) > 8:
            _DICTIONARIES.clear()
        found = _DICTIONARIES[content] = zstandard.ZstdCompressionDict(content)
    return found


def decode_record(stored: bytes, dictionary: bytes | None = None) -> bytes:
    """The record a compressed file stores as `stored` (strict rules above);
    OracleError("corrupt") otherwise."""
    if not stored:
        return b""
    info = parse_frame(stored)
    limit = max_decoded_size(len(stored))
    if info.content_size is not None and info.content_size > limit:
        raise _corrupt(f"zstd frame header claims {info.content_size} bytes, "
                       f"impossible in {len(stored)} bytes")
    wanted = limit if info.content_size is None else info.content_size
    decompressor = (zstandard.ZstdDecompressor(dict_data=_dictionary(dictionary))
                    if dictionary else zstandard.ZstdDecompressor())
    # Streaming, whether or not the frame has a size: the output is bounded by
    # what we read, and a size-0 header never short-cuts the decoding.
    try:
        with decompressor.stream_reader(io.BytesIO(stored), read_across_frames=False,
                                        read_size=max(len(stored), 1)) as reader:
            pieces, total = [], 0
            while total <= wanted:
                piece = reader.read(wanted + 1 - total)
                if not piece:
                    break
                pieces.append(piece)
                total += len(piece)
    except zstandard.ZstdError as error:
        raise _corrupt(f"zstd: {error}") from None
    out = b"".join(pieces)
    if info.content_size is not None and len(out) != info.content_size:
        raise _corrupt(f"zstd frame decoded to {len(out)} bytes or more, its header says "
                       f"{info.content_size}")
    if len(out) > limit:
        raise _corrupt("zstd frame decodes to more than its size allows")
    return out


# --- files and limits ---------------------------------------------------------------


def limits_path_for(path: str) -> str:
    """`/d/x.bagz` -> `/d/limits.x.bagz`."""
    folder, name = os.path.split(path)
    return os.path.join(folder, "limits." + name)


def parse_tail(size: int, last: int) -> tuple[int, int] | None:
    """(records_end, n) of a TAIL file of `size` >= 8 bytes whose last u64 is
    `last`, or None when the tail does not parse."""
    if last > size - LIMIT_BYTES:
        return None
    if (size - last) % LIMIT_BYTES:
        return None
    return last, (size - last) // LIMIT_BYTES


def checksums_path_for(path: str) -> str:
    """`/d/x.bag` -> `/d/x.bag.crc32c` (format.md section 12)."""
    return path + ".crc32c"


def _read_file(path: str, remote: bool = False) -> bytes:
    if remote and os.path.isdir(path):  # an object store has no folders
        raise OracleError("not_found", f"{path}: no such object", path)
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise OracleError("not_found", f"{path}: no such file", path) from None
    except OSError as error:
        raise OracleError("os", f"{path}: {error}", path) from None


def _is_zstd_name(path: str) -> bool:
    return path.endswith(".bagz")


class OracleShard:
    """One bag file: its records section and its limits."""

    def __init__(self, path: str, placement: str, compressed: bool,
                 dictionary: bytes | None, remote: bool = False) -> None:
        self.path = path
        self.compressed = compressed
        self.dictionary = dictionary
        self.limits_path = limits_path_for(path)
        data = _read_file(path, remote)
        if placement == "SEPARATE":
            raw = _read_file(self.limits_path, remote)
            if len(raw) % LIMIT_BYTES:
                raise _corrupt(f"{self.limits_path}: size {len(raw)} is not a multiple of 8",
                               self.limits_path)
            self.records = data
            self.records_end = len(data)
            self.holder = self.limits_path
            self.limits_offset = 0
        elif placement == "TAIL":
            size = len(data)
            leftover = (os.path.isfile if remote else os.path.exists)(self.limits_path)
            if size == 0:
                if leftover:
                    raise _corrupt(f"{path}: 0 bytes with {self.limits_path} beside it: "
                                   "an interrupted write", path)
                raw = b""
                self.records_end = 0
            else:
                tail = parse_tail(size, U64.unpack_from(data, size - 8)[0]) if size >= 8 else None
                if tail is None:
                    if leftover:
                        raise _corrupt(f"{path}: tail does not parse and {self.limits_path} "
                                       "exists: an interrupted write", path)
                    raise _corrupt(f"{path}: not a bag with TAIL limits ({size} bytes)", path)
                self.records_end, _ = tail
                raw = data[self.records_end:]
            self.records = data[:self.records_end]
            self.holder = path
            self.limits_offset = self.records_end
        else:
            raise ValueError(f"unknown placement {placement!r}")
        self.limits = [v for (v,) in U64.iter_unpack(raw)]
        self.checks_path = checksums_path_for(path)
        self.checks: list[int] | None = None
        if not compressed and (os.path.isfile if remote else os.path.exists)(self.checks_path):
            self.checks = self._load_checks(_read_file(self.checks_path, remote))
        self._cache: dict[int, bytes | OracleError] = {}

    def _load_checks(self, sidecar: bytes) -> list[int]:
        """The CRC-32C of each record, from a sidecar that must fit this shard."""
        where = self.checks_path
        if len(sidecar) < CHECKS_TRAILER.size:
            raise _corrupt(f"{where}: {len(sidecar)} bytes cannot hold the trailer", where)
        trailer_at = len(sidecar) - CHECKS_TRAILER.size
        magic, count, records_end, _, _ = CHECKS_TRAILER.unpack_from(sidecar, trailer_at)
        if magic != CHECKS_MAGIC:
            raise _corrupt(f"{where}: no SKLCRC32 trailer", where)
        if count != len(self.limits) or records_end != self.records_end:
            raise _corrupt(f"{where}: for {count} records of {records_end} bytes, not "
                           f"{len(self.limits)} of {self.records_end}", where)
        if trailer_at != 4 * count:
            raise _corrupt(f"{where}: {trailer_at} bytes of CRCs for {count} records", where)
        return [v for (v,) in struct.iter_unpack("<I", sidecar[:trailer_at])]

    def __len__(self) -> int:
        return len(self.limits)

    def span(self, i: int) -> tuple[int, int]:
        """[begin, end) of record i; OracleError("corrupt") when invalid."""
        begin = self.limits[i - 1] if i > 0 else 0
        end = self.limits[i]
        if not begin <= end <= self.records_end:
            raise _corrupt(f"{self.holder}: record {i} spans [{begin}, {end}), records end at "
                           f"{self.records_end}", self.holder)
        return begin, end

    def stored(self, i: int) -> bytes:
        begin, end = self.span(i)
        return self.records[begin:end]

    def outcome(self, i: int) -> bytes | OracleError:
        """Record i (0 <= i < n) or its error."""
        found = self._cache.get(i)
        if found is None:
            try:
                stored = self.stored(i)
                if self.checks is not None and google_crc32c.value(stored) != self.checks[i]:
                    raise _corrupt(f"{self.path}: record {i} does not match its CRC-32C in "
                                   f"{self.checks_path}", self.path)
                found = decode_record(stored, self.dictionary) if self.compressed else stored
            except OracleError as error:
                if error.path is None:
                    error = _corrupt(f"{self.path}: record {i}: {error.message}", self.path)
                found = error
            self._cache[i] = found
        return found


# --- specs and layouts -------------------------------------------------------------------


def _split_shard_entry(entry: str) -> tuple[str, str, str] | None:
    at = entry.find("@", entry.rfind("/") + 1)
    if at < 0:
        return None
    match = re.fullmatch(r"(\d+|\*)(.*)", entry[at + 1:], re.DOTALL)
    if match is None:
        return None
    count = match.group(1)
    if count != "*" and not 1 <= int(count) <= MAX_SHARDS:
        return None
    return entry[:at], count, match.group(2)


def _shard(base: str, index: int, count: int, suffix: str) -> str:
    return f"{base}-{index:05d}-of-{count:05d}{suffix}"


def expand_spec(spec: str, remote: bool = False) -> list[str]:
    """The local files of a spec (format.md section 7), in order.
    OracleError("not_found") when `name@*` finds no shard, ("invalid") for an
    empty entry or sets of several counts."""
    paths: list[str] = []
    for entry in spec.split(","):
        if not entry:
            raise OracleError("invalid", f"{spec!r} has an empty entry")
        if entry.startswith("posix:"):
            entry = entry[len("posix:"):]
        sharded = _split_shard_entry(entry)
        if sharded is None:
            paths.append(entry)
            continue
        base, count, suffix = sharded
        if count != "*":
            paths.extend(_shard(base, i, int(count), suffix) for i in range(int(count)))
            continue
        folder, prefix = os.path.split(base)
        shape = re.compile(re.escape(prefix) + r"-(\d{5})-of-(\d{5})" + re.escape(suffix))
        sets: dict[int, set[int]] = {}
        try:
            names = os.listdir(folder or ".")
        except FileNotFoundError:
            names = []
        for name in names:
            if remote and os.path.isdir(os.path.join(folder, name)):
                continue
            match = shape.fullmatch(name)
            if match:
                sets.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
        if not sets:
            raise OracleError("not_found", f"{entry}: no shards match", entry)
        if len(sets) > 1:
            raise OracleError("invalid", f"{entry}: shard sets of several counts", entry)
        ((total, present),) = sets.items()
        missing = [i for i in range(total) if i not in present]
        if missing:
            path = _shard(base, missing[0], total, suffix)
            raise OracleError("not_found", f"{path}: missing shard", path)
        paths.extend(_shard(base, i, total, suffix) for i in range(total))
    return paths


class OracleBag:
    """A bag opened by the oracle: `len(bag)`, `bag.outcome(g)`."""

    def __init__(self, paths: list[str], shards: list[OracleShard], layout: str) -> None:
        self.paths = paths
        self.shards = shards
        self.layout = layout
        self.sizes = [len(s) for s in shards]
        self.starts = []
        total = 0
        for size in self.sizes:
            self.starts.append(total)
            total += size
        self.n = total

    def __len__(self) -> int:
        return self.n

    @property
    def files(self) -> list[str]:
        """Every file the bag's errors may name (records and limits files)."""
        out = []
        for s in self.shards:
            out += [s.path, s.limits_path]
        return out

    def locate(self, g: int) -> tuple[int, int]:
        if not 0 <= g < self.n:
            raise OracleError("index", f"index {g} out of range for {self.n} records")
        if self.layout == "INTERLEAVED":
            count = len(self.shards)
            return g % count, g // count
        # The last shard whose start is <= g and that holds g.
        low, high = 0, len(self.shards) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.starts[middle] <= g:
                low = middle
            else:
                high = middle - 1
        s = low
        while g >= self.starts[s] + self.sizes[s]:  # skips empty shards
            s += 1
        return s, g - self.starts[s]

    def outcome(self, g: int) -> bytes | OracleError:
        """Record g (negative counts from the end) or its error."""
        if g < 0:
            g += self.n
        try:
            s, i = self.locate(g)
        except OracleError as error:
            return error
        return self.shards[s].outcome(i)

    def outcomes(self) -> list[bytes | OracleError]:
        return [self.outcome(g) for g in range(self.n)]

    def first_error(self, indices: Iterable[int]) -> int | None:
        """The position (in `indices`) of the first record that is an error."""
        for position, g in enumerate(indices):
            if isinstance(self.outcome(g), OracleError):
                return position
        return None


def open_bag(spec_or_paths: str | list[str], placement: str = "TAIL",
             layout: str = "CONCATENATED", compression: str = "auto",
             dictionary: bytes | None = None, remote: bool = False) -> OracleBag:
    """Opens a bag as sackli.Reader(spec, limits_placement=placement,
    sharding_layout=layout, compression=...) would.

    compression: "auto" (by each file's suffix, no dictionary), "none", or
    "zstd" (every file, with `dictionary` if given). remote: the files are
    read from an object store that was given the folder's files (its folders
    are not objects).

    Raises OracleError; when several shards fail, the error is that of the
    first, and `error.alternatives` lists the kinds of all of them (a reader
    may open shards in any order).
    """
    paths = expand_spec(spec_or_paths, remote) if isinstance(spec_or_paths, str) else list(spec_or_paths)
    shards: list[OracleShard] = []
    errors: list[OracleError] = []
    for path in paths:
        compressed = compression == "zstd" or (compression == "auto" and _is_zstd_name(path))
        try:
            shards.append(OracleShard(path, placement, compressed,
                                      dictionary if compression == "zstd" else None, remote))
        except OracleError as error:
            errors.append(error)
    if errors:
        first = errors[0]
        first.alternatives = sorted({e.kind for e in errors})  # type: ignore[attr-defined]
        raise first
    if layout == "INTERLEAVED" and shards:
        sizes = [len(s) for s in shards]
        for k in range(1, len(sizes)):
            if sizes[k] > sizes[k - 1] or sizes[0] - sizes[k] > 1:
                raise OracleError("invalid", f"{paths[k]}: shard sizes {sizes} do not fit "
                                  "INTERLEAVED", paths[k])
    return OracleBag(paths, shards, layout)
