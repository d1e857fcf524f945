"""Property tests (hypothesis): any records written with any placement and
compression read back identically through every read path; shards read as
CONCATENATED or INTERLEAVED give the records they were split from; views and
batch reads behave exactly like slicing and indexing a list.

Every example writes its own files in a fresh temporary folder."""

from __future__ import annotations

import contextlib
import pathlib
import random
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sackli

SETTINGS = settings(max_examples=50, deadline=None)


def _sized_record(size: int, seed: int, compressible: bool) -> bytes:
    if compressible:
        return (b"%d," % seed * (size // 2 + 1))[:size]
    return random.Random(seed).randbytes(size)


# Arbitrary short binaries, and records of up to 5000 bytes (random or
# compressible) built from a size and a seed, so examples stay cheap.
RECORD = st.one_of(
    st.binary(max_size=48),
    st.builds(_sized_record, st.integers(0, 5000), st.integers(0, 2**32), st.booleans()),
)
# Hypothesis favours short lists; half the examples are long ones, which span
# several read-ahead batches.
RECORDS = st.one_of(st.lists(RECORD, max_size=20), st.lists(RECORD, min_size=100, max_size=200))
SUFFIX = st.sampled_from([".bag", ".bagz"])
PLACEMENT = st.sampled_from(["TAIL", "SEPARATE"])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """folders() -> a context manager giving a new empty folder per example."""
    base = tmp_path_factory.mktemp("examples")

    @contextlib.contextmanager
    def new_folder():
        with tempfile.TemporaryDirectory(dir=base) as folder:
            yield pathlib.Path(folder)

    return new_folder


def write(path: pathlib.Path, records: list[bytes], method: str = "write_many", **options) -> pathlib.Path:
    with sackli.Writer(path, **options) as writer:
        if method == "write_many":
            writer.write_many(records)
        else:
            for record in records:
                writer.write(record)
    return path


def assert_reads_back(reader: sackli.Reader, records: list[bytes]) -> None:
    """Every read path of `reader` gives `records`."""
    n = len(records)
    assert len(reader) == n
    assert [reader[i] for i in range(n)] == records
    assert [reader[i] for i in range(-n, 0)] == records
    assert list(reader) == records
    assert list(reversed(reader)) == records[::-1]
    assert reader.read() == records
    assert reader.read_range(0, n) == records
    assert list(reader.read_range_iter(0, n, read_ahead=3)) == records
    assert reader.read_indices(range(n)) == records
    assert reader.read_indices(list(range(n - 1, -1, -1))) == records[::-1]
    assert list(reader.read_indices_iter(iter(range(n)), read_ahead=5)) == records
    assert reader[::-1].read() == records[::-1]


COMPRESSIONS = {
    "auto": sackli.CompressionAutoDetect(),
    "none": sackli.CompressionNone(),
    "zstd": sackli.CompressionZstd(level=1),
}


@SETTINGS
@given(
    records=RECORDS,
    suffix=SUFFIX,
    placement=PLACEMENT,
    compression=st.sampled_from(sorted(COMPRESSIONS)),
    method=st.sampled_from(["write", "write_many"]),
    storage=st.sampled_from(["ON_DISK", "IN_MEMORY"]),
    cache=st.sampled_from(["SYSTEM", "DROP_AFTER_READ"]),
)
def test_any_records_read_back(folders, records, suffix, placement, compression, method, storage, cache):
    with folders() as folder:
        path = write(folder / ("bag" + suffix), records, method,
                     limits_placement=placement, compression=COMPRESSIONS[compression])
        with sackli.Reader(path, limits_placement=placement, compression=COMPRESSIONS[compression],
                           limits_storage=storage, cache_policy=cache) as reader:
            assert_reads_back(reader, records)


@st.composite
def shard_splits(draw, max_shards: int = 6):
    """(records, [shard 0 records, shard 1 records, ...]); shards may be empty."""
    records = draw(RECORDS)
    count = draw(st.integers(1, max_shards))
    cuts = sorted(draw(st.lists(st.integers(0, len(records)), min_size=count - 1, max_size=count - 1)))
    bounds = [0, *cuts, len(records)]
    return records, [records[bounds[s]:bounds[s + 1]] for s in range(count)]


@SETTINGS
@given(split=shard_splits(), suffixes=st.lists(SUFFIX, min_size=6, max_size=6), placement=PLACEMENT)
def test_concatenated_shards(folders, split, suffixes, placement):
    records, shards = split
    count = len(shards)
    with folders() as folder:
        # Each shard has its own suffix, so compression is detected per file.
        paths = [
            write(folder / f"data-{s:05d}-of-{count:05d}{suffixes[s]}", shard, limits_placement=placement)
            for s, shard in enumerate(shards)
        ]
        specs = [",".join(map(str, paths))]
        if len(set(suffixes[:count])) == 1:
            specs += [f"{folder}/data@{count}{suffixes[0]}", f"{folder}/data@*{suffixes[0]}"]
        for spec in specs:
            reader = sackli.Reader(spec, limits_placement=placement)
            assert reader.read() == records, spec
            assert [reader[i] for i in range(len(records))] == records, spec
            assert list(reader.read_indices_iter(range(len(records) - 1, -1, -1))) == records[::-1], spec


@SETTINGS
@given(records=RECORDS, count=st.integers(1, 6), suffix=SUFFIX, placement=PLACEMENT)
def test_interleaved_shards(folders, records, count, suffix, placement):
    # Round-robin writing gives exactly the shard sizes INTERLEAVED accepts
    # (non-increasing, within 1 of shard 0; all empty when there are no records).
    with folders() as folder:
        for s in range(count):
            write(folder / f"inter-{s:05d}-of-{count:05d}{suffix}", records[s::count], limits_placement=placement)
        spec = f"{folder}/inter@{count}{suffix}"
        reader = sackli.Reader(spec, sharding_layout="INTERLEAVED", limits_placement=placement)
        assert_reads_back(reader, records)
        concatenated = sackli.Reader(spec, limits_placement=placement)
        assert concatenated.read() == [r for s in range(count) for r in records[s::count]]


# --- Views and batch reads against a list ---------------------------------------------

N = 257
LIST = [b"" if i % 11 == 5 else b"%d." % i * (i % 9 + 1) for i in range(N)]


@pytest.fixture(scope="module", params=[".bag", ".bagz"])
def list_reader(request, tmp_path_factory):
    path = write(tmp_path_factory.mktemp("list") / ("list" + request.param), LIST)
    with sackli.Reader(path) as reader:
        yield reader


BOUND = st.one_of(st.none(), st.integers(-N - 20, N + 20))
SLICE = st.builds(slice, BOUND, BOUND, st.one_of(st.none(), st.integers(-N - 5, N + 5).filter(bool)))


def assert_view_is(view: sackli.Reader, expected: list[bytes]) -> None:
    n = len(expected)
    assert len(view) == n
    assert view.read() == expected
    assert list(view) == expected
    assert list(reversed(view)) == expected[::-1]
    for j in {0, n // 2, n - 1, -1, -n} if n else ():
        assert view[j] == expected[j]
    for j in (n, -n - 1):
        with pytest.raises(IndexError):
            view[j]


@settings(max_examples=60, deadline=None)
@given(outer=SLICE, inner=SLICE)
def test_slices_and_slices_of_slices(list_reader, outer, inner):
    assert_view_is(list_reader[outer], LIST[outer])
    assert_view_is(list_reader[outer][inner], LIST[outer][inner])


@settings(max_examples=60, deadline=None)
@given(data=st.data(), view_slice=st.one_of(st.just(slice(None)), SLICE))
def test_read_indices_like_a_list_comprehension(list_reader, data, view_slice):
    view, expected = list_reader[view_slice], LIST[view_slice]
    n = len(expected)
    indices = data.draw(st.lists(st.integers(-n, n - 1), max_size=300) if n else st.just([]))
    wanted = [expected[i] for i in indices]
    assert view.read_indices(indices) == wanted
    assert view.read_indices(tuple(indices)) == wanted
    assert view.read_indices(np.array(indices, dtype=np.int64)) == wanted
    assert list(view.read_indices_iter(iter(indices), read_ahead=7)) == wanted
