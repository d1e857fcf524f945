"""Golden files written by bagz 0.3.8 (tests/data, described by MANIFEST.json)
read back exactly as the manifest says, through every read path of a Reader:
single files of each placement and compression, and the two sharded sets via
`name@N.ext`, `name@*.ext` and explicit comma-separated lists."""

from __future__ import annotations

import json
import pathlib
import random

import pytest

import sackli

_MANIFEST_FILES = json.loads(
    (pathlib.Path(__file__).parents[1] / "data" / "MANIFEST.json").read_text()
)["files"]
SINGLE_FILES = sorted(name for name, entry in _MANIFEST_FILES.items() if "@" not in name)
SHARDED_SETS = sorted(name for name in _MANIFEST_FILES if "@" in name)

STORAGES = pytest.mark.parametrize(
    "storage", [sackli.LimitsStorage.ON_DISK, sackli.LimitsStorage.IN_MEMORY], ids=["on_disk", "in_memory"]
)

SLICES = [
    slice(None, None, -1),
    slice(None, None, -2),
    slice(-2, 0, -3),
    slice(None, 3, -1),
    slice(100, None, -7),
    slice(5, -100, -1),
    slice(1, None, 2),
    slice(-3, None),
]


def check_reads(reader: sackli.Reader, expected: list[bytes]) -> None:
    """Every read path of `reader` gives `expected`."""
    n = len(expected)
    assert len(reader) == n
    assert [reader[i] for i in range(n)] == expected
    assert [reader[i - n] for i in range(n)] == expected
    assert list(reader) == expected
    assert reader.read() == expected
    assert list(reversed(reader)) == expected[::-1]
    rng = random.Random(n)
    indices = [rng.randrange(n) for _ in range(2 * n)] if n else []
    indices += indices[: n // 2]  # guaranteed duplicates
    rng.shuffle(indices)
    assert reader.read_indices(indices) == [expected[i] for i in indices]
    for piece in SLICES:
        view = reader[piece]
        assert len(view) == len(expected[piece]), piece
        assert view.read() == expected[piece], piece
        assert list(view) == expected[piece], piece
    for i in (n, -n - 1):
        with pytest.raises(IndexError):
            reader[i]


def shard_expected(entry: dict) -> list[bytes]:
    sizes = entry["shard_sizes"]
    if entry["layout"] == "CONCATENATED":
        return [b"%d:%d" % (s, j) for s, size in enumerate(sizes) for j in range(size)]
    shards = len(sizes)
    return [b"%d:%d" % (g % shards, g // shards) for g in range(sum(sizes))]


def shard_paths(golden_dir: pathlib.Path, spec: str, count: int) -> list[pathlib.Path]:
    base, suffix = spec.split("@")
    suffix = suffix[len(str(count)):]
    return [golden_dir / f"{base}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def test_manifest_lists_every_golden_file(golden_dir, golden_manifest):
    listed = set()
    for name, entry in golden_manifest["files"].items():
        if "@" in name:
            listed.update(p.name for p in shard_paths(golden_dir, name, len(entry["shard_sizes"])))
        else:
            listed.add(name)
            if "limits_file" in entry:
                listed.add(entry["limits_file"])
    on_disk = {p.name for p in golden_dir.iterdir() if p.name != "MANIFEST.json"}
    assert listed == on_disk


@STORAGES
@pytest.mark.parametrize("name", SINGLE_FILES)
def test_single_file(golden_dir, golden_manifest, name, storage):
    entry = golden_manifest["files"][name]
    placement = sackli.LimitsPlacement[entry.get("limits_placement", "TAIL")]
    with sackli.Reader(golden_dir / name, limits_placement=placement, limits_storage=storage) as reader:
        check_reads(reader, entry["expected"])


def test_level19_decodes_like_tail(golden_dir):
    assert sackli.Reader(golden_dir / "level19.bagz").read() == sackli.Reader(golden_dir / "tail.bagz").read()


def test_worked_examples_of_format_doc(golden_dir):
    # readme.bag is raw; blanks.bagz read with CompressionNone gives the stored frame.
    assert sackli.Reader(golden_dir / "readme.bag").read() == [b"abcdef", b"123", b"catcat"]
    frames = sackli.Reader(golden_dir / "blanks.bagz", compression=sackli.CompressionNone()).read()
    assert frames == [b"", bytes.fromhex("28b52ffd200109000078"), b"", b""]


@STORAGES
@pytest.mark.parametrize("form", ["at_n", "at_star", "list", "posix_list"])
@pytest.mark.parametrize("spec", SHARDED_SETS)
def test_sharded_set(golden_dir, golden_manifest, spec, form, storage):
    entry = golden_manifest["files"][spec]
    count = len(entry["shard_sizes"])
    base, rest = spec.split("@")
    if form == "at_n":
        file_spec = str(golden_dir / spec)
    elif form == "at_star":
        file_spec = str(golden_dir / f"{base}@*{rest[len(str(count)):]}")
    elif form == "list":
        file_spec = ",".join(str(p) for p in shard_paths(golden_dir, spec, count))
    else:
        file_spec = ",".join("posix:" + str(p) for p in shard_paths(golden_dir, spec, count))
    layout = sackli.ShardingLayout[entry["layout"]]
    with sackli.Reader(file_spec, sharding_layout=layout, limits_storage=storage) as reader:
        assert reader.file_spec == file_spec
        check_reads(reader, shard_expected(entry))


@pytest.mark.parametrize(
    "spec, global_index, record",
    [
        ("concat@4.bagz", 12, b"3:0"),
        ("concat@4.bagz", 11, b"1:3"),
        ("concat@4.bagz", 7, b"0:7"),
        ("inter@3.bag", 14, b"2:4"),
        ("inter@3.bag", 16, b"1:5"),
        ("inter@3.bag", 3, b"0:1"),
    ],
)
def test_sharded_examples_from_format_doc(golden_dir, golden_manifest, spec, global_index, record):
    layout = sackli.ShardingLayout[golden_manifest["files"][spec]["layout"]]
    assert sackli.Reader(golden_dir / spec, sharding_layout=layout)[global_index] == record


def test_interleaved_shards_read_concatenated(golden_dir):
    # The layout is not stored: the same shards read CONCATENATED come shard by shard.
    expected = [b"%d:%d" % (s, j) for s, size in enumerate([6, 6, 5]) for j in range(size)]
    assert sackli.Reader(golden_dir / "inter@3.bag").read() == expected


def test_shard_list_may_repeat_and_reorder(golden_dir):
    shard3, shard0 = golden_dir / "concat-00003-of-00004.bagz", golden_dir / "concat-00000-of-00004.bagz"
    reader = sackli.Reader(f"{shard3},{shard0},{shard3}")
    assert reader.read() == (
        [b"3:%d" % j for j in range(5)] + [b"0:%d" % j for j in range(8)] + [b"3:%d" % j for j in range(5)]
    )


def test_mixed_compression_list_detects_per_file(golden_dir, golden_manifest):
    # a .bag and a .bagz in one spec: each file's own suffix decides.
    reader = sackli.Reader(f"{golden_dir / 'tail.bag'},{golden_dir / 'tail.bagz'},{golden_dir / 'readme.bag'}")
    r500 = golden_manifest["files"]["tail.bag"]["expected"]
    assert reader.read() == r500 + r500 + [b"abcdef", b"123", b"catcat"]
