"""Mutations of a seed bag, described by replayable recipes.

A recipe is JSON: `{"seed": NAME, "ops": [op, ...]}`. Each op is a dict with
an "op" key; its parameters are concrete (positions, values, the new stored
bytes of a record in hex), chosen when the op was generated from the state
the previous ops left, so replaying a recipe gives the same files, and
dropping ops (to minimise) still gives a well-defined input.

Ops:
  flip        {file, pos, bit}              one bit of any file
  set_bytes   {file, pos, hex}              overwrite bytes (not past the end)
  truncate    {file, size}                  cut a file
  extend      {file, hex}                   append bytes
  insert      {file, pos, hex}              insert bytes
  cut         {file, pos, length}           remove bytes
  remove      {file}                        delete a file (shard, limits file)
  swap        {a, b}                        swap two files' contents
  copy        {src, dst}                    dst becomes a copy of src
  make_dir    {file}                        a directory instead of the file
  leftover    {file, hex}                   create limits.<file> beside a TAIL file
  set_limit   {file, index, value, what}    one u64 of a file's limits
  swap_limits {file, i, j}                  exchange two limits
  record      {file, index, hex, what}      replace record `index`'s stored bytes
                                            (the limits after it are shifted)
  map_value   {file, position, hex, what}   replace a MapBuffer value's stored bytes
                                            (the offsets after it are shifted)
  write       {file, hex, what}             the whole file's new content (a dataset's spec.json)
  symlink, hardlink, fifo, journal, rename   hidden partial folders (fuzz/partial_mutators.py)

`file` names are relative to the bag's folder.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
from typing import Any, Callable, Iterator

import msgpack
import zstandard

from . import bagbytes as bb
from . import mapbytes as mb
from .partial_mutators import PARTIAL_OPS, apply_partial_op, gen_partial
from .oracle import OracleError, decode_record, limits_path_for, max_decoded_size, parse_frame

__all__ = ["apply_recipe", "apply_op", "generate", "materialize", "copy_seed", "describe"]

Op = dict[str, Any]
U64_MAX = 2**64 - 1


# --- Applying ops ---------------------------------------------------------------------


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _write(path: str, data: bytes) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    with open(path, "wb") as f:
        f.write(data)


def _records_files(meta: dict) -> list[str]:
    """The bag's records files (not its limits files, nor CRC-32C sidecars)."""
    files = [f for f in meta["files"] if not f.endswith(".crc32c")]
    if meta["placement"] != "SEPARATE":
        return files
    return [f for f in files if not (f.startswith("limits.") and f[len("limits."):] in files)]


def apply_op(folder: str, meta: dict, op: Op) -> bool:
    """Applies one op to the bag in `folder`; False when it changed nothing
    (e.g. the file it edits is gone or its limits no longer parse)."""
    kind = op["op"]
    if kind in PARTIAL_OPS:
        return apply_partial_op(folder, op)
    path = os.path.join(folder, op["file"]) if "file" in op else None
    if kind in ("flip", "set_bytes", "truncate", "extend", "insert", "cut"):
        data = _read(path)
        if data is None:
            return False
        if kind == "flip":
            if op["pos"] >= len(data):
                return False
            data = bytearray(data)
            data[op["pos"]] ^= 1 << op["bit"]
        elif kind == "set_bytes":
            new = bytes.fromhex(op["hex"])
            if op["pos"] >= len(data):
                return False
            new = new[:len(data) - op["pos"]]
            data = data[:op["pos"]] + new + data[op["pos"] + len(new):]
        elif kind == "truncate":
            if op["size"] >= len(data):
                return False
            data = data[:op["size"]]
        elif kind == "extend":
            data = data + bytes.fromhex(op["hex"])
        elif kind == "insert":
            pos = min(op["pos"], len(data))
            data = data[:pos] + bytes.fromhex(op["hex"]) + data[pos:]
        elif kind == "cut":
            if op["pos"] >= len(data):
                return False
            data = data[:op["pos"]] + data[op["pos"] + op["length"]:]
        _write(path, bytes(data))
        return True
    if kind == "remove":
        if os.path.isdir(path):
            shutil.rmtree(path)
            return True
        if not os.path.exists(path):
            return False
        os.remove(path)
        return True
    if kind == "swap":
        a, b = os.path.join(folder, op["a"]), os.path.join(folder, op["b"])
        da, db = _read(a), _read(b)
        if da is None or db is None:
            return False
        _write(a, db)
        _write(b, da)
        return True
    if kind == "copy":
        data = _read(os.path.join(folder, op["src"]))
        if data is None:
            return False
        _write(os.path.join(folder, op["dst"]), data)
        return True
    if kind == "make_dir":
        if os.path.isdir(path):
            return False
        if os.path.exists(path):
            os.remove(path)
        os.mkdir(path)
        return True
    if kind == "leftover":
        _write(limits_path_for(path), bytes.fromhex(op["hex"]))
        return True
    if kind in ("set_limit", "swap_limits", "record"):
        found = bb.read_limits(path, meta["placement"])
        if found is None:
            return False
        records, limits = found
        if kind == "set_limit":
            k = op["index"]
            if not -len(limits) <= k < len(limits):
                return False
            limits[k] = op["value"] & U64_MAX
        elif kind == "swap_limits":
            i, j = op["i"], op["j"]
            if max(i, j) >= len(limits):
                return False
            limits[i], limits[j] = limits[j], limits[i]
        else:
            k = op["index"]
            if k >= len(limits):
                return False
            begin = limits[k - 1] if k > 0 else 0
            end = limits[k]
            if not begin <= end <= len(records):
                return False
            new = bytes.fromhex(op["hex"])
            delta = len(new) - (end - begin)
            records = records[:begin] + new + records[end:]
            limits = [v + delta if j >= k and v >= end else v for j, v in enumerate(limits)]
        bb.write_limits(path, meta["placement"], records, limits)
        return True
    if kind == "map_value":
        return _replace_map_value(path, meta, op)
    if kind == "write":
        _write(path, bytes.fromhex(op["hex"]))
        return True
    raise ValueError(f"unknown op {kind!r}")


def _replace_map_value(path: str, meta: dict, op: Op) -> bool:
    data = _read(path)
    layout = mb.parse_layout(data, meta["kind"] == "intmap") if data is not None else None
    extent = layout.extent(op["position"], len(data)) if layout is not None else None
    if extent is None:
        return False
    begin, end = extent
    new = bytes.fromhex(op["hex"])
    delta = len(new) - (end - begin)
    data = bytearray(data[:begin] + new + data[end:])
    for position, offset in enumerate(layout.words):
        if position > op["position"] and offset >= end:
            mb.ENTRY.pack_into(data, layout.entry_offset(position), layout.keys[position],
                               (offset + delta) & U64_MAX)
    _write(path, bytes(data))
    return True


def copy_seed(seed_dir: str, out_dir: str) -> None:
    """A fresh copy of a seed's files (not its meta.json) in `out_dir`."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    for name in os.listdir(seed_dir):
        source = os.path.join(seed_dir, name)
        if os.path.isdir(source):  # a partial seed's folders
            shutil.copytree(source, os.path.join(out_dir, name), symlinks=True)
        elif name != "meta.json":
            shutil.copyfile(source, os.path.join(out_dir, name))


def apply_recipe(recipe: dict, folder: str, meta: dict) -> list[bool]:
    """Applies a recipe's ops to a copy of its seed in `folder`."""
    return [apply_op(folder, meta, op) for op in recipe["ops"]]


def materialize(recipe: dict, corpus_dir: str, out_dir: str, metas: dict) -> dict:
    """Writes the mutant of `recipe` to `out_dir`; returns its seed's meta."""
    meta = metas[recipe["seed"]]
    copy_seed(os.path.join(corpus_dir, recipe["seed"]), out_dir)
    apply_recipe(recipe, out_dir, meta)
    return meta


def describe(op: Op) -> str:
    """A short human description of an op."""
    parts = [op["op"]]
    for key in ("file", "a", "b", "src", "dst", "index", "i", "j", "pos", "bit", "size", "value", "what"):
        if key in op:
            parts.append(f"{key}={op[key]}")
    for key in ("position",):
        if key in op:
            parts.append(f"{key}={op[key]}")
    if "hex" in op and op["op"] not in ("record", "map_value"):
        parts.append(f"hex={op['hex'][:32]}{'...' if len(op['hex']) > 32 else ''}")
    return " ".join(parts)


# --- Generating ops ----------------------------------------------------------------------


def _interesting_u64(rng: random.Random, current: int, previous: int, following: int | None,
                     records_end: int) -> tuple[int, str]:
    choices = [
        (0, "0"), (2**63, "2**63"), (U64_MAX, "2**64-1"), (2**63 + records_end, "2**63+end"),
        (current + 1, "+1"), (max(current - 1, 0), "-1"), (previous, "=previous"),
        (records_end, "=records_end"), (records_end + 1, "records_end+1"),
        (rng.randrange(0, max(current, 1)), "smaller"), (rng.getrandbits(64), "random"),
        (current + 2**32, "+2**32"), (previous - 1 if previous else 0, "previous-1"),
        (records_end + rng.randrange(1, 1 << 20), "past end"),
    ]
    if following is not None:
        choices += [(following, "=next"), (following + 1, "next+1")]
    value, what = rng.choice(choices)
    return value & U64_MAX, what


class _State:
    """What the generator knows of the mutant as it is being built."""

    def __init__(self, folder: str, meta: dict) -> None:
        self.folder = folder
        self.meta = meta

    def existing(self) -> list[str]:
        return [f for f in self.meta["files"] if os.path.isfile(os.path.join(self.folder, f))]

    def size(self, name: str) -> int:
        return os.path.getsize(os.path.join(self.folder, name))

    def limits(self, name: str) -> tuple[bytes, list[int]] | None:
        return bb.read_limits(os.path.join(self.folder, name), self.meta["placement"])

    def compressed(self, name: str) -> bool:
        mode = self.meta["compression"]
        return mode == "zstd" or (mode == "auto" and name.endswith(".bagz"))

    def dictionary(self) -> bytes | None:
        name = self.meta.get("dictionary")
        return _read(os.path.join(self.folder, name)) if name else None


def _pos(rng: random.Random, size: int) -> int:
    """A position in a file of `size` bytes, often near its start or end."""
    roll = rng.random()
    if roll < 0.3:
        return max(0, size - 1 - rng.randrange(min(size, 24)))
    if roll < 0.45:
        return rng.randrange(min(size, 16))
    return rng.randrange(size)


def _gen_bytes(rng: random.Random, st: _State) -> Op | None:
    files = st.existing()
    if not files:
        return None
    name = rng.choice(files)
    size = st.size(name)
    kind = rng.choice(["flip", "flip", "set_bytes", "truncate", "truncate", "extend", "insert", "cut"])
    if kind in ("flip", "set_bytes", "cut") and size == 0:
        kind = "extend"
    if kind == "truncate" and size == 0:
        kind = "extend"
    if kind == "flip":
        return {"op": "flip", "file": name, "pos": _pos(rng, size), "bit": rng.randrange(8)}
    if kind == "set_bytes":
        pos = _pos(rng, size)
        if rng.random() < 0.4 and size >= 8:
            pos = size - 8 * rng.randrange(1, min(size // 8, 4) + 1)
            value = rng.choice([0, 8, size, size - 8, 2**63, U64_MAX, rng.getrandbits(64)])
            return {"op": "set_bytes", "file": name, "pos": pos, "hex": bb.u64s(value).hex()}
        return {"op": "set_bytes", "file": name, "pos": pos,
                "hex": rng.randbytes(rng.randint(1, 8)).hex()}
    if kind == "truncate":
        roll = rng.random()
        if roll < 0.4:
            new = size - rng.randint(1, min(size, 9))
        elif roll < 0.6:
            new = (size // 8 - rng.randint(0, 3)) * 8 - (0 if rng.random() < 0.5 else rng.randint(1, 7))
        else:
            new = rng.randrange(size)
        return {"op": "truncate", "file": name, "size": max(new, 0)}
    if kind == "extend":
        roll = rng.random()
        if roll < 0.4:
            payload = bb.u64s(rng.choice([0, size, size + 8, 2**63, rng.getrandbits(64)]))
        elif roll < 0.6:
            payload = bb.frame(rng.randbytes(rng.randint(0, 20)))
        else:
            payload = rng.randbytes(rng.randint(1, 16))
        return {"op": "extend", "file": name, "hex": payload.hex()}
    if kind == "insert":
        return {"op": "insert", "file": name, "pos": _pos(rng, size + 1),
                "hex": rng.randbytes(rng.choice([1, 3, 8])).hex()}
    return {"op": "cut", "file": name, "pos": _pos(rng, size), "length": rng.choice([1, 2, 8, 16])}


def _bags_with_limits(rng: random.Random, st: _State) -> Iterator[tuple[str, bytes, list[int]]]:
    """(name, records section, limits) of each existing records file whose
    limits parse and are not empty, in random order."""
    candidates = [f for f in _records_files(st.meta) if f in st.existing()]
    rng.shuffle(candidates)
    for name in candidates:
        found = st.limits(name)
        if found is not None and found[1]:
            yield name, found[0], found[1]


def _gen_limits(rng: random.Random, st: _State) -> Op | None:
    for name, records, limits in _bags_with_limits(rng, st):
        n = len(limits)
        if rng.random() < 0.15 and n >= 2:
            i, j = rng.sample(range(n), 2)
            return {"op": "swap_limits", "file": name, "i": i, "j": j}
        # The last limit of a TAIL file is its trailer: mostly leave it.
        last_ok = st.meta["placement"] == "SEPARATE" or rng.random() < 0.15 or n == 1
        k = rng.randrange(n if last_ok else n - 1)
        previous = limits[k - 1] if k else 0
        following = limits[k + 1] if k + 1 < n else None
        value, what = _interesting_u64(rng, limits[k], previous, following, len(records))
        return {"op": "set_limit", "file": name, "index": k, "value": value, "what": what}
    return None


def _record_op(name: str, k: int, new: bytes, what: str) -> Op:
    return {"op": "record", "file": name, "index": k, "hex": new.hex(), "what": what}


def _frame_edit(rng: random.Random, stored: bytes, dictionary: bytes | None) -> tuple[bytes, str] | None:
    """New stored bytes for a record whose stored bytes are `stored`."""
    try:
        info = parse_frame(stored, complete=False)
    except OracleError:
        info = None
    try:
        content = decode_record(stored, dictionary)
    except OracleError:
        content = None
    edits: list[Callable[[], tuple[bytes, str] | None]] = []
    if info is not None:
        true = info.content_size if info.content_size is not None else (len(content) if content is not None else 100)

        def fcs() -> tuple[bytes, str]:
            value, what = rng.choice([
                (0, "fcs=0"), (max(true - 1, 0), "fcs-1"), (true + 1, "fcs+1"), (true * 2 + 1, "fcs*2"),
                (2**32, "fcs=2**32"), (2**40, "fcs=2**40"), (2**62, "fcs=2**62"), (U64_MAX, "fcs=2**64-1"),
                (max_decoded_size(len(stored)), "fcs=bound"), (max_decoded_size(len(stored)) + 1, "fcs=bound+1"),
                (rng.randrange(1, 70000), "fcs=random"),
            ])
            size = rng.choice([None, None, 1, 2, 4, 8])
            if size is None:  # the smallest field that holds it
                return bb.rebuild_header(info, stored, content_size=value, fcs_size=None,
                                         single_segment=True if value < 2**32 else info.single_segment), what
            return bb.rebuild_header(info, stored, content_size=value, fcs_size=size,
                                     single_segment=True if size == 1 else info.single_segment), what + f"/{size}B"
        edits.append(fcs)

        def unsized() -> tuple[bytes, str]:
            wd = info.window_descriptor if info.window_descriptor is not None else bb.window_descriptor_for(true)
            return bb.rebuild_header(info, stored, content_size=None, fcs_size=0, single_segment=False,
                                     window_descriptor=wd), "no content size"
        edits.append(unsized)

        def descriptor_bit() -> tuple[bytes, str]:
            bit = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 2, 0, 1])
            out = bytearray(stored)
            out[4] ^= 1 << bit
            return bytes(out), f"descriptor bit {bit}"
        edits.append(descriptor_bit)

        def window() -> tuple[bytes, str]:
            wd = rng.choice([0, 8, 17 << 3, 18 << 3, 21 << 3, 0xFF, rng.randrange(256)])
            return bb.rebuild_header(info, stored, single_segment=False, window_descriptor=wd,
                                     fcs_size=info.fcs_field_size if info.fcs_field_size != 1 else 2), f"window {wd}"
        edits.append(window)

        def checksum() -> tuple[bytes, str] | None:
            body = stored[:info.end] if info.end else stored
            if info.checksum_flag:
                roll = rng.random()
                if roll < 0.4:
                    out = bytearray(body)
                    out[-1 - rng.randrange(4)] ^= 1 << rng.randrange(8)
                    return bytes(out), "checksum damaged"
                if roll < 0.7:
                    return bb.rebuild_header(info, body[:-4], checksum=False), "checksum flag cleared"
                out = bytearray(body)
                out[4] &= ~0x04
                return bytes(out), "flag cleared, checksum left"
            if content is None:
                return None
            good = rng.random() < 0.6
            tail = bb.content_checksum(content) if good else rng.randbytes(4)
            return bb.rebuild_header(info, body, checksum=True) + tail, "checksum added" + ("" if good else " (wrong)")
        edits.append(checksum)

        def dict_id() -> tuple[bytes, str]:
            value = rng.choice([0, 1, 4242, 4243, 2**31, rng.getrandbits(32)])
            size = rng.choice([1, 2, 4])
            return bb.rebuild_header(info, stored, dict_id=value & ((1 << (8 * size)) - 1), dict_id_size=size), \
                f"dict id {value}/{size}B"
        edits.append(dict_id)

        if info.blocks:
            def block_header() -> tuple[bytes, str]:
                blk = rng.choice(info.blocks)
                header = int.from_bytes(stored[blk.offset:blk.offset + 3], "little")
                change = rng.choice(["type", "last", "size+1", "size-1", "size0", "sizemax", "size*2"])
                last, btype, size = header & 1, (header >> 1) & 3, header >> 3
                if change == "type":
                    btype = rng.choice([t for t in range(4) if t != btype])
                elif change == "last":
                    last ^= 1
                elif change == "size+1":
                    size += 1
                elif change == "size-1":
                    size = max(size - 1, 0)
                elif change == "size0":
                    size = 0
                elif change == "sizemax":
                    size = (1 << 21) - 1
                else:
                    size = min(size * 2 + 1, (1 << 21) - 1)
                new = ((size << 3) | (btype << 1) | last).to_bytes(3, "little")
                return stored[:blk.offset] + new + stored[blk.offset + 3:], f"block@{blk.offset} {change}"
            edits.append(block_header)

    def append() -> tuple[bytes, str]:
        extra, what = rng.choice([
            (bb.skippable_frame(b""), "skippable frame"), (bb.skippable_frame(b"meta", 5), "skippable frame"),
            (bb.frame(b""), "empty frame"), (stored, "second copy"), (b"junk", "junk"), (b"\x00", "zero byte"),
            (bb.frame(b"more"), "second frame"), (stored[:4], "magic"),
        ])
        return stored + extra, "then " + what
    edits.append(append)

    def prepend() -> tuple[bytes, str]:
        return rng.choice([bb.skippable_frame(b"x"), bb.frame(b""), b"\x00"]) + stored, "prefixed"
    edits.append(prepend)

    def replace() -> tuple[bytes, str]:
        return rng.choice([
            (bb.skippable_frame(b"only"), "only a skippable frame"), (b"not a frame", "garbage"),
            (stored[:4], "magic only"), (stored[:rng.randint(5, 8)], "header only"),
            (b"", "empty"), (bb.frame(b"", fcs_size=1), "frame of 0 bytes"),
            (bb.frame_header(0) + bb.block(b"hidden"), "fcs 0 with data"),
            (bb.frame_header(0, fcs_size=1) + bb.rle_block(0x61, 1000), "fcs 0 with RLE data"),
        ])
    edits.append(replace)

    def truncate() -> tuple[bytes, str] | None:
        if len(stored) < 2:
            return None
        cut = rng.randint(1, min(len(stored) - 1, 12))
        return stored[:-cut], f"cut {cut}"
    edits.append(truncate)

    if content is not None:
        def recompress() -> tuple[bytes, str]:
            level = rng.choice([-3, 1, 3, 9])
            params = {"write_content_size": rng.random() < 0.6, "write_checksum": rng.random() < 0.5}
            if dictionary:
                params["dict_data"] = zstandard.ZstdCompressionDict(dictionary)
                params["write_dict_id"] = rng.random() < 0.5
            if not content:
                return b"", "recompressed (empty)"
            return zstandard.ZstdCompressor(level=level, **params).compress(content), \
                f"recompressed level {level} {params.get('write_content_size')}/{params.get('write_checksum')}"
        edits.append(recompress)

        def by_hand() -> tuple[bytes, str]:
            sized = rng.random() < 0.5
            return bb.frame(content, sized=sized, checksum=rng.random() < 0.3,
                            block_bytes=rng.choice([1, 7, 100, 128 * 1024]) if len(content) < 2000 else 128 * 1024), \
                "raw blocks" + ("" if sized else " unsized")
        edits.append(by_hand)

    for _ in range(4):
        result = rng.choice(edits)()
        if result is not None:
            return result
    return None


def _gen_record(rng: random.Random, st: _State) -> Op | None:
    for name, records, limits in _bags_with_limits(rng, st):
        valid = [k for k in range(len(limits))
                 if (limits[k - 1] if k else 0) <= limits[k] <= len(records)]
        if not valid:
            continue
        if st.compressed(name):
            nonempty = [k for k in valid if limits[k] > (limits[k - 1] if k else 0)]
            k = rng.choice(nonempty) if nonempty and rng.random() < 0.9 else rng.choice(valid)
            stored = records[(limits[k - 1] if k else 0):limits[k]]
            if not stored:
                new, what = rng.choice([
                    (bb.frame(b"was empty"), "frame for an empty record"), (bb.frame(b""), "frame of 0 bytes"),
                    (bb.skippable_frame(), "skippable frame"), (b"\x28", "one byte"),
                ])
                return _record_op(name, k, new, what)
            edit = _frame_edit(rng, stored, st.dictionary())
            if edit is None:
                continue
            return _record_op(name, k, *edit)
        k = rng.choice(valid)
        new = rng.choice([b"", rng.randbytes(rng.randint(1, 64)), rng.randbytes(rng.randint(100, 3000))])
        return _record_op(name, k, new, f"raw record of {len(new)} bytes")
    return None


def _gen_files(rng: random.Random, st: _State) -> Op | None:
    files = list(st.meta["files"])
    if not files:
        return None
    records = _records_files(st.meta)
    roll = rng.random()
    if roll < 0.25:
        return {"op": "remove", "file": rng.choice(files)}
    if roll < 0.45 and len(files) >= 2:
        a, b = rng.sample(files, 2)
        return {"op": "swap", "a": a, "b": b}
    if roll < 0.55 and len(files) >= 2:
        a, b = rng.sample(files, 2)
        return {"op": "copy", "src": a, "dst": b}
    if roll < 0.62:
        return {"op": "make_dir", "file": rng.choice(files)}
    if st.meta["placement"] == "TAIL" and records:
        name = rng.choice(records)
        found = st.limits(name)
        choices = [b"", rng.randbytes(rng.randint(1, 12))]
        if found is not None:
            choices.append(bb.u64s(*found[1]))
            choices.append(bb.u64s(*found[1][:-1]))
        return {"op": "leftover", "file": name, "hex": rng.choice(choices).hex()}
    # SEPARATE: a limits file cut to a non-multiple of 8, or extended.
    limits_files = [f for f in files if f not in records]
    if limits_files:
        name = rng.choice(limits_files)
        if os.path.isfile(os.path.join(st.folder, name)):
            size = st.size(name)
            if size and rng.random() < 0.6:
                return {"op": "truncate", "file": name, "size": max(0, size - rng.randint(1, 12))}
            return {"op": "extend", "file": name, "hex": rng.randbytes(rng.choice([1, 4, 8, 16])).hex()}
    return {"op": "remove", "file": rng.choice(files)}


def _map_layout(st: _State) -> tuple[str, bytes, mb.MapLayout] | None:
    name = st.meta["files"][0]
    if name not in st.existing():
        return None
    with open(os.path.join(st.folder, name), "rb") as f:
        data = f.read()
    layout = mb.parse_layout(data, st.meta["kind"] == "intmap")
    return None if layout is None else (name, data, layout)


def _set(name: str, pos: int, new: bytes) -> Op:
    return {"op": "set_bytes", "file": name, "pos": pos, "hex": new.hex()}


def _gen_map_header(rng: random.Random, name: str, data: bytes, layout: mb.MapLayout) -> Op:
    if layout.intmap:
        field = rng.choice(["magic", "version", "type", "count"])
        at = {"magic": rng.randrange(4), "version": 4, "type": 5, "count": 6}[field]
    else:
        field = rng.choice(["magic", "version", "version", "compression", "count", "count"])
        at = {"magic": rng.randrange(7), "version": 7, "compression": 8, "count": 12}[field]
    if field == "count":
        n, room = layout.count, (len(data) - layout.header) // 16
        value = rng.choice([0, 1, n - 1, n + 1, room, room + 1, 2**31, 2**32 - 1]) % 2**32
        return _set(name, at, value.to_bytes(4, "little"))
    if field == "compression":
        return _set(name, at, rng.choice([b"none", b"gzip", b"00br", b"zstd", b"lzma", b"br\0\0",
                                          rng.randbytes(4)]))
    return _set(name, at, bytes([rng.choice([0, 1, 2, 3, 255, rng.randrange(256)])]))


def _gen_map_entry(rng: random.Random, name: str, data: bytes, layout: mb.MapLayout) -> Op | None:
    if not layout.keys:
        return None
    p = rng.randrange(len(layout.keys))
    if rng.random() < 0.4:  # the key
        key = layout.keys[p]
        value = rng.choice([0, 2**64 - 1, key + 1, key - 1, rng.choice(layout.keys), rng.getrandbits(64)])
        return _set(name, layout.entry_offset(p), (value % 2**64).to_bytes(8, "little"))
    word = layout.words[p]  # an offset, or an IntMap's value
    neighbours = [layout.words[q] for q in (p - 1, p + 1) if 0 <= q < len(layout.words)]
    data_offset = layout.entry_offset(layout.count)
    value = rng.choice([0, 16, data_offset - 1, data_offset, len(data), len(data) + 1, len(data) - 3,
                        word + 1, word - 1, word + 4, word - 4, 2**63, 2**64 - 1,
                        rng.getrandbits(64), *neighbours])
    return _set(name, layout.entry_offset(p) + 8, (value % 2**64).to_bytes(8, "little"))


def _gzip_edit(rng: random.Random, member: bytes) -> tuple[bytes, str]:
    """A gzip value followed by what a reader of the first member alone
    would ignore: a second member (shorter, longer or empty) or junk."""
    roll = rng.random()
    if roll < 0.5:
        second = gzip.compress(rng.choice([b"", b"x", rng.randbytes(rng.randint(1, 2000))]), mtime=0)
        return member + second, "then a second gzip member"
    junk = rng.choice([b"\x00", b"junk", rng.randbytes(rng.randint(1, 20))])
    return member + junk, f"then {len(junk)} bytes of junk"


def _gen_map_value(rng: random.Random, name: str, data: bytes, layout: mb.MapLayout) -> Op | None:
    """A value's stored bytes changed: damaged bytes under a correct crc32c
    (so decoders see them), a bad crc32c, an edited zstd frame, another size."""
    extents = [(p, e) for p in range(len(layout.words)) if (e := layout.extent(p, len(data)))]
    if layout.intmap or not extents:
        return None
    p, (begin, end) = rng.choice(extents)
    crc = 4 if layout.version >= 1 else 0
    payload = data[begin:end - crc] if end - begin >= crc else b""
    compression = data[8:12]
    roll = rng.random()
    if roll < 0.25 and crc and end - begin >= crc:
        return _set(name, end - crc, rng.randbytes(crc))
    if compression == b"zstd" and payload and roll < 0.7:
        edit = _frame_edit(rng, payload, None)
        if edit is not None:
            new, what = edit
            return {"op": "map_value", "file": name, "position": p,
                    "hex": mb.stored_value(new, layout.version).hex(), "what": what}
    if compression == b"gzip" and payload and roll < 0.6:
        new, what = _gzip_edit(rng, payload)
        return {"op": "map_value", "file": name, "position": p,
                "hex": mb.stored_value(new, layout.version).hex(), "what": what}
    if payload and roll < 0.85:
        damaged = bytearray(payload)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        return {"op": "map_value", "file": name, "position": p,
                "hex": mb.stored_value(bytes(damaged), layout.version).hex(),
                "what": "flipped bits, crc32c recomputed"}
    new = rng.choice([b"", rng.randbytes(rng.randint(1, 3)), rng.randbytes(rng.randint(4, 300))])
    stored = mb.stored_value(new, layout.version) if rng.random() < 0.7 else new
    return {"op": "map_value", "file": name, "position": p, "hex": stored.hex(),
            "what": f"{len(stored)} stored bytes"}


def _gen_map(rng: random.Random, st: _State) -> Op | None:
    found = _map_layout(st)
    if found is None:
        return None
    name, data, layout = found
    roll = rng.random()
    if roll < 0.2:
        return _gen_map_header(rng, name, data, layout)
    if roll < 0.55:
        return _gen_map_entry(rng, name, data, layout)
    return _gen_map_value(rng, name, data, layout) or _gen_map_entry(rng, name, data, layout)


def _gen_map_file(rng: random.Random, st: _State) -> Op | None:
    name = st.meta["files"][0]
    return {"op": rng.choice(["remove", "make_dir"]), "file": name}


MAP_FAMILIES: dict[str, tuple[float, Callable[[random.Random, _State], Op | None]]] = {
    "bytes": (0.35, _gen_bytes),
    "map": (0.62, _gen_map),
    "files": (0.03, _gen_map_file),
}

# --- Dataset mutations (a shard folder: spec.json, refs.bag, a bags file per field) ---


def _dataset_spec(st: _State) -> dict | None:
    try:
        with open(os.path.join(st.folder, "spec.json"), "rb") as f:
            spec = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return spec if isinstance(spec, dict) else None


def _gen_dataset_refs(rng: random.Random, st: _State) -> Op | None:
    """A datapoint's refs record: an entry out of range or of another type,
    the list cut or grown, not a list, not msgpack."""
    found = st.limits("refs.bag") if "refs.bag" in st.existing() else None
    if found is None or len(found[1]) < 2:
        return None
    records, limits = found
    k = rng.randrange(1, len(limits))  # record 0 is the bags file's leading empty record
    stored = records[limits[k - 1]:limits[k]] if limits[k - 1] <= limits[k] <= len(records) else b""
    try:
        refs = msgpack.unpackb(stored)
    except Exception:  # noqa: BLE001
        refs = None
    roll = rng.random()
    if isinstance(refs, list) and refs and roll < 0.7:
        refs = list(refs)
        j = rng.randrange(len(refs))
        refs[j] = rng.choice([-1, 0, 1, 2**31, 2**63, 2**64 - 1, "x", 1.5, None, True, [], [0], [0, 1],
                              [0, 2**40], [-1, 1], [1, -1], [2**63, 1], [0, 1, 2], {"a": 1},
                              refs[(j + 1) % len(refs)]])
        new, what = msgpack.packb(refs), f"ref {j} changed"
    elif isinstance(refs, list) and roll < 0.85:
        new, what = msgpack.packb(refs[:-1] if rng.random() < 0.5 else refs + [0]), "refs cut or grown"
    else:
        new, what = rng.choice([(msgpack.packb(7), "an int"), (msgpack.packb({"a": 1}), "a map"),
                                (b"\xc1", "not msgpack"), (b"", "empty"), (b"\x92\x01", "truncated")])
    return {"op": "record", "file": "refs.bag", "index": k, "hex": new.hex(), "what": what}


def _gen_dataset_value(rng: random.Random, st: _State) -> Op | None:
    """A raw field record that its decoder rejects, or of another size."""
    raw = [f for f in st.existing() if f.endswith(".bag") and f != "refs.bag"]
    if not raw:
        return None
    name = rng.choice(raw)
    found = st.limits(name)
    if found is None or len(found[1]) < 2:
        return None
    k = rng.randrange(1, len(found[1]))
    new = rng.choice([b"\xff\xfe", b"\xc1", b"\xed\xa0\x80", b"", b"\x01\x02\x03", b"\x91"])
    return {"op": "record", "file": name, "index": k, "hex": new.hex(), "what": f"value {new!r}"}


def _gen_dataset_spec(rng: random.Random, st: _State) -> Op | None:
    """spec.json with a field's type changed, a field dropped or added, or not a spec."""
    spec = _dataset_spec(st)
    roll = rng.random()
    if spec and roll < 0.8:
        spec = dict(spec)
        fields = [f for f in spec if "/" not in f]
        field = rng.choice(fields) if fields else None
        change = rng.choice(["type", "type", "list", "drop", "add"])
        if change == "type" and field:
            spec[field] = rng.choice(["bytes", "utf8", "int(8)", "int(2,big)", "msgpack", "bytes[]",
                                      "utf8[]", "msgpack[]", "nothing", "int(8", "Utf8"])
        elif change == "list" and field:
            text = spec[field] if isinstance(spec[field], str) else "bytes"
            spec[field] = text[:-2] if text.endswith("[]") else text + "[]"
        elif change == "drop" and field:
            del spec[field]
        else:
            spec[rng.choice(["zz", "refs", "a/b"])] = "bytes"
        new, what = json.dumps(spec, sort_keys=True).encode(), f"spec: {change} {field}"
    else:
        new, what = rng.choice([(b"{", "not json"), (b"[]", "a list"), (b"", "empty"),
                                (b'{"x": 1}', "a type that is not a str")])
    return {"op": "write", "file": "spec.json", "hex": new.hex(), "what": what}


def _gen_dataset(rng: random.Random, st: _State) -> Op | None:
    roll = rng.random()
    if roll < 0.5:
        return _gen_dataset_refs(rng, st)
    if roll < 0.8:
        return _gen_dataset_value(rng, st)
    return _gen_dataset_spec(rng, st)


DATASET_FAMILIES: dict[str, tuple[float, Callable[[random.Random, _State], Op | None]]] = {
    "bytes": (0.2, _gen_bytes),
    "limits": (0.2, _gen_limits),
    "record": (0.15, _gen_record),
    "dataset": (0.37, _gen_dataset),
    "files": (0.08, _gen_files),
}

PARTIAL_FAMILIES: dict[str, tuple[float, Callable[[random.Random, _State], Op | None]]] = {
    "partial": (1.0, lambda rng, st: gen_partial(rng, st.folder)),
}

FAMILIES: dict[str, tuple[float, Callable[[random.Random, _State], Op | None]]] = {
    "bytes": (0.25, _gen_bytes),
    "limits": (0.30, _gen_limits),
    "record": (0.33, _gen_record),
    "files": (0.12, _gen_files),
}


def generate(meta: dict, seed_dir: str, out_dir: str, rng: random.Random, max_ops: int = 4) -> dict:
    """A new mutant of the seed in `seed_dir`, written to `out_dir`; returns
    its recipe."""
    copy_seed(seed_dir, out_dir)
    state = _State(out_dir, meta)
    roll = rng.random()
    count = 1 if roll < 0.5 else 2 if roll < 0.8 else rng.randint(3, max(3, max_ops))
    ops: list[Op] = []
    kind = meta.get("kind", "bag")
    families = (MAP_FAMILIES if kind in ("map", "intmap") else
                DATASET_FAMILIES if kind == "dataset" else
                PARTIAL_FAMILIES if kind == "partial" else FAMILIES)
    names = list(families)
    weights = [families[n][0] for n in names]
    attempts = 0
    while len(ops) < count and attempts < count * 6:
        attempts += 1
        family = rng.choices(names, weights)[0]
        op = families[family][1](rng, state)
        if op is None:
            continue
        if apply_op(out_dir, meta, op):
            ops.append(op)
    return {"seed": meta["name"], "ops": ops}
