"""`ReadFromSackliBatched`'s source under Beam's own split checks
(`apache_beam.io.source_test_utils`): a file's batches lie on a grid fixed
per file, so initial and dynamic splits, concurrent ones included, move
whole batches and never re-cut them (sackli/beam/_batched.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from apache_beam.io import source_test_utils

import sackli
import sackli.arrow
from sackli.beam import _batched
from sackli.beam._batched import BatchedPatternSource, _BatchedFileSource, _BatchMaker
from sackli.beam._files import DISALLOW, expand_pattern
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, PLACEMENTS, READ_SEPARATE, READ_TAIL, SEPARATE, TAIL, make_records, write_bag,
)

READ_OPTIONS = {TAIL: READ_TAIL, SEPARATE: READ_SEPARATE}


def _file_source(path, options, make: _BatchMaker) -> _BatchedFileSource:
    (file,) = expand_pattern(str(path), options)
    return _BatchedFileSource(file, options, make)


def _records(batches) -> list[bytes]:
    """The records of raw lists or of RecordBatches with a `record` column."""
    out: list[bytes] = []
    for batch in batches:
        out.extend(batch if isinstance(batch, list) else batch.column("record").to_pylist())
    return out


# (records, batch_size): few records, many, all empty, one batch size that
# does not divide the count, one that does.
FILES = {
    "few": (make_records(5, seed=1), 2),
    "many": (make_records(200, seed=2), 37),
    "even": (make_records(60, seed=3), 20),
    "all-empty": ([b""] * 12, 5),
}


class TestDynamicSplits:
    """`assert_split_at_fraction_exhaustive`: after every number of batches
    read, every interesting split fraction (and concurrent splits) gives a
    primary that reads what the interrupted read went on to read, and a
    primary and residual that together read exactly the unsplit batches."""

    @PLACEMENTS
    @pytest.mark.parametrize("decode", ["raw", None])
    @pytest.mark.parametrize("name", sorted(FILES))
    def test_exhaustive(self, tmp_path, placement, decode, name):
        records, batch_size = FILES[name]
        path = write_bag(tmp_path / "f.bag", records, placement)
        source = _file_source(path, READ_OPTIONS[placement],
                              _BatchMaker(decode, None, None, batch_size))
        batches = source_test_utils.read_from_source(source)
        assert _records(batches) == records
        assert [len(_records([b])) for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
        source_test_utils.assert_split_at_fraction_exhaustive(source)

    @pytest.mark.parametrize("decode", ["raw", None])
    def test_exhaustive_with_the_default_batch_size(self, tmp_path, monkeypatch, decode):
        # A small byte budget, so the default size gives several batches.
        monkeypatch.setattr(_batched, "_BATCH_BYTES", 200)
        records = make_records(90, seed=4)
        path = write_bag(tmp_path / "d.bag", records)
        source = _file_source(path, READ_TAIL, _BatchMaker(decode, None, None, None))
        with sackli.Reader(str(path)) as reader:
            size = _BatchMaker(decode, None, None, None).size(reader)
        batches = source_test_utils.read_from_source(source)
        assert 1 < size < len(records)
        assert [len(_records([b])) for b in batches] == [
            min(size, len(records) - start) for start in range(0, len(records), size)]
        source_test_utils.assert_split_at_fraction_exhaustive(source)

    def test_exhaustive_with_arrow_rows(self, tmp_path):
        table = pa.table({"id": pa.array(range(40), pa.int64()),
                          "name": [f"n{i}" * (i % 4) for i in range(40)]})
        (path,) = sackli.arrow.write_table(table, str(tmp_path / "t.bag"), encoding="arrow")
        source = _file_source(path, READ_TAIL, _BatchMaker("arrow", None, None, 6))
        batches = source_test_utils.read_from_source(source)
        assert pa.Table.from_batches(batches).equals(table)
        source_test_utils.assert_split_at_fraction_exhaustive(source)

    def test_exhaustive_over_a_pattern_of_files(self, tmp_path):
        # Through the concatenation of the files' sources, as runners read it.
        write_bag(tmp_path / "p-00000-of-00003.bag", make_records(11, seed=5))
        write_bag(tmp_path / "p-00001-of-00003.bag", [])
        write_bag(tmp_path / "p-00002-of-00003.bag", make_records(7, seed=6))
        source = BatchedPatternSource(str(tmp_path / "p@3.bag"), READ_TAIL,
                                      _BatchMaker("raw", None, None, 3), DISALLOW)
        source_test_utils.assert_split_at_fraction_exhaustive(source)

    def test_a_batch_handed_over_in_parts_is_claimed_once(self, tmp_path):
        # decode="row" hands a large batch over in parts; a part that does
        # not start a grid batch must not be claimed (nor split away).
        class InHalves(_BatchMaker):
            def __call__(self, view, size):
                for batch in super().__call__(view, size):
                    half = (len(batch) + 1) // 2
                    yield batch[:half]
                    if batch[half:]:
                        yield batch[half:]

        records = make_records(30, seed=7)
        path = write_bag(tmp_path / "h.bag", records)
        source = _file_source(path, READ_TAIL, InHalves("raw", None, None, 8))
        batches = source_test_utils.read_from_source(source)
        assert [len(b) for b in batches] == [4, 4, 4, 4, 4, 4, 3, 3]
        source_test_utils.assert_split_at_fraction_exhaustive(source)


class TestRangesReadWholeGridBatches:
    @PLACEMENTS
    @pytest.mark.parametrize("decode", ["raw", None])
    def test_every_range_reads_whole_batches_of_the_grid(self, tmp_path, placement, decode):
        # Any [start, stop) reads the unsplit read's batches that start in
        # it: never a batch cut at the range's first record.
        records = make_records(50, seed=8)
        path = write_bag(tmp_path / "g.bag", records, placement)
        source = _file_source(path, READ_OPTIONS[placement], _BatchMaker(decode, None, None, 9))
        whole = source_test_utils.read_from_source(source)
        size = source.estimate_size()
        for start in range(0, size + 1, 7):
            for stop in range(start, size + 1, 61):
                part = source_test_utils.read_from_source(source, start, stop)
                assert all(any(b == w for w in whole) for b in part), (start, stop)

    @PLACEMENTS
    @pytest.mark.parametrize("decode", ["raw", None])
    @pytest.mark.parametrize("bundle", [1, 13, 100, 1 << 20])
    def test_initial_splits_read_the_unsplit_batches(self, tmp_path, placement, decode, bundle):
        records = make_records(70, seed=9)
        path = write_bag(tmp_path / "i.bag", records, placement)
        source = _file_source(path, READ_OPTIONS[placement], _BatchMaker(decode, None, None, 8))
        bundles = [(b.source, b.start_position, b.stop_position) for b in source.split(bundle)]
        source_test_utils.assert_sources_equal_reference_source((source, None, None), bundles)
        # and in order: the bundles' batches, one after the other, are the
        # unsplit read's
        read = [b for s in bundles for b in source_test_utils.read_from_source(*s)]
        assert read == source_test_utils.read_from_source(source)

    def test_initial_splits_of_a_pattern(self, tmp_path):
        for i, n in enumerate([23, 0, 9]):
            write_bag(tmp_path / f"q-{i:05d}-of-00003.bag", make_records(n, seed=10 + i), SEPARATE)
        source = BatchedPatternSource(str(tmp_path / "q@3.bag"), READ_SEPARATE,
                                      _BatchMaker(None, None, None, 4), DISALLOW)
        for bundle in (1, 50, 1 << 20):
            bundles = [(b.source, b.start_position, b.stop_position)
                       for b in source.split(bundle)]
            source_test_utils.assert_sources_equal_reference_source((source, None, None), bundles)
