"""The seed corpus: small bags made by a script, deterministic from a seed.

Each seed is a folder holding the bag's files and `meta.json` (maps: one
`.mb` / `.im` file, "kind" "map" / "intmap"):

    {"name": ..., "spec": "data.bagz" | "c@3.bagz" | "a.bag,b.bagz",
     "placement": "TAIL" | "SEPARATE", "layout": "CONCATENATED" | "INTERLEAVED",
     "compression": "auto" | "none" | "zstd", "dictionary": "dict.bin" | null,
     "files": [the files mutators may touch], "weight": ..., "origin": ...,
     "kind": "bag" | "map" | "intmap"}

The spec is relative to the folder. Seeds are written both with
`sackli.Writer` and byte by byte (frames of raw and RLE blocks, frames
without a content size, with checksums, with 1/2/4/8-byte size fields); the
golden bagz 0.3.8 files of tests/data are copied in as well.

    python -m fuzz.corpus OUT_DIR [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import sys

import zstandard

from . import bagbytes as bb
from .partial_mutators import lay_out_partial_seed
from . import mapbytes as mb
from .oracle import limits_path_for

__all__ = ["build_corpus", "load_corpus", "GOLDEN_DIR", "CORPUS_VERSION"]

REPO = pathlib.Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "data"
# Bumped when the seeds change, so a cached corpus is rebuilt.
CORPUS_VERSION = 10


def _meta(name: str, spec: str, files: list[str], *, placement: str = "TAIL",
          layout: str = "CONCATENATED", compression: str = "auto",
          dictionary: str | None = None, weight: float = 1.0, origin: str = "bytes",
          kind: str = "bag") -> dict:
    return {"name": name, "spec": spec, "placement": placement, "layout": layout,
            "compression": compression, "dictionary": dictionary, "files": files,
            "weight": weight, "origin": origin, "kind": kind}


def _files_of(folder: pathlib.Path, names: list[str], placement: str) -> list[str]:
    out = []
    for name in names:
        out.append(name)
        if placement == "SEPARATE":
            out.append("limits." + name)
    return [n for n in out if (folder / n).exists()]


class _Builder:
    def __init__(self, out: pathlib.Path, seed: int) -> None:
        self.out = out
        self.rng = random.Random(seed)
        self.metas: dict[str, dict] = {}

    def folder(self, name: str) -> pathlib.Path:
        path = self.out / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def add(self, meta: dict) -> None:
        folder = self.out / meta["name"]
        (folder / "meta.json").write_text(json.dumps(meta, indent=1))
        self.metas[meta["name"]] = meta

    # --- record contents ---------------------------------------------------

    def random_bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n)

    def text(self, n: int) -> bytes:
        words = [b"alpha", b"beta", b"gamma", b"delta", b"record", b"sackli", b"bagz", b"\x00\x01"]
        out = bytearray()
        while len(out) < n:
            out += self.rng.choice(words) + b" %d " % self.rng.randrange(1000)
        return bytes(out[:n])

    def repetitive(self, n: int) -> bytes:
        """n bytes that compress to a few hundred (a 1 KiB text repeated)."""
        unit = self.text(1024)
        return (unit * (n // 1024 + 1))[:n]

    def varied(self, count: int, compressible: bool) -> list[bytes]:
        """Records of varied sizes, empty ones included."""
        sizes = [0, 1, 7, 0, 33, 255, 256, 300, 1000, 0, 2, 4096]
        if compressible:
            sizes += [65791, 65792]
        self.rng.shuffle(sizes)
        records = []
        for k in range(count):
            n = sizes[k % len(sizes)] if k < len(sizes) else self.rng.choice([0, 3, 17, 120, 600])
            records.append(self.repetitive(n) if compressible else self.random_bytes(n))
        return records


def _write_with_sackli(path: pathlib.Path, records: list[bytes], placement: str = "TAIL",
                       dictionary: bytes | None = None, record_checksums: bool = False) -> None:
    import sackli

    options = {"limits_placement": placement, "max_parallelism": 1,
               "record_checksums": record_checksums}
    if dictionary is not None:
        options["compression"] = sackli.CompressionZstd(dictionary=dictionary)
    with sackli.Writer(str(path), **options) as writer:
        for record in records:
            writer.write(record)


def _frames_by_hand(b: _Builder) -> list[bytes]:
    """Stored records of a .bagz made byte by byte: every framing sackli must
    accept (and empty records)."""
    rng = b.rng
    stored = []
    stored.append(bb.frame(b"x"))                                        # 0x20, 1-byte size
    stored.append(b"")
    stored.append(bb.frame(b.text(300)))                                 # 0x60, 2-byte size
    stored.append(bb.frame_header(70000) + bb.block(b.text(700), last=False)
                  + bb.rle_block(0x42, 69300))                            # 4-byte size, 2 blocks
    stored.append(bb.frame(b.text(40), fcs_size=8))                      # 8-byte size field
    stored.append(bb.frame(b.text(50), sized=False))                     # no content size
    stored.append(bb.frame(b.text(2500), sized=False, block_bytes=700))  # no size, 4 blocks
    stored.append(bb.frame(b.text(60), checksum=True))                   # checksum
    stored.append(bb.frame(b.text(2000), sized=False, checksum=True, block_bytes=700))
    stored.append(bb.frame(b"\xab" * 300_000, rle=True))                 # 300 KB in 3 RLE blocks
    stored.append(bb.frame(b"\x00" * 200_000, rle=True, sized=False))    # unsized RLE
    stored.append(bb.frame(b""))                                         # a frame of 0 bytes
    stored.append(b"")
    mixed = b.text(1000)
    stored.append(bb.frame_header(len(mixed) + 9000) + bb.block(mixed, last=False)
                  + bb.rle_block(0x41, 9000, last=True))                 # raw + RLE blocks
    for level, size in ((1, 777), (19, 3000), (-5, 400)):
        content = b.text(size)
        stored.append(zstandard.ZstdCompressor(level=level).compress(content))
    content = b.repetitive(150_000) + b.random_bytes(500)
    stored.append(zstandard.ZstdCompressor(level=3, write_content_size=False,
                                           write_checksum=True).compress(content))
    stored.append(zstandard.ZstdCompressor(level=3, write_checksum=True).compress(b.text(900)))
    stored.append(bb.frame(b.random_bytes(rng.randrange(1, 200))))
    return stored


def build_corpus(out_dir: str | os.PathLike, seed: int = 0, golden: bool = True) -> dict[str, dict]:
    """Writes every seed under `out_dir`; returns {name: meta}. The same seed
    gives the same files (for a given sackli writer and zstd version)."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    b = _Builder(out, seed)

    # Written by sackli.Writer.
    for placement in ("TAIL", "SEPARATE"):
        tag = placement.lower()
        raw = b.varied(14, compressible=False)
        folder = b.folder(f"w_{tag}_bag")
        _write_with_sackli(folder / "data.bag", raw, placement)
        b.add(_meta(f"w_{tag}_bag", "data.bag", _files_of(folder, ["data.bag"], placement),
                    placement=placement, origin="writer"))
        texts = b.varied(16, compressible=True) + [b.repetitive(300_000)]
        folder = b.folder(f"w_{tag}_bagz")
        _write_with_sackli(folder / "data.bagz", texts, placement)
        b.add(_meta(f"w_{tag}_bagz", "data.bagz", _files_of(folder, ["data.bagz"], placement),
                    placement=placement, origin="writer"))

    # Raw bags with a CRC-32C sidecar (format.md section 12), both placements.
    for placement in ("TAIL", "SEPARATE"):
        name = f"w_{placement.lower()}_bag_checked"
        folder = b.folder(name)
        _write_with_sackli(folder / "data.bag", b.varied(14, compressible=False), placement,
                           record_checksums=True)
        files = _files_of(folder, ["data.bag"], placement) + ["data.bag.crc32c"]
        b.add(_meta(name, "data.bag", files, placement=placement, origin="writer"))

    # Byte by byte: every framing, both placements.
    hand = _frames_by_hand(b)
    for placement in ("TAIL", "SEPARATE"):
        name = f"b_{placement.lower()}_bagz"
        folder = b.folder(name)
        bb.write_bag(str(folder / "frames.bagz"), hand, placement)
        b.add(_meta(name, "frames.bagz", _files_of(folder, ["frames.bagz"], placement),
                    placement=placement))
    folder = b.folder("b_tail_bag")
    raw = [b"", b"abc", bb.frame(b"looks like a frame"), b"", b.random_bytes(513), b"\x00" * 8,
           bb.u64s(3), b.random_bytes(40)]
    bb.write_bag(str(folder / "raw.bag"), raw)
    b.add(_meta("b_tail_bag", "raw.bag", ["raw.bag"]))

    # Small shapes.
    folder = b.folder("b_empty_tail")
    (folder / "empty.bagz").write_bytes(b"")
    b.add(_meta("b_empty_tail", "empty.bagz", ["empty.bagz"], weight=0.3))
    folder = b.folder("b_empty_sep")
    bb.write_bag(str(folder / "empty.bag"), [], "SEPARATE")
    b.add(_meta("b_empty_sep", "empty.bag", ["empty.bag", "limits.empty.bag"], placement="SEPARATE",
                weight=0.3))
    folder = b.folder("b_one_empty")
    bb.write_bag(str(folder / "one.bagz"), [b""])
    b.add(_meta("b_one_empty", "one.bagz", ["one.bagz"], weight=0.3))

    # Dictionaries: raw-content and trained, given to the reader.
    raw_dict = b.text(4096)
    samples = [json.dumps({"id": i, "user": "user%d" % b.rng.randrange(1000),
                           "kind": ["alpha", "beta", "gamma"][i % 3],
                           "score": round(b.rng.random(), 4)}).encode() for i in range(400)]
    trained = zstandard.train_dictionary(2048, samples, dict_id=4242, threads=1).as_bytes()
    for name, content, records in (
        ("w_dict_raw", raw_dict, [raw_dict[k * 97:k * 97 + 300] + b"%d" % k for k in range(10)] + [b""]),
        ("w_dict_trained", trained, samples[:10] + [b""] + samples[10:12]),
    ):
        folder = b.folder(name)
        (folder / "dict.bin").write_bytes(content)
        _write_with_sackli(folder / "data.bagz", records, dictionary=content)
        b.add(_meta(name, "data.bagz", ["data.bagz"], compression="zstd", dictionary="dict.bin",
                    origin="writer"))
    folder = b.folder("b_dict_trained")
    (folder / "dict.bin").write_bytes(trained)
    zdict = zstandard.ZstdCompressionDict(trained)
    stored = []
    for k, sample in enumerate(samples[20:32]):
        compressor = zstandard.ZstdCompressor(
            level=3, dict_data=zdict, write_checksum=k % 2 == 0, write_dict_id=k % 3 != 0,
            write_content_size=k % 4 != 1)
        stored.append(compressor.compress(sample))
    stored.insert(4, b"")
    stored.append(bb.frame(b"no dictionary needed"))
    bb.write_bag(str(folder / "dict.bagz"), stored, "SEPARATE")
    b.add(_meta("b_dict_trained", "dict.bagz", ["dict.bagz", "limits.dict.bagz"], placement="SEPARATE",
                compression="zstd", dictionary="dict.bin"))

    # Shard sets.
    folder = b.folder("w_concat")
    sizes = (4, 0, 3)
    names = [f"c-{s:05d}-of-00003.bagz" for s in range(3)]
    for s, size in enumerate(sizes):
        _write_with_sackli(folder / names[s], [b"%d:%d " % (s, i) + b.text(i * 40) for i in range(size)])
    b.add(_meta("w_concat", "c@3.bagz", names, origin="writer"))
    folder = b.folder("b_inter")
    sizes = (3, 3, 2)
    names = [f"i-{s:05d}-of-00003.bag" for s in range(3)]
    for s, size in enumerate(sizes):
        bb.write_bag(str(folder / names[s]), [b"%d:%d" % (s, i) * (i + 1) for i in range(size)])
    b.add(_meta("b_inter", "i@3.bag", names, layout="INTERLEAVED"))
    folder = b.folder("b_inter_sep")
    names = [f"j-{s:05d}-of-00002.bagz" for s in range(2)]
    for s, size in enumerate((3, 2)):
        stored = [bb.frame(b"%d:%d" % (s, i) * 9, sized=i % 2 == 0) if i != 1 else b"" for i in range(size)]
        bb.write_bag(str(folder / names[s]), stored, "SEPARATE")
    b.add(_meta("b_inter_sep", "j@2.bagz", _files_of(folder, names, "SEPARATE"),
                placement="SEPARATE", layout="INTERLEAVED"))
    folder = b.folder("b_list")
    bb.write_bag(str(folder / "a.bag"), [b"a0", b"", b"a2" * 50])
    bb.write_bag(str(folder / "b.bagz"), [bb.frame(b"b0" * 30), b"", bb.frame(b"b2", sized=False)])
    b.add(_meta("b_list", "a.bag,b.bagz", ["a.bag", "b.bagz"]))
    folder = b.folder("b_star")
    for s in range(2):
        bb.write_bag(str(folder / f"s-{s:05d}-of-00002.bag"), [b"s%d-%d" % (s, i) for i in range(3 - s)])
    b.add(_meta("b_star", "s@*.bag", [f"s-{s:05d}-of-00002.bag" for s in range(2)]))

    # Explicit compression choices.
    folder = b.folder("b_none_bagz")
    bb.write_bag(str(folder / "frames.bagz"), hand[:8])
    b.add(_meta("b_none_bagz", "frames.bagz", ["frames.bagz"], compression="none", weight=0.5))
    folder = b.folder("b_zstd_bag")
    bb.write_bag(str(folder / "frames.bag"), hand[:10])
    b.add(_meta("b_zstd_bag", "frames.bag", ["frames.bag"], compression="zstd", weight=0.5))

    # Large raw records: reads of unmapped sources make buffers of this size.
    folder = b.folder("b_big_bag")
    big = [bytes([k]) * (1 << 20) for k in range(3)] + [b"", b"tail"]
    random.Random(f"{seed}:big").shuffle(big)  # not tied to the other seeds' draws
    bb.write_bag(str(folder / "big.bag"), big)
    b.add(_meta("b_big_bag", "big.bag", ["big.bag"], weight=0.5))

    _map_seeds(b)
    _dataset_seeds(b)
    _partial_seeds(b)
    if golden:
        _copy_golden(b)
    (out / "index.json").write_text(json.dumps({"seed": seed, "version": CORPUS_VERSION,
                                                "seeds": b.metas}, indent=1))
    return b.metas


def _map_keys(b: _Builder, n: int) -> list[int]:
    """n distinct uint64 keys, the extremes among them when n allows."""
    keys = {0, 2**64 - 1, 2**63, 1} if n >= 4 else set()
    while len(keys) < n:
        keys.add(b.rng.getrandbits(b.rng.choice([8, 32, 63, 64])))
    return sorted(keys)[:n]


def _map_seeds(b: _Builder) -> None:
    """MapBuffers (every compression, formats 0 and 1) and IntMaps, byte by
    byte; and one MapBuffer written by sackli.maps."""
    import gzip
    import lzma

    def add(name: str, data: bytes, kind: str = "map", origin: str = "bytes") -> None:
        file = "map.im" if kind == "intmap" else "map.mb"
        (b.folder(name) / file).write_bytes(data)
        b.add(_meta(name, file, [file], compression="none", origin=origin, kind=kind,
                    weight=0.6))

    raw = {key: b.random_bytes(b.rng.choice([0, 0, 1, 3, 4, 5, 40, 300]))
           for key in _map_keys(b, 24)}
    add("m_none_v1", mb.build_map(raw))
    add("m_none_v0", mb.build_map(raw, version=0))
    add("m_empty", mb.build_map({}))
    add("m_one", mb.build_map({7: b"seven"}))
    texts = {key: b.repetitive(b.rng.choice([1, 60, 500, 3000])) for key in _map_keys(b, 12)}
    frames = {}
    for k, (key, text) in enumerate(texts.items()):
        options = [dict(), dict(write_content_size=False), dict(write_checksum=True)][k % 3]
        frames[key] = zstandard.ZstdCompressor(level=3, **options).compress(text)
    add("m_zstd_v1", mb.build_map(frames, b"zstd"))
    add("m_zstd_v0", mb.build_map(frames, b"zstd", version=0))
    add("m_gzip_v1", mb.build_map({key: gzip.compress(text, mtime=0) for key, text in
                                   list(texts.items())[:6]}, b"gzip"))
    add("m_lzma_v1", mb.build_map({key: lzma.compress(text) for key, text in
                                   list(texts.items())[:4]}, b"lzma"))
    try:
        import brotli
    except ImportError:
        pass
    else:
        add("m_br_v1", mb.build_map({key: brotli.compress(text) for key, text in
                                     list(texts.items())[:4]}, b"00br"))
    import sackli.maps

    ours = sackli.maps.MapBuffer({key: text for key, text in texts.items()}, compress="zstd")
    add("m_sackli_zstd", bytes(ours.tobytes()), origin="sackli.maps")
    add("im_intmap", mb.build_intmap({key: b.rng.getrandbits(64) for key in _map_keys(b, 30)}),
        kind="intmap")
    add("im_empty", mb.build_intmap({}), kind="intmap")


def _partial_seeds(b: _Builder) -> None:
    """Folders of unfinished writes beside sentinels (fuzz/partial_paths.py)."""
    for name, writes in (("p_bag", ("bag",)), ("p_set", ("set",)), ("p_map", ("map",)),
                         ("p_all", ("bag", "set", "map"))):
        folder = b.folder(name)
        lay_out_partial_seed(str(folder), writes)
        files = sorted(os.path.relpath(os.path.join(where, file), folder)
                       for where, _, names in os.walk(folder) for file in names)
        b.add(_meta(name, "", files, origin="crafted", kind="partial", weight=0.5))


def _dataset_seeds(b: _Builder) -> None:
    """Shard folders written by sackli.datasets (raw, and with zstd fields),
    an empty one, and one written by the real `bags` when it is installed."""
    from sackli import datasets

    spec = {"b": "bytes", "k": "int(4)[]", "m": "msgpack", "n": "int(8)", "t": "utf8",
            "w": "utf8[]"}
    words = ["", "a", "é", "漢字", "word", "🙂"]
    points = [{"b": b.random_bytes(b.rng.choice([0, 1, 5, 40])),
               "k": [b.rng.getrandbits(32) for _ in range(b.rng.randrange(0, 4))],
               "m": {"i": i, "s": "x" * (i % 3)}, "n": b.rng.getrandbits(64),
               "t": "".join(b.rng.choice(words) for _ in range(b.rng.randrange(0, 4))),
               "w": [b.rng.choice(words) for _ in range(b.rng.randrange(0, 6))]}
              for i in range(12)]

    def add(name: str, write, origin: str) -> None:
        folder = b.folder(name)
        shutil.rmtree(folder)  # the writers create the folder
        write(str(folder))
        files = sorted(os.listdir(folder))
        b.add(_meta(name, "", files, origin=origin, kind="dataset", weight=1.0))

    def with_sackli(compression):
        def write(folder: str) -> None:
            with datasets.DatasetWriter(folder, spec, compression=compression) as writer:
                for point in points:
                    writer.append(point)
        return write

    add("d_mixed", with_sackli(None), "sackli.datasets")
    add("d_zstd_fields", with_sackli({"t": "zstd", "w": "zstd"}), "sackli.datasets")
    add("d_empty", lambda folder: datasets.DatasetWriter(folder, spec).close(), "sackli.datasets")
    try:
        import bags
        import bags.formats
    except ImportError:
        return

    def with_bags(folder: str) -> None:
        with bags.DatasetWriter(folder, spec, bags.formats.encoders) as writer:
            for point in points:
                writer.append(point)

    add("d_bags", with_bags, "bags 0.5.1")


def _copy_golden(b: _Builder) -> None:
    """The bagz 0.3.8 files of tests/data (see its MANIFEST.json)."""
    if not (GOLDEN_DIR / "MANIFEST.json").exists():
        return
    manifest = json.loads((GOLDEN_DIR / "MANIFEST.json").read_text())
    for name, entry in manifest["files"].items():
        placement = entry.get("limits_placement", "TAIL")
        layout = entry.get("layout", "CONCATENATED")
        seed_name = "g_" + name.replace("@", "_at_").replace(".", "_")
        folder = b.folder(seed_name)
        if "@" in name:
            base, rest = name.split("@")
            count = int(rest.split(".")[0])
            suffix = rest[len(str(count)):]
            files = [f"{base}-{s:05d}-of-{count:05d}{suffix}" for s in range(count)]
        else:
            files = [name]
        copied = []
        for file in files:
            shutil.copyfile(GOLDEN_DIR / file, folder / file)
            copied.append(file)
            if placement == "SEPARATE":
                limits = os.path.basename(limits_path_for(file))
                shutil.copyfile(GOLDEN_DIR / limits, folder / limits)
                copied.append(limits)
        size = sum((folder / f).stat().st_size for f in copied)
        b.add(_meta(seed_name, name, copied, placement=placement, layout=layout,
                    weight=0.4 if size > 10000 else 1.0, origin="golden bagz 0.3.8"))


def load_corpus(out_dir: str | os.PathLike, seed: int = 0) -> dict[str, dict]:
    """The corpus under `out_dir`, built first unless it is there already
    (same seed and version)."""
    index = pathlib.Path(out_dir) / "index.json"
    if index.exists():
        found = json.loads(index.read_text())
        if found.get("seed") == seed and found.get("version") == CORPUS_VERSION:
            return found["seeds"]
    return build_corpus(out_dir, seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.corpus", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-golden", action="store_true", help="leave out the golden files")
    args = parser.parse_args(argv)
    metas = build_corpus(args.out_dir, args.seed, golden=not args.no_golden)
    total = 0
    for name, meta in sorted(metas.items()):
        size = sum(os.path.getsize(os.path.join(args.out_dir, name, f)) for f in meta["files"])
        total += size
        print(f"{name:24} {size:>9} B  {meta['spec']:24} {meta['placement']:8} {meta['layout']:12} "
              f"{meta['compression']}{' +dict' if meta['dictionary'] else ''}")
    print(f"{len(metas)} seeds, {total} bytes in {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
