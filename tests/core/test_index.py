"""Index and MultiIndex: lookups by record bytes, checked against dicts built
in Python, over plain bags, views, shards, empty bags and empty records."""

from __future__ import annotations

import pathlib
import random

import pytest

import sackli

# Duplicates, empty records, UTF-8 text and bytes that are not UTF-8.
RECORDS = (
    [b"k%d" % (i % 40) for i in range(200)]
    + [b"", "h\u00e9llo".encode(), b"\xff\xfe", b"", "\u4e16\u754c".encode(), b"k3", b"unique"]
)
ABSENT = [b"absent", b"k40", b"k", "h\u00e9llo!", b"\x00", b"k3 "]


def first_positions(records: list[bytes]) -> dict[bytes, int]:
    first: dict[bytes, int] = {}
    for i, record in enumerate(records):
        first.setdefault(record, i)
    return first


def all_positions(records: list[bytes]) -> dict[bytes, list[int]]:
    every: dict[bytes, list[int]] = {}
    for i, record in enumerate(records):
        every.setdefault(record, []).append(i)
    return every


def write(path, records) -> pathlib.Path:
    with sackli.Writer(path) as writer:
        writer.write_many(records)
    return pathlib.Path(path)


@pytest.fixture(scope="module", params=[".bag", ".bagz"])
def bag_path(request, tmp_path_factory):
    return write(tmp_path_factory.mktemp("index") / ("records" + request.param), RECORDS)


def check_index(reader: sackli.Reader, records: list[bytes]) -> None:
    """Index and MultiIndex of `reader` answer like dicts built from `records`."""
    first, every = first_positions(records), all_positions(records)
    index, multi = sackli.Index(reader), sackli.MultiIndex(reader)
    assert len(index) == len(multi) == len(first)
    for record in first:
        assert index[record] == first[record]
        assert index.get(record) == index.get(record, -1) == first[record]
        assert multi[record] == multi.get(record) == every[record]
        assert record in index and record in multi
    for record in ABSENT:
        assert record not in index and record not in multi
        assert index.get(record) is None and multi.get(record) is None
        assert index.get(record, -1) == -1 and multi.get(record, "none") == "none"
        with pytest.raises(KeyError):
            index[record]
        with pytest.raises(KeyError):
            multi[record]


def test_index_over_bag(bag_path):
    check_index(sackli.Reader(bag_path), RECORDS)


@pytest.mark.parametrize(
    "piece",
    [slice(None, None, -1), slice(150, None), slice(None, None, 3), slice(-10, 5, -7), slice(30, 30), slice(100, 250, 2)],
    ids=str,
)
def test_index_over_view(bag_path, piece):
    # Positions are relative to the view.
    check_index(sackli.Reader(bag_path)[piece], RECORDS[piece])
    check_index(sackli.Reader(bag_path)[piece][::-1], RECORDS[piece][::-1])


@pytest.mark.parametrize("layout", ["CONCATENATED", "INTERLEAVED"])
def test_index_over_shards(tmp_path, layout):
    shards = [RECORDS[s::3] for s in range(3)] if layout == "INTERLEAVED" else [RECORDS[:100], [], RECORDS[100:]]
    for s, part in enumerate(shards):
        write(tmp_path / f"set-{s:05d}-of-{len(shards):05d}.bagz", part)
    check_index(sackli.Reader(tmp_path / f"set@{len(shards)}.bagz", sharding_layout=layout), RECORDS)


def test_text_and_buffer_lookups(bag_path):
    index, multi = sackli.Index(sackli.Reader(bag_path)), sackli.MultiIndex(sackli.Reader(bag_path))
    hello = RECORDS.index("h\u00e9llo".encode())
    world = RECORDS.index("\u4e16\u754c".encode())
    assert index["h\u00e9llo"] == index["h\u00e9llo".encode()] == hello
    assert multi["\u4e16\u754c"] == [world]
    assert index["k3"] == 3 and multi["k3"] == [3, 43, 83, 123, 163, 205]
    assert index[bytearray(b"k7")] == 7 and index[memoryview(b"xk7")[1:]] == 7
    assert "k39" in index and "" in index and "absent" not in multi
    assert "h\u00e9llo".encode("latin-1") not in index  # not the UTF-8 bytes


@pytest.mark.parametrize("key", [1, None, 1.5, [b"k1"]], ids=repr)
def test_non_bytes_keys(bag_path, key):
    reader = sackli.Reader(bag_path)
    for index in (sackli.Index(reader), sackli.MultiIndex(reader)):
        assert key not in index
        with pytest.raises(TypeError):
            index[key]
        with pytest.raises(TypeError):
            index.get(key)


def test_empty_records_as_keys(tmp_path):
    records = [b"a", b"", b"", b"b", b""]
    reader = sackli.Reader(write(tmp_path / "blanks.bagz", records))
    index, multi = sackli.Index(reader), sackli.MultiIndex(reader)
    assert (index[b""], index[""], multi[b""], multi[""]) == (1, 1, [1, 2, 4], [1, 2, 4])
    assert len(index) == len(multi) == 3
    only_blank = sackli.Reader(write(tmp_path / "only.bag", [b""] * 4))
    assert sackli.Index(only_blank)[b""] == 0 and sackli.MultiIndex(only_blank)[b""] == [0, 1, 2, 3]
    assert len(sackli.Index(only_blank)) == 1
    # A view that skips the blanks does not find them.
    assert b"" not in sackli.Index(reader[::3])


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_empty_bag(tmp_path, suffix):
    reader = sackli.Reader(write(tmp_path / ("empty" + suffix), []))
    for index in (sackli.Index(reader), sackli.MultiIndex(reader), sackli.Index(sackli.Reader(reader.file_spec)[3:])):
        assert len(index) == 0
        assert b"" not in index and "x" not in index
        assert index.get(b"") is None and index.get(b"", 7) == 7
        with pytest.raises(KeyError):
            index[b""]


def test_large_index_matches_dict(tmp_path):
    rng = random.Random(50_000)
    records = [b"%d" % rng.randrange(20_000) * rng.randrange(1, 4) for _ in range(50_000)]
    reader = sackli.Reader(write(tmp_path / "large.bagz", records))
    first, every = first_positions(records), all_positions(records)
    index, multi = sackli.Index(reader), sackli.MultiIndex(reader)
    assert len(index) == len(multi) == len(first)
    assert {record: index[record] for record in first} == first
    assert {record: multi[record] for record in every} == every
    absent = [b"%d" % n for n in range(20_000, 20_500)] + [b"-1", b"x"]
    assert [index.get(record) for record in absent] == [None] * len(absent)
    assert not any(record in multi for record in absent)


def test_index_needs_an_open_reader(bag_path):
    with pytest.raises(TypeError):
        sackli.Index(RECORDS)
    with pytest.raises(TypeError):
        sackli.MultiIndex(str(bag_path))
    reader = sackli.Reader(bag_path)
    index = sackli.Index(reader)
    reader.close()
    assert index[b"unique"] == RECORDS.index(b"unique")  # the index keeps its own hold on the files
    for kind in (sackli.Index, sackli.MultiIndex):
        with pytest.raises(ValueError):
            kind(reader)


# --- How lookups are confirmed ---------------------------------------------------
#
# Records of .bag files on local disk are compared where they lie in the
# mapping; decoded records (.bagz) are kept up to max_memory_bytes, beyond
# which lookups read their candidate back from the bag. Every mode must
# answer exactly like a dict.


def test_bag_records_are_compared_in_place(tmp_path):
    reader = sackli.Reader(write(tmp_path / "plain.bag", RECORDS))
    index = sackli.Index(reader)
    assert index.memory_bytes == 0 and index.confirms_in_memory


def test_decoded_records_are_kept_up_to_the_budget(tmp_path):
    reader = sackli.Reader(write(tmp_path / "packed.bagz", RECORDS))
    distinct = set(RECORDS)
    index = sackli.Index(reader)
    assert index.memory_bytes == sum(map(len, distinct)) and index.confirms_in_memory
    small = sackli.MultiIndex(reader, max_memory_bytes=10)
    assert 0 < small.memory_bytes <= 10 and not small.confirms_in_memory
    none = sackli.Index(reader, max_memory_bytes=0)
    assert none.memory_bytes == 0 and not none.confirms_in_memory


@pytest.mark.parametrize("budget", [0, 10, 200, None], ids=["no memory", "10 B", "200 B", "default"])
def test_every_budget_answers_like_a_dict(tmp_path, budget):
    rng = random.Random(7)
    records = [b"%d" % rng.randrange(300) * rng.randrange(1, 30) for _ in range(3_000)]
    reader = sackli.Reader(write(tmp_path / "budget.bagz", records))
    kwargs = {} if budget is None else {"max_memory_bytes": budget}
    first, every = first_positions(records), all_positions(records)
    index, multi = sackli.Index(reader, **kwargs), sackli.MultiIndex(reader, **kwargs)
    assert len(index) == len(multi) == len(first)
    assert {record: index[record] for record in first} == first
    assert {record: multi[record] for record in every} == every
    for record in (b"-1", b"x", b"0" * 31, b""):
        assert record not in index and multi.get(record) is None


@pytest.mark.parametrize("suffix, budget", [(".bag", 1 << 30), (".bagz", 1 << 30), (".bagz", 0)])
def test_colliding_hashes_never_mix_records(tmp_path, suffix, budget):
    # hash_mask=0 gives every record the same hash: each distinct record is
    # told apart only by comparing bytes (in place, kept, or read back).
    records = [b"r%d" % (i % 97) for i in range(400)] + [b"", b"r1 ", b"r10"]
    reader = sackli.Reader(write(tmp_path / ("collide" + suffix), records))
    first, every = first_positions(records), all_positions(records)
    index = sackli._engine.testing.record_index_with_hash_mask(reader._core, False, budget, 0)
    multi = sackli._engine.testing.record_index_with_hash_mask(reader._core, True, budget, 0)
    assert len(index) == len(multi) == len(first)
    assert {record: index[record] for record in first} == first
    assert {record: multi[record] for record in every} == every
    assert b"r97" not in index and b"r1  " not in multi


@pytest.mark.parametrize("budget, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bad_memory_budget(bag_path, budget, error):
    with pytest.raises(error):
        sackli.Index(sackli.Reader(bag_path), max_memory_bytes=budget)


def test_corrupt_record_while_building_names_the_file(tmp_path):
    path = write(tmp_path / "broken.bagz", [b"x" * 100] * 20)
    data = bytearray(path.read_bytes())
    data[5:15] = b"\xff" * 10  # inside the first zstd frame
    path.write_bytes(bytes(data))
    with pytest.raises(sackli.CorruptionError, match="broken.bagz"):
        sackli.Index(sackli.Reader(path))
