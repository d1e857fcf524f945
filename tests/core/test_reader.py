"""The Reader API: the Sequence protocol measured against a Python list, batch
and iterator reads, options, file specs, life cycle, cache policies, large
records and pickling (also into worker processes)."""

from __future__ import annotations

import itertools
import multiprocessing
import operator
import os
import pathlib
import pickle
import random

import numpy as np
import pytest

import sackli

# 300 records with duplicates: every non-empty value appears 2 or 3 times and
# b"" appears 100 times.
RECORDS = [(b"%d;" % (i % 37)) * (i % 3) for i in range(300)]
N = len(RECORDS)

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def write(path, records, **options) -> pathlib.Path:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)
    return pathlib.Path(path)


@pytest.fixture(scope="module", params=[".bag", ".bagz"])
def bag_path(request, tmp_path_factory) -> pathlib.Path:
    return write(tmp_path_factory.mktemp("bag") / ("records" + request.param), RECORDS)


@pytest.fixture
def reader(bag_path):
    with sackli.Reader(bag_path) as opened:
        yield opened


# --- Sequence protocol -------------------------------------------------------


def test_len_and_indexing(reader):
    assert len(reader) == N
    assert [reader[i] for i in range(N)] == RECORDS
    assert [reader[i] for i in range(-1, -N - 1, -1)] == RECORDS[::-1]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda t: t.__name__)
def test_numpy_integer_indices(reader, dtype):
    for value in (0, 5, 127):
        assert reader[dtype(value)] == RECORDS[value]
    if np.issubdtype(dtype, np.signedinteger):
        for value in (-1, -5, -128):
            assert reader[dtype(value)] == RECORDS[value]


@pytest.mark.parametrize("index", [N, N + 1, -N - 1, 2**31, 2**63, 2**64, 2**70, -(2**70), np.int64(N), np.uint64(2**64 - 1)])
def test_index_out_of_range(reader, index):
    with pytest.raises(IndexError):
        reader[index]


@pytest.mark.parametrize("index", ["1", 1.0, None, b"1", np.float64(1.0), (1,)])
def test_non_integer_index(reader, index):
    with pytest.raises(TypeError):
        reader[index]


BOUNDS = [None, -400, -300, -299, -7, -1, 0, 1, 5, 150, 299, 300, 400]
STEPS = [None, 1, 2, 3, 7, 299, 300, 1000, -1, -2, -5, -299, -300, -1000]


@pytest.mark.parametrize("step", STEPS)
def test_slicing_matches_list(reader, step):
    for start, stop in itertools.product(BOUNDS, BOUNDS):
        piece = slice(start, stop, step)
        expected = RECORDS[piece]
        view = reader[piece]
        assert isinstance(view, sackli.Reader)
        assert len(view) == len(expected), piece
        assert view.read() == expected, piece
        if expected:
            assert (view[0], view[-1]) == (expected[0], expected[-1]), piece


def test_slice_step_zero(reader):
    with pytest.raises(ValueError):
        reader[::0]


NESTED = [
    (slice(None, None, -1), slice(None, None, -1)),
    (slice(10, 250, 3), slice(None, None, -2)),
    (slice(250, 10, -3), slice(5, -5, 4)),
    (slice(-1, None, -7), slice(-3, 2, -1)),
    (slice(None, None, 5), slice(100, None)),
    (slice(100, 0, -1), slice(200, None, -1)),
    (slice(3, 4), slice(None, None, -1)),
    (slice(50, 50), slice(None, None, -1)),
]


@pytest.mark.parametrize("outer, inner", NESTED, ids=str)
def test_slices_of_slices(reader, outer, inner):
    expected = RECORDS[outer][inner]
    view = reader[outer][inner]
    assert len(view) == len(expected)
    assert view.read() == expected
    assert list(view) == expected
    assert list(reversed(view)) == expected[::-1]
    assert view[::-1][::-1].read() == expected
    assert view[1::2][::-1].read() == expected[1::2][::-1]


def test_view_behaves_like_a_list(reader):
    expected = RECORDS[250:10:-3]
    view = reader[250:10:-3]
    assert [view[i] for i in range(-len(expected), len(expected))] == expected + expected
    for i in (len(expected), -len(expected) - 1):
        with pytest.raises(IndexError):
            view[i]
    assert view.read_range(2, 5) == expected[2:7]
    assert list(view.read_range_iter(3, 20, read_ahead=4)) == expected[3:23]
    assert view.read_indices([-1, 0, 4, 4]) == [expected[-1], expected[0], expected[4], expected[4]]
    assert list(view.read_indices_iter(iter([3, -2, 3]))) == [expected[3], expected[-2], expected[3]]
    with pytest.raises(IndexError):
        view.read_indices([len(expected)])
    value = expected[7]
    assert view.index(value) == expected.index(value)
    assert view.index(value, -60, -1) == expected.index(value, -60, -1)
    assert view.count(value) == expected.count(value)
    assert (value in view) and (b"absent" not in view)


def test_reversed_is_a_reader_view_as_in_bagz_and_saeckli(reader):
    backwards = reversed(reader)
    assert isinstance(backwards, sackli.Reader)
    assert len(backwards) == len(RECORDS)
    assert backwards[0] == RECORDS[-1] and backwards[-1] == RECORDS[0]
    assert list(backwards) == RECORDS[::-1]
    assert list(reversed(backwards)) == RECORDS
    assert list(backwards[1:3]) == RECORDS[-2:-4:-1]


def test_reversed_and_iter(reader):
    backwards = iter(reversed(reader))
    assert next(backwards) == RECORDS[-1]
    assert list(backwards) == RECORDS[-2::-1]
    forwards = iter(reader)
    assert [next(forwards) for _ in range(3)] == RECORDS[:3]
    assert list(forwards) == RECORDS[3:]
    assert list(forwards) == []
    # Two iterators are independent.
    a, b = iter(reader), iter(reader)
    assert [next(a), next(a), next(b)] == [RECORDS[0], RECORDS[1], RECORDS[0]]


@pytest.mark.parametrize(
    "value",
    [b"", b"1;", b"1;1;", b"36;36;", b"absent", bytearray(b"2;"), memoryview(b"5;5;"), "1;", 1, None],
    ids=lambda v: f"{type(v).__name__}-{bytes(v) if isinstance(v, memoryview) else v!r}",
)
def test_contains_and_count_match_list(reader, value):
    assert (value in reader) == (value in RECORDS)
    assert reader.count(value) == RECORDS.count(value)


@pytest.mark.parametrize("value", [b"", b"1;", b"4;4;", b"36;36;", b"absent", bytearray(b"7;")], ids=repr)
def test_index_with_start_stop_matches_list(reader, value):
    bounds = [0, 1, 2, 40, 150, 298, 299, 300, 1000, -1, -3, -150, -300, -1000]
    for start, stop in [(s, None) for s in bounds] + list(itertools.product(bounds, bounds)):
        args = (start,) if stop is None else (start, stop)
        try:
            expected = RECORDS.index(value, *args)
        except ValueError:
            with pytest.raises(ValueError):
                reader.index(value, *args)
        else:
            assert reader.index(value, *args) == expected, args
    with pytest.raises(ValueError):
        reader.index("1;")


# --- Batch and iterator reads ----------------------------------------------


def test_read(reader):
    assert reader.read() == RECORDS


@pytest.mark.parametrize("start, count", [(0, 0), (0, N), (5, 17), (N - 1, 1), (N, 0), (123, 0)])
def test_read_range(reader, start, count):
    expected = RECORDS[start:start + count]
    assert reader.read_range(start, count) == expected
    assert reader.read_range(np.int64(start), np.uint32(count)) == expected
    for read_ahead in (None, 1, 7, 10_000):
        assert list(reader.read_range_iter(start, count, read_ahead=read_ahead)) == expected


@pytest.mark.parametrize("start, count", [(-1, 2), (N - 1, 2), (0, N + 1), (N, 1), (N + 5, 0), (5, -1), (2**70, 1)])
def test_read_range_out_of_range(reader, start, count):
    with pytest.raises(IndexError):
        reader.read_range(start, count)
    with pytest.raises(IndexError):
        reader.read_range_iter(start, count)


INDICES = [7, 0, 299, 7, -1, -300, 150, 0, 7]


@pytest.mark.parametrize(
    "indices",
    [INDICES, tuple(INDICES), [], range(10, 200, 7), range(299, -1, -13)],
    ids=["list", "tuple", "empty", "range", "range_backwards"],
)
def test_read_indices_sequences(reader, indices):
    assert reader.read_indices(indices) == [RECORDS[i] for i in indices]


def test_read_indices_repeats_share_one_object(reader):
    # Records are immutable bytes: an index asked for twice is read once.
    indices = [7, 3, 7, -293, 3, 299, 7]
    out = reader.read_indices(indices)
    assert out == [RECORDS[i] for i in indices]
    assert out[0] is out[2] is out[3] is out[6] and out[1] is out[4]
    assert out[0] is not out[1]
    streamed = list(reader.read_indices_iter(indices, read_ahead=len(indices)))
    assert streamed == out and streamed[0] is streamed[2]


@pytest.mark.parametrize("piece", [slice(None), slice(10, 2, -3), slice(None, None, -1), slice(-5, None), slice(7, 7)], ids=str)
def test_read_indices_slice(reader, piece):
    assert reader.read_indices(piece) == RECORDS[piece]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda t: t.__name__)
def test_read_indices_numpy(reader, dtype):
    values = [0, 5, 127, 5, 64]
    if np.issubdtype(dtype, np.signedinteger):
        values += [-1, -128, -5]
    array = np.array(values, dtype=dtype)
    assert reader.read_indices(array) == [RECORDS[v] for v in values]
    # Non-contiguous arrays too.
    assert reader.read_indices(array[::-2]) == [RECORDS[v] for v in values[::-2]]


@pytest.mark.parametrize(
    "indices, error",
    [
        ([0, N], IndexError),
        ([-N - 1], IndexError),
        ([2**70], IndexError),
        (np.array([N], dtype=np.uint16), IndexError),
        (np.array([2**64 - 1], dtype=np.uint64), IndexError),
        ([1.5], TypeError),
        (["1"], TypeError),
        (np.array([1.0]), TypeError),
        (np.array([[1, 2]]), ValueError),
    ],
    ids=str,
)
def test_read_indices_errors(reader, indices, error):
    with pytest.raises(error):
        reader.read_indices(indices)


READ_AHEADS = pytest.mark.parametrize("read_ahead", [None, 1, 3, 64])


@READ_AHEADS
def test_read_indices_iter_list_and_generator(reader, read_ahead):
    indices = [random.Random(1).randrange(-N, N) for _ in range(700)]
    expected = [RECORDS[i] for i in indices]
    assert list(reader.read_indices_iter(indices, read_ahead=read_ahead)) == expected
    assert list(reader.read_indices_iter((i for i in indices), read_ahead=read_ahead)) == expected
    assert list(reader.read_indices_iter(iter([]), read_ahead=read_ahead)) == []


@READ_AHEADS
def test_read_indices_iter_infinite(reader, read_ahead):
    endless = (i % N for i in itertools.count())
    got = list(itertools.islice(reader.read_indices_iter(endless, read_ahead=read_ahead), 1000))
    assert got == [RECORDS[i % N] for i in range(1000)]


class Boom(Exception):
    pass


@READ_AHEADS
@pytest.mark.parametrize("k", [0, 1, 15, 16, 17, 100])
def test_read_indices_iter_source_raises(reader, k, read_ahead):
    def source():
        for i in range(k):
            yield (i * 7) % N
        raise Boom(f"after {k}")

    records = reader.read_indices_iter(source(), read_ahead=read_ahead)
    assert [next(records) for _ in range(k)] == [RECORDS[(i * 7) % N] for i in range(k)]
    with pytest.raises(Boom, match=f"after {k}$"):
        next(records)


@READ_AHEADS
@pytest.mark.parametrize("position", [0, 1, 5, 40])
@pytest.mark.parametrize("bad, error", [(N, IndexError), (-N - 1, IndexError), (2**70, IndexError), ("3", TypeError)])
def test_read_indices_iter_bad_index(reader, position, bad, error, read_ahead):
    indices = list(range(position)) + [bad] + list(range(10))
    records = reader.read_indices_iter(indices, read_ahead=read_ahead)
    assert [next(records) for _ in range(position)] == RECORDS[:position]
    with pytest.raises(error):
        next(records)


def test_approximate_bytes_per_record(bag_path):
    reader = sackli.Reader(bag_path)
    records_section = os.path.getsize(bag_path) - 8 * N
    assert reader.approximate_bytes_per_record() == records_section / N
    # A view reports the whole bag's figure.
    assert reader[::7].approximate_bytes_per_record() == records_section / N
    if bag_path.suffix == ".bag":
        assert records_section == sum(map(len, RECORDS))


# --- Properties, life cycle, options ----------------------------------------


def test_properties(bag_path):
    reader = sackli.Reader(bag_path)
    assert reader.options == sackli.Reader.Options()
    assert reader.file_spec == str(bag_path)
    assert reader[::2].file_spec == str(bag_path)
    assert reader.closed is False
    reader.close()
    assert reader.closed is True
    reader.close()  # idempotent
    assert reader.closed is True


CLOSED_USES = {
    "len": len,
    "getitem": lambda r: r[0],
    "slice": lambda r: r[1:],
    "iter": lambda r: next(iter(r)),
    "reversed": lambda r: next(reversed(r)),
    "contains": lambda r: b"1;" in r,
    "index": lambda r: r.index(b"1;"),
    "count": lambda r: r.count(b"1;"),
    "read": lambda r: r.read(),
    "read_range": lambda r: r.read_range(0, 1),
    "read_range_iter": lambda r: list(r.read_range_iter(0, 1)),
    "read_indices": lambda r: r.read_indices([0]),
    "read_indices_iter": lambda r: list(r.read_indices_iter([0])),
    "approximate_bytes_per_record": lambda r: r.approximate_bytes_per_record(),
    "pickle": pickle.dumps,
}


@pytest.mark.parametrize("use", sorted(CLOSED_USES))
def test_use_after_close(bag_path, use):
    reader = sackli.Reader(bag_path)
    view = reader[::-1]
    reader.close()
    with pytest.raises(ValueError):
        CLOSED_USES[use](reader)
    # A view of a closed reader stays usable, and closing it leaves others alone.
    assert view.read() == RECORDS[::-1]
    other = view[::-1]
    view.close()
    assert other.read() == RECORDS
    with pytest.raises(ValueError):
        CLOSED_USES[use](view)


def test_context_manager_and_repr(bag_path):
    spec = str(bag_path)
    with sackli.Reader(spec) as reader:
        assert isinstance(reader, sackli.Reader)
        assert repr(spec) in repr(reader)
        assert f"{N} records" in repr(reader)
        assert repr(spec) in repr(reader[::2])
        assert f"{N // 2} records" in repr(reader[::2])
    assert reader.closed
    assert repr(spec) in repr(reader)
    assert "closed" in repr(reader)


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("limits_storage", sackli.LimitsStorage.IN_MEMORY, sackli.LimitsStorage.IN_MEMORY),
        ("limits_storage", "IN_MEMORY", sackli.LimitsStorage.IN_MEMORY),
        ("max_parallelism", 1, 1),
        ("max_parallelism", 256, 256),
        ("read_ahead_bytes", 0, 0),
        ("read_ahead_bytes", 1, 1),
        ("access_pattern", "SEQUENTIAL", sackli.AccessPattern.SEQUENTIAL),
        ("cache_policy", sackli.CachePolicy.DROP_AFTER_READ, sackli.CachePolicy.DROP_AFTER_READ),
        ("sharding_layout", "INTERLEAVED", sackli.ShardingLayout.INTERLEAVED),
        ("compression", sackli.CompressionAutoDetect(), sackli.CompressionAutoDetect()),
    ],
)
def test_option_overrides(bag_path, field, value, expected):
    reader = sackli.Reader(bag_path, **{field: value})
    assert getattr(reader.options, field) == expected
    assert type(getattr(reader.options, field)) is type(expected)
    assert reader.read() == RECORDS
    assert list(reader) == RECORDS
    # Overrides apply on top of an options object.
    base = sackli.Reader.Options(limits_storage=sackli.LimitsStorage.IN_MEMORY, max_parallelism=3)
    reader = sackli.Reader(bag_path, base, **{field: value})
    assert getattr(reader.options, field) == expected
    untouched = {"limits_storage", "max_parallelism"} - {field}
    for name in untouched:
        assert getattr(reader.options, name) == getattr(base, name)
    assert reader.read() == RECORDS


@pytest.mark.parametrize(
    "overrides, error",
    [
        ({"no_such_option": 1}, TypeError),
        ({"limits_placemnt": "TAIL"}, TypeError),
        ({"max_parallelism": 0}, ValueError),
        ({"max_parallelism": 257}, ValueError),
        ({"max_parallelism": "2"}, TypeError),
        ({"max_parallelism": True}, TypeError),
        ({"max_parallelism": 2.0}, TypeError),
        ({"read_ahead_bytes": -1}, ValueError),
        ({"limits_placement": "SIDEWAYS"}, TypeError),
        ({"sharding_layout": None}, TypeError),
        ({"compression": "zstd"}, TypeError),
        ({"compression": sackli.CompressionZstd}, TypeError),
        ({"options": {"max_parallelism": 1}}, TypeError),
        ({"options": sackli.Writer.Options()}, TypeError),
    ],
    ids=str,
)
def test_bad_options(bag_path, overrides, error):
    with pytest.raises(error):
        sackli.Reader(bag_path, **overrides)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"level": 23}, ValueError),
        ({"level": -(1 << 17) - 1}, ValueError),
        ({"level": "3"}, TypeError),
        ({"level": 3.0}, TypeError),
        ({"dictionary": 5}, TypeError),
        ({"dictionary": [1, 2]}, TypeError),
    ],
    ids=str,
)
def test_bad_compression_values(kwargs, error):
    with pytest.raises(error):
        sackli.CompressionZstd(**kwargs)


# --- Paths and file specs ----------------------------------------------------


def test_path_forms(bag_path):
    for spec in (bag_path, str(bag_path), "posix:" + str(bag_path), pathlib.PurePosixPath(bag_path),
                 pathlib.Path("/posix:" + str(bag_path)), pathlib.Path("/posix:") / bag_path.relative_to("/")):
        assert sackli.Reader(spec).read() == RECORDS
    assert sackli.Reader(bag_path).file_spec == str(bag_path)
    with pytest.raises(TypeError):
        sackli.Reader(os.fsencode(bag_path))
    with pytest.raises(TypeError):
        sackli.Reader(42)


def test_relative_path(bag_path, monkeypatch):
    monkeypatch.chdir(bag_path.parent)
    assert sackli.Reader(bag_path.name).read() == RECORDS


SHARD_SIZES = [4, 0, 7]
SHARD_RECORDS = [[b"s%d-%d" % (s, j) for j in range(size)] for s, size in enumerate(SHARD_SIZES)]


@pytest.fixture
def shard_dir(tmp_path) -> pathlib.Path:
    for s, records in enumerate(SHARD_RECORDS):
        write(tmp_path / f"set-{s:05d}-of-00003.bagz", records)
    write(tmp_path / "single.bag", [b"one", b"two"])
    return tmp_path


ALL_SHARDS = [r for records in SHARD_RECORDS for r in records]


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("set@3.bagz", ALL_SHARDS),
        ("set@*.bagz", ALL_SHARDS),
        ("set-00002-of-00003.bagz,set-00000-of-00003.bagz", SHARD_RECORDS[2] + SHARD_RECORDS[0]),
        ("single.bag,set@3.bagz,single.bag", [b"one", b"two"] + ALL_SHARDS + [b"one", b"two"]),
        ("posix:set@*.bagz,posix:single.bag", ALL_SHARDS + [b"one", b"two"]),
        ("set-00001-of-00003.bagz", []),
    ],
)
def test_shard_specs(shard_dir, spec, expected):
    full = ",".join(
        (("posix:" + str(shard_dir / e[len("posix:"):])) if e.startswith("posix:") else str(shard_dir / e))
        for e in spec.split(",")
    )
    reader = sackli.Reader(full)
    assert reader.read() == expected
    assert [reader[i] for i in range(-len(expected), 0)] == expected
    assert reader.file_spec == full


@pytest.mark.parametrize("spec", ["set@3.bagz", "set@*.bagz"])
def test_missing_shard(shard_dir, spec):
    missing = shard_dir / "set-00001-of-00003.bagz"
    missing.unlink()
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(shard_dir / spec)
    assert caught.value.filename == str(missing)
    assert str(missing) in str(caught.value)


def test_missing_files_are_named(tmp_path):
    missing = tmp_path / "nope.bag"
    with pytest.raises(FileNotFoundError, match="nope.bag"):
        sackli.Reader(missing)
    with pytest.raises(FileNotFoundError, match="nope"):
        sackli.Reader(tmp_path / "nope@*.bag")
    with pytest.raises(FileNotFoundError, match="nope-00000-of-00002.bag"):
        sackli.Reader(tmp_path / "nope@2.bag")
    # SEPARATE placement without the limits file.
    write(tmp_path / "recs.bag", [b"a"], limits_placement="SEPARATE")
    (tmp_path / "limits.recs.bag").unlink()
    with pytest.raises(FileNotFoundError, match="limits.recs.bag"):
        sackli.Reader(tmp_path / "recs.bag", limits_placement="SEPARATE")


def test_two_shard_sets_for_star(shard_dir):
    write(shard_dir / "set-00000-of-00001.bagz", [b"other"])
    with pytest.raises(ValueError):
        sackli.Reader(shard_dir / "set@*.bagz")
    # Naming the count picks one set.
    assert sackli.Reader(shard_dir / "set@1.bagz").read() == [b"other"]
    assert sackli.Reader(shard_dir / "set@3.bagz").read() == ALL_SHARDS


# --- Special contents --------------------------------------------------------


@pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_empty_bag(tmp_path, suffix, placement):
    path = write(tmp_path / ("empty" + suffix), [], limits_placement=placement)
    assert path.stat().st_size == 0
    reader = sackli.Reader(path, limits_placement=placement)
    assert len(reader) == 0
    assert reader.read() == list(reader) == list(reversed(reader)) == []
    assert reader.read_indices([]) == reader.read_range(0, 0) == []
    assert list(reader.read_indices_iter([])) == []
    assert len(reader[::-1]) == 0 and reader[5:-5].read() == []
    assert reader.approximate_bytes_per_record() == 0.0
    assert (b"" in reader, reader.count(b"")) == (False, 0)
    for bad in (0, -1):
        with pytest.raises(IndexError):
            reader[bad]
    with pytest.raises(IndexError):
        reader.read_indices([0])
    with pytest.raises(ValueError):
        reader.index(b"")


@pytest.mark.parametrize("records", [[b""], [b"", b""], [b"", b"", b"a", b"", b""], [b"a", b""]], ids=str)
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_empty_records(tmp_path, suffix, records):
    path = write(tmp_path / ("blank" + suffix), records)
    reader = sackli.Reader(path)
    assert reader.read() == list(reader) == [reader[i] for i in range(len(records))] == records
    assert reader.read_indices([-1, 0, -1]) == [records[-1], records[0], records[-1]]
    assert reader.count(b"") == records.count(b"")
    if records == [b""]:
        assert path.read_bytes() == bytes(8)


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_48_mib_record(tmp_path, suffix):
    big = np.random.default_rng(48).integers(0, 256, 48 << 20, dtype=np.uint8).tobytes()
    big = big[: 24 << 20] + b"\x00" * (24 << 20) + b"tail"
    records = [b"first", big, b"", b"last"]
    path = write(tmp_path / ("big" + suffix), records)
    reader = sackli.Reader(path)
    assert len(reader) == 4
    assert reader[1] == big
    assert reader.read_indices([3, 1, 0]) == [b"last", big, b"first"]
    assert list(reader) == records


# --- Cache policies and access patterns -------------------------------------


@pytest.fixture(scope="module", params=[".bag", ".bagz"])
def unaligned_bag(request, tmp_path_factory):
    # Record sizes that straddle 4 KiB blocks at every phase, ~1.5 MiB in all,
    # written under /tmp (a file system that accepts O_DIRECT).
    rng = random.Random(7)
    records = [rng.randbytes(rng.choice([0, 1, 7, 511, 4095, 4096, 4097, rng.randrange(20000)])) for _ in range(300)]
    path = write(tmp_path_factory.mktemp("unaligned") / ("u" + request.param), records)
    return path, records


@pytest.mark.parametrize("access", ["SYSTEM", "RANDOM", "SEQUENTIAL"])
@pytest.mark.parametrize("cache", ["SYSTEM", "DROP_AFTER_READ", "DIRECT_IO"])
def test_cache_policies_and_access_patterns(unaligned_bag, cache, access):
    path, records = unaligned_bag
    assert str(path).startswith("/tmp/")
    for storage in ("ON_DISK", "IN_MEMORY"):
        reader = sackli.Reader(path, cache_policy=cache, access_pattern=access, limits_storage=storage)
        assert reader.read() == records
        assert list(reader) == records
        assert list(reversed(reader)) == records[::-1]
        indices = [random.Random(3).randrange(-len(records), len(records)) for _ in range(500)]
        assert reader.read_indices(indices) == [records[i] for i in indices]
        assert [reader[i] for i in indices[:50]] == [records[i] for i in indices[:50]]
        assert reader[7:200:3].read() == records[7:200:3]


# --- Pickling ------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        sackli.Reader.Options(),
        sackli.Reader.Options(
            sharding_layout="INTERLEAVED", limits_placement="SEPARATE", limits_storage="IN_MEMORY",
            compression=sackli.CompressionZstd(level=9, dictionary=b"dict"), max_parallelism=2,
            access_pattern="RANDOM", cache_policy="DIRECT_IO", read_ahead_bytes=0,
        ),
        sackli.Writer.Options(limits_placement="SEPARATE", compression=sackli.CompressionNone()),
        sackli.CompressionAutoDetect(),
        sackli.CompressionNone(),
        sackli.CompressionZstd(),
        sackli.CompressionZstd(level=-7, dictionary="text dictionary"),
    ],
    ids=repr,
)
def test_pickle_values(value):
    copy = pickle.loads(pickle.dumps(value))
    assert copy == value
    assert type(copy) is type(value)
    assert hash(copy) == hash(value)


@pytest.mark.parametrize("piece", [slice(None), slice(None, None, -1), slice(250, 10, -3), slice(5, 5), slice(-3, None)], ids=str)
def test_pickle_reader_and_views(bag_path, piece):
    reader = sackli.Reader(bag_path, limits_storage="IN_MEMORY", max_parallelism=2)
    view = reader[piece]
    copy = pickle.loads(pickle.dumps(view))
    assert isinstance(copy, sackli.Reader)
    assert copy.read() == RECORDS[piece]
    assert copy.options == reader.options
    assert copy.file_spec == reader.file_spec
    assert repr(copy) == repr(view)
    assert copy[::-1].read() == RECORDS[piece][::-1]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pickled_reader_in_pool(bag_path, method):
    reader = sackli.Reader(bag_path)
    assert reader.read() == RECORDS  # the parent's thread pool is running before a fork
    with multiprocessing.get_context(method).Pool(2) as pool:
        assert pool.map(list, [reader, reader[::-3], reader[10:20]]) == [RECORDS, RECORDS[::-3], RECORDS[10:20]]
        got = pool.starmap(sackli.Reader.read_indices, [(reader, [5, -1, 5]), (reader[::-1], list(range(0, N, 50)))])
        assert got == [[RECORDS[5], RECORDS[-1], RECORDS[5]], RECORDS[::-1][::50]]
        assert pool.starmap(operator.getitem, [(reader, i) for i in range(-5, 5)]) == [RECORDS[i] for i in range(-5, 5)]


def test_non_regular_files_are_refused_without_blocking(tmp_path):
    """A FIFO would block open() until a writer came; sackli refuses it at once."""
    fifo = tmp_path / "pipe.bag"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file") as raised:
        sackli.Reader(fifo)
    assert str(fifo) in str(raised.value)
    with pytest.raises(ValueError, match="not a regular file"):
        sackli.Reader("/dev/null")
