"""Interchange with the bagz 0.3.8 wheel: bags sackli writes read identically
in bagz (raw .bag files are byte-identical), and bags bagz writes read back in
sackli, for every placement and compression.

bagz detects compression from the suffix of the whole spec, so every bagz
reader here opens one file (or one `name@N.ext` set) at a time."""

from __future__ import annotations

import random

import bagz
import pytest

import sackli

_rng = random.Random(20240601)


def _mixed(length: int) -> bytes:
    """Half random, half repetitive bytes: neither trivial nor incompressible."""
    half = length // 2
    return _rng.randbytes(half) + (b"bagz-sackli " * (length // 12 + 1))[: length - half]


RECORD_SETS = {
    "readme": [b"abcdef", b"123", b"catcat"],
    "empty_bag": [],
    "only_empty_records": [b"", b"", b""],
    "empty_records": [b"", b"x", b"", b"", b"yz", b""],
    # Sizes around the zstd frame-header boundaries (255/256, 65791/65792) up to 1 MiB.
    "many_sizes": [
        _mixed(n) for n in (0, 1, 2, 7, 8, 9, 100, 255, 256, 257, 4095, 4096, 4097,
                            65791, 65792, 100_000, 1 << 20)
    ],
    "text": [b"record %d says %s" % (i, b"hello " * (i % 13)) for i in range(300)],
}

PLACEMENTS = ["TAIL", "SEPARATE"]


def bagz_enum(enum_type, name: str):
    return getattr(enum_type, name)


def sackli_compression(kind: str, level: int = 3, dictionary: bytes = b""):
    return {
        "auto": sackli.CompressionAutoDetect(),
        "none": sackli.CompressionNone(),
        "zstd": sackli.CompressionZstd(level=level, dictionary=dictionary),
    }[kind]


def bagz_compression(kind: str, level: int = 3, dictionary: bytes = b""):
    return {
        "auto": bagz.CompressionAutoDetect(),
        "none": bagz.CompressionNone(),
        "zstd": bagz.CompressionZstd(level=level, dictionary=dictionary.decode()),
    }[kind]


def write_sackli(path, records, placement="TAIL", compression=None) -> None:
    with sackli.Writer(
        path,
        limits_placement=placement,
        compression=compression or sackli.CompressionAutoDetect(),
    ) as writer:
        for record in records:
            writer.write(record)


def write_bagz(path, records, placement="TAIL", compression=None) -> None:
    options = bagz.Writer.Options(
        limits_placement=bagz_enum(bagz.LimitsPlacement, placement),
        compression=compression or bagz.CompressionAutoDetect(),
    )
    with bagz.Writer(str(path), options) as writer:
        for record in records:
            writer.write(record)


def read_bagz(spec, placement="TAIL", compression=None, layout="CONCATENATED") -> list[bytes]:
    options = bagz.Reader.Options(
        limits_placement=bagz_enum(bagz.LimitsPlacement, placement),
        compression=compression or bagz.CompressionAutoDetect(),
        sharding_layout=bagz_enum(bagz.ShardingLayout, layout),
    )
    reader = bagz.Reader(str(spec), options)
    records = reader.read()
    assert len(reader) == len(records)
    if records:  # bagz's random access agrees with its batch read
        indices = list(range(len(records) - 1, -1, -2))
        assert reader.read_indices(indices) == [records[i] for i in indices]
    return records


@pytest.mark.parametrize("records_name", sorted(RECORD_SETS))
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_sackli_writes_bagz_reads(tmp_path, placement, suffix, records_name):
    records = RECORD_SETS[records_name]
    path = tmp_path / ("out" + suffix)
    write_sackli(path, records, placement)
    assert (tmp_path / ("limits.out" + suffix)).exists() == (placement == "SEPARATE")
    assert read_bagz(path, placement) == records


@pytest.mark.parametrize("records_name", sorted(RECORD_SETS))
@pytest.mark.parametrize(
    "suffix, compression", [(".bag", "auto"), (".bag", "none"), (".bagz", "none")]
)
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_uncompressed_files_are_byte_identical(tmp_path, placement, suffix, compression, records_name):
    records = RECORD_SETS[records_name]
    (tmp_path / "s").mkdir()
    (tmp_path / "b").mkdir()
    name = "bag" + suffix
    write_sackli(tmp_path / "s" / name, records, placement, sackli_compression(compression))
    write_bagz(tmp_path / "b" / name, records, placement, bagz_compression(compression))
    files = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == files
    assert files == ([name, "limits." + name] if placement == "SEPARATE" else [name])
    for file in files:
        assert (tmp_path / "s" / file).read_bytes() == (tmp_path / "b" / file).read_bytes(), file


@pytest.mark.parametrize("records_name", sorted(RECORD_SETS))
@pytest.mark.parametrize(
    "suffix, compression, level",
    [(".bag", "auto", 0), (".bagz", "auto", 0), (".bagz", "zstd", 19), (".bag", "zstd", 19),
     (".bagz", "none", 0)],
)
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_bagz_writes_sackli_reads(tmp_path, placement, suffix, compression, level, records_name):
    records = RECORD_SETS[records_name]
    if compression == "zstd":
        records = records[:5]  # bagz at level 19 takes ~55 ms a record, whatever its size
    path = tmp_path / ("in" + suffix)
    write_bagz(path, records, placement, bagz_compression(compression, level))
    with sackli.Reader(
        path, limits_placement=placement, compression=sackli_compression(compression, level)
    ) as reader:
        assert len(reader) == len(records)
        assert reader.read() == records
        assert list(reader) == records
        assert [reader[i] for i in range(-1, -len(records) - 1, -1)] == records[::-1]


@pytest.mark.parametrize("level", [-5, 1, 3, 12, 19, 22])
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_sackli_zstd_levels_read_by_bagz(tmp_path, suffix, level):
    records = RECORD_SETS["text"] + RECORD_SETS["empty_records"]
    path = tmp_path / ("z" + suffix)
    write_sackli(path, records, compression=sackli.CompressionZstd(level=level))
    # bagz decodes .bagz by suffix; a .bag name needs the explicit choice.
    explicit = None if suffix == ".bagz" else bagz.CompressionZstd()
    assert read_bagz(path, compression=explicit) == records
    # The file really holds zstd frames: read raw, every non-empty record is one.
    raw = sackli.Reader(path, compression=sackli.CompressionNone()).read()
    assert all(frame.startswith(b"\x28\xb5\x2f\xfd") for frame in raw if frame)
    assert [bool(frame) for frame in raw] == [bool(r) for r in records]


DICTIONARY = b"record says hello hello hello " * 40


@pytest.mark.parametrize("writer", ["sackli", "bagz"])
def test_zstd_dictionary_both_ways(tmp_path, writer):
    records = RECORD_SETS["text"]
    path = tmp_path / "dict.bagz"
    if writer == "sackli":
        write_sackli(path, records, compression=sackli.CompressionZstd(level=5, dictionary=DICTIONARY))
    else:
        write_bagz(path, records, compression=bagz_compression("zstd", 5, DICTIONARY))
    assert read_bagz(path, compression=bagz_compression("zstd", 0, DICTIONARY)) == records
    assert sackli.Reader(path, compression=sackli.CompressionZstd(dictionary=DICTIONARY)).read() == records


@pytest.mark.parametrize("layout", ["CONCATENATED", "INTERLEAVED"])
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
@pytest.mark.parametrize("writer", ["sackli", "bagz"])
def test_shard_sets_both_ways(tmp_path, writer, suffix, layout):
    shards = 3
    records = RECORD_SETS["text"][:100]
    write = write_sackli if writer == "sackli" else write_bagz
    for s in range(shards):
        if layout == "INTERLEAVED":
            part = records[s::shards]
        else:
            part = records[s * 40:(s + 1) * 40]
        write(tmp_path / f"set-{s:05d}-of-{shards:05d}{suffix}", part)
    spec = tmp_path / f"set@{shards}{suffix}"
    assert read_bagz(spec, layout=layout) == records
    assert sackli.Reader(spec, sharding_layout=layout).read() == records


@pytest.mark.parametrize("name", ["readme.bag", "empty.bagz"])
def test_sackli_reproduces_golden_raw_files(tmp_path, golden_dir, golden_manifest, name):
    # Raw and empty outputs are deterministic: sackli writes bagz 0.3.8's bytes.
    path = tmp_path / name
    write_sackli(path, golden_manifest["files"][name]["expected"])
    assert path.read_bytes() == (golden_dir / name).read_bytes()
