"""Building bag files and zstd frames byte by byte (for the seed corpus and
the mutators). Nothing here imports sackli."""

from __future__ import annotations

import os
import struct

import zstandard

from .oracle import ZSTD_MAGIC, FrameInfo, limits_path_for, parse_tail

__all__ = [
    "u64s", "cumulative", "write_bag", "read_limits", "write_limits",
    "block", "rle_block", "frame_header", "frame", "content_checksum",
    "skippable_frame", "window_descriptor_for",
]


def u64s(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *(v & (2**64 - 1) for v in values))


def cumulative(stored: list[bytes]) -> list[int]:
    ends, total = [], 0
    for record in stored:
        total += len(record)
        ends.append(total)
    return ends


def write_bag(path: str, stored: list[bytes], placement: str = "TAIL",
              limits: list[int] | None = None) -> None:
    """Writes a bag holding exactly `stored` (already encoded records), with
    `limits` (default: the true ones)."""
    limits = cumulative(stored) if limits is None else limits
    records = b"".join(stored)
    with open(path, "wb") as f:
        f.write(records + (u64s(*limits) if placement == "TAIL" else b""))
    if placement != "TAIL":
        with open(limits_path_for(path), "wb") as f:
            f.write(u64s(*limits))


def read_limits(path: str, placement: str) -> tuple[bytes, list[int]] | None:
    """(records section, limits) of a bag file as it is now; None when its
    limits cannot be found (no parsable tail, no whole limits file)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if placement == "TAIL":
        if len(data) < 8:
            return None
        tail = parse_tail(len(data), struct.unpack_from("<Q", data, len(data) - 8)[0])
        if tail is None:
            return None
        end, n = tail
        return data[:end], list(struct.unpack_from(f"<{n}Q", data, end))
    try:
        with open(limits_path_for(path), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if len(raw) % 8:
        return None
    return data, list(struct.unpack(f"<{len(raw) // 8}Q", raw))


def write_limits(path: str, placement: str, records: bytes, limits: list[int]) -> None:
    """Rewrites a bag file (and its limits file) with these contents."""
    if placement == "TAIL":
        with open(path, "wb") as f:
            f.write(records + u64s(*limits))
    else:
        with open(path, "wb") as f:
            f.write(records)
        with open(limits_path_for(path), "wb") as f:
            f.write(u64s(*limits))


# --- zstd frames ------------------------------------------------------------------


def block(payload: bytes, last: bool = True, block_type: int = 0, size: int | None = None) -> bytes:
    """A zstd block: raw (type 0) by default; `size` overrides the size field."""
    size = len(payload) if size is None else size
    return ((size << 3) | (block_type << 1) | int(last)).to_bytes(3, "little") + payload


def rle_block(byte: int, count: int, last: bool = True) -> bytes:
    """An RLE block: `count` copies of `byte` in 4 bytes."""
    return block(bytes([byte]), last, block_type=1, size=count)


def window_descriptor_for(size: int) -> int:
    """A window descriptor whose window holds `size` bytes (at least 1 KiB)."""
    log = 10
    while (1 << log) < size:
        log += 1
    return (log - 10) << 3


def frame_header(content_size: int | None, *, fcs_size: int | None = None,
                 single_segment: bool | None = None, checksum: bool = False,
                 dict_id: int | None = None, dict_id_size: int | None = None,
                 window_descriptor: int | None = None, reserved: bool = False) -> bytes:
    """Magic and frame header. `fcs_size` in (0, 1, 2, 4, 8) picks the content
    size field (default: the smallest that holds it; 1 needs single segment);
    `single_segment` defaults to True when the size is known and fits 1-8
    bytes."""
    if content_size is None:
        fcs_size = 0
    elif fcs_size is None:
        fcs_size = 1 if content_size < 256 else 2 if content_size < 65792 else 4 if content_size < 2**32 else 8
    if single_segment is None:
        single_segment = content_size is not None and fcs_size > 0
    if fcs_size == 1 and not single_segment:
        fcs_size = 2
    if fcs_size == 0 and single_segment:
        fcs_size = 1
    flag = {0: 0, 1: 0, 2: 1, 4: 2, 8: 3}[fcs_size]
    if dict_id is not None and dict_id_size is None:
        dict_id_size = 1 if dict_id < 256 else 2 if dict_id < 65536 else 4
    dict_flag = {None: 0, 0: 0, 1: 1, 2: 2, 4: 3}[dict_id_size]
    fhd = (flag << 6) | (0x20 if single_segment else 0) | (0x08 if reserved else 0) \
        | (0x04 if checksum else 0) | dict_flag
    out = bytearray(ZSTD_MAGIC + bytes([fhd]))
    if not single_segment:
        out.append(window_descriptor if window_descriptor is not None
                   else window_descriptor_for(content_size or 128 * 1024))
    if dict_flag:
        out += (dict_id or 0).to_bytes(dict_id_size, "little")
    if fcs_size:
        value = content_size - 256 if fcs_size == 2 else content_size
        out += (value & ((1 << (8 * fcs_size)) - 1)).to_bytes(fcs_size, "little")
    return bytes(out)


def content_checksum(content: bytes) -> bytes:
    """The 4 checksum bytes zstd puts after a frame of `content` (the low 32
    bits of XXH64), taken from a frame zstandard makes."""
    return zstandard.ZstdCompressor(level=1, write_checksum=True).compress(content)[-4:]


def frame(content: bytes, *, sized: bool = True, checksum: bool = False, block_bytes: int = 128 * 1024,
          fcs_size: int | None = None, claimed: int | None = None, rle: bool = False,
          dict_id: int | None = None) -> bytes:
    """A valid zstd frame of raw blocks of at most `block_bytes` (or RLE
    blocks when `rle` and content is one repeated byte)."""
    size = len(content) if claimed is None else claimed
    header = frame_header(size if sized else None, fcs_size=fcs_size, checksum=checksum,
                          dict_id=dict_id,
                          single_segment=None if sized else False,
                          window_descriptor=None if sized else window_descriptor_for(len(content)))
    blocks = []
    pieces = [content[k:k + block_bytes] for k in range(0, len(content), block_bytes)] or [b""]
    for k, piece in enumerate(pieces):
        last = k == len(pieces) - 1
        if rle and piece and piece == piece[:1] * len(piece):
            blocks.append(rle_block(piece[0], len(piece), last))
        else:
            blocks.append(block(piece, last))
    return header + b"".join(blocks) + (content_checksum(content) if checksum else b"")


def skippable_frame(payload: bytes = b"", variant: int = 0) -> bytes:
    """A skippable frame (magic 0x184D2A5?)."""
    return (0x184D2A50 + variant).to_bytes(4, "little") + len(payload).to_bytes(4, "little") + payload


def rebuild_header(info: FrameInfo, data: bytes, **changes) -> bytes:
    """`data` (one frame) with a new header made from `info` and `changes`
    (the keywords of frame_header); blocks and checksum kept."""
    fields = dict(
        content_size=info.content_size, fcs_size=info.fcs_field_size if info.content_size is not None else 0,
        single_segment=info.single_segment, checksum=info.checksum_flag,
        dict_id=info.dict_id, dict_id_size=info.dict_id_size or None,
        window_descriptor=info.window_descriptor,
    )
    fields.update(changes)
    return frame_header(**fields) + data[info.header_size:]


def ensure_folder(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path
