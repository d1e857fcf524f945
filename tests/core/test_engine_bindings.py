"""The engine as the bindings expose it (sackli._engine): repeated indices on
every read path, range errors with their numbers, the options objects, the
test-only index entry point and the exported format facts."""

from __future__ import annotations

import pickle

import pytest

import sackli
from sackli import _engine

RECORDS = [b"record-%d-" % i * (i % 7 + 1) for i in range(40)]
REPEATS = [3, 3, 17, 3, 0, 17, 39, 39, 5]


class _CountingRemote:
    """A `remote` callback for _engine.open_reader serving local files as
    remote objects (the engine then reads them through Python, unmapped)."""

    class Handle:
        def __init__(self, path: str, owner: "_CountingRemote"):
            self._data = open(path, "rb").read()
            self._owner = owner
            self.size = len(self._data)

        def read_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
            self._owner.reads += len(ranges)
            return [self._data[offset : offset + length] for offset, length in ranges]

    def __init__(self):
        self.reads = 0

    def __call__(self, path: str):
        return self.Handle(path, self)

    def exists(self, path: str):
        return None


def _write(path, records=RECORDS):
    with sackli.Writer(str(path)) as writer:
        writer.write_many(records)
    return str(path)


@pytest.fixture(params=[".bag", ".bagz"])
def bag_path(tmp_path, request):
    return _write(tmp_path / ("r" + request.param))


def _cores(path):
    """Reader cores over one bag on each read path: mapped, unmapped
    (DROP_AFTER_READ) and remote (through a Python handle)."""
    options = sackli.Reader.Options(read_ahead_bytes=0)
    remote = _CountingRemote()
    return {
        "mapped": sackli.Reader(path)._core,
        "unmapped": sackli.Reader(path, cache_policy=sackli.CachePolicy.DROP_AFTER_READ)._core,
        "remote": _engine.open_reader([path], options._engine_options, remote),
    }


def _unpacked(pending):
    data, offsets = pending.packed()
    data, offsets = memoryview(data), list(memoryview(offsets))
    assert offsets == sorted(offsets)  # Arrow needs non-decreasing offsets
    return [bytes(data[offsets[k] : offsets[k + 1]]) for k in range(len(offsets) - 1)]


def _assert_shared(records, indices):
    """Each repeated index gives the very object of its first position."""
    first = {}
    for position, index in enumerate(indices):
        if index in first:
            assert records[position] is records[first[index]]
        else:
            first[index] = position


@pytest.mark.parametrize("path_kind", ["mapped", "unmapped", "remote"])
def test_repeated_indices_on_every_path(bag_path, path_kind):
    core = _cores(bag_path)[path_kind]
    expected = [RECORDS[i] for i in REPEATS]
    eager = core.read_indices(REPEATS)
    assert eager == expected
    _assert_shared(eager, REPEATS)
    ahead = core.start_records(REPEATS).result()
    assert ahead == expected
    _assert_shared(ahead, REPEATS)
    assert _unpacked(core.start_read_indices(REPEATS)) == expected
    assert _unpacked(core.start_read_indices(REPEATS, b"head")) == expected


@pytest.mark.parametrize("options", [{}, {"cache_policy": "DROP_AFTER_READ"}])
def test_repeats_through_the_public_api(bag_path, options):
    reader = sackli.Reader(bag_path, **options)
    expected = [RECORDS[i] for i in REPEATS]
    assert reader.read_indices(REPEATS) == expected
    assert list(reader.read_indices_iter(iter(REPEATS))) == expected
    assert reader[REPEATS] == expected


def test_every_record_repeated_in_a_view(bag_path):
    view = sackli.Reader(bag_path)[::-3]
    indices = [0, -1, 0, 5, -1, 5, 5]
    expected = [RECORDS[::-3][i] for i in indices]
    assert view.read_indices(indices) == expected
    assert view._core.start_records(indices).result() == expected


def test_repeats_across_several_plans(tmp_path):
    # Records of 1 MiB make plans of 64 records: a request of 140 positions
    # runs as three plans, and its repeats lie in different plans.
    records = [bytes([i]) * (1 << 20) for i in range(70)]
    reader = sackli.Reader(_write(tmp_path / "big.bag", records))
    indices = list(range(70)) + list(range(69, -1, -1))
    out = reader.read_indices(indices)
    assert out == [records[i] for i in indices]
    _assert_shared(out, indices)


def test_range_errors_carry_their_numbers(bag_path):
    core = sackli.Reader(bag_path)[:10]._core
    for call in (
        lambda: core.start_records_range(5, 7),
        lambda: core.start_read_range(5, 7),
        lambda: core.read_range(5, 7),
    ):
        with pytest.raises(IndexError, match=r"range \[5, 12\) out of range for a reader of 10 records"):
            call()
    with pytest.raises(IndexError, match=r"index 10 out of range for a reader of 10 records"):
        core.get(10)
    with pytest.raises(IndexError, match=r"indices\[1\] = -11 out of range for a reader of 10 records"):
        core.read_indices([0, -11])
    with pytest.raises(IndexError, match=r"shard 3 out of range for a bag of 1 shards"):
        core.bag.record_offsets(3, 0, 1)


def test_a_view_that_no_longer_fits_names_its_numbers(bag_path):
    bag = sackli.Reader(bag_path)._core.bag
    with pytest.raises(ValueError, match=r"start 38, step 1, 5 records.*bag of 40 records"):
        _engine.ReaderCore(bag, 38, 1, 5)


_READER_FIELDS = dict(
    compression_mode=0, level=3, dictionary=b"", sharding_layout=0, limits_placement=0,
    limits_storage=0, max_parallelism=1, remote_parallelism=1, access_pattern=0, cache_policy=0,
)


# The Python enums mirror the engine's by value: the engine counts its own
# values (0 .. kLast), so a Python enum of another size shows here.
_ENUMS = {
    "sharding_layout": sackli.ShardingLayout, "limits_placement": sackli.LimitsPlacement,
    "limits_storage": sackli.LimitsStorage, "access_pattern": sackli.AccessPattern,
    "cache_policy": sackli.CachePolicy,
}


@pytest.mark.parametrize("field", [*_ENUMS, "compression_mode"])
def test_engine_options_convert_only_values_of_their_enums(field):
    bound = len(_ENUMS[field]) if field in _ENUMS else len(sackli._options._COMPRESSIONS)
    for value in range(bound):
        _engine.ReaderBindingOptions(**{**_READER_FIELDS, field: value})
    for value in (-1, bound):
        with pytest.raises(ValueError, match=rf"{field} must be in \[0, {bound}\), not {value}"):
            _engine.ReaderBindingOptions(**{**_READER_FIELDS, field: value})


def test_engine_options_leave_the_rules_to_python():
    # The user's message comes from sackli's options, and only from them.
    with pytest.raises(ValueError, match="max_parallelism must be between 1 and 256, not 0"):
        sackli.Reader.Options(max_parallelism=0)
    assert _engine.MAX_PARALLELISM == 256
    # The bindings only convert: a negative count is no size_t.
    with pytest.raises(TypeError):
        _engine.ReaderBindingOptions(**{**_READER_FIELDS, "max_parallelism": -1})
    with pytest.raises(ValueError, match="limits_placement must be in"):
        _engine.WriterBindingOptions(compression_mode=0, level=3, dictionary=b"",
                                     limits_placement=4, max_parallelism=1)
    with pytest.raises(ValueError, match=r"zstd level 99 is outside \[-131072, 22\]"):
        _engine.check_zstd_level(99)


def test_options_keep_one_engine_object_and_pickle_without_it():
    options = sackli.Reader.Options(cache_policy="DROP_AFTER_READ")
    assert isinstance(options._engine_options, _engine.ReaderBindingOptions)
    copy = pickle.loads(pickle.dumps(options))
    assert copy == options
    assert isinstance(copy._engine_options, _engine.ReaderBindingOptions)
    writer_options = pickle.loads(pickle.dumps(sackli.Writer.Options(limits_placement="SEPARATE")))
    assert isinstance(writer_options._engine_options, _engine.WriterBindingOptions)


def test_hash_mask_is_only_a_testing_entry_point(bag_path):
    core = sackli.Reader(bag_path)._core
    with pytest.raises(TypeError):
        _engine.RecordIndex(core, False, 1 << 20, 0)
    index = _engine.testing.record_index_with_hash_mask(core, False, 1 << 20, 0)
    assert isinstance(index, _engine.RecordIndex)
    assert index[RECORDS[7]] == 7 and RECORDS[7] + b"x" not in index


def test_format_facts():
    assert _engine.LIMIT_BYTES == 8
    assert _engine.limits_path_for("/d/x.bagz") == "/d/limits.x.bagz"
    assert _engine.has_zstd_suffix("a.bagz") and not _engine.has_zstd_suffix("a.bag")
    assert _engine.partial_folder_prefix("/d/x.bagz") == "/d/.x.bagz" + _engine.PARTIAL_MARKER
