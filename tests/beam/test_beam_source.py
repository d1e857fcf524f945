"""The Beam sources of sackli/beam/_source.py: the splitting contract
(`source_test_utils`), byte-position estimates that never open a bag, and
dynamic work rebalancing."""

from __future__ import annotations

import pytest
from apache_beam import coders
from apache_beam.io import source_test_utils
from apache_beam.io.filesystems import FileSystems

import sackli
from sackli.beam._files import BagFile, expand_pattern
from sackli.beam._source import FileSource, ReadFileRanges
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, TAIL, SEPARATE, READ_TAIL, READ_SEPARATE, PLACEMENTS, make_records, write_bag,
    bytes_source, file_source, record_positions,
)


# --- Splitting and dynamic work rebalancing -----------------------------------


@pytest.fixture(params=[(".bag", TAIL), (".bagz", TAIL), (".bag", SEPARATE), (".bagz", SEPARATE)],
                ids=["bag-TAIL", "bagz-TAIL", "bag-SEPARATE", "bagz-SEPARATE"])
def uneven_set(request, tmp_path):
    """(pattern, reader options, all records) of a 5-shard set with uneven
    shards, an empty shard (a Writer closed with no record), a one-record
    shard, and empty records, trailing ones included."""
    ext, placement = request.param
    sizes = [5, 0, 13, 1, 21]
    all_records = []
    for i, n in enumerate(sizes):
        records = [b"" if j % 4 == 0 or j >= n - 2 else b"r%d.%d;" % (i, j) * (j % 5) for j in range(n)]
        write_bag(tmp_path / f"s-{i:05d}-of-00005{ext}", records, placement)
        all_records += records
    return str(tmp_path / f"s@5{ext}"), sackli.Reader.Options(limits_placement=placement), all_records


class TestSplitting:
    @pytest.mark.parametrize("desired", [1, 7, 64, 10**9])
    def test_bundles_equal_the_whole(self, uneven_set, desired):
        pattern, options, records = uneven_set
        source = bytes_source(pattern, options)
        bundles = list(source.split(desired))
        if desired == 10**9:
            assert len(bundles) == 4  # one per non-empty file
        else:
            assert len(bundles) > 4
        assert source_test_utils.read_from_source(source, None, None) == records
        source_test_utils.assert_sources_equal_reference_source(
            (source, None, None), [(b.source, b.start_position, b.stop_position) for b in bundles])

    def test_split_at_fraction_exhaustive(self, uneven_set):
        """Beam's exhaustive helper on each whole file source (it ignores
        start/stop positions for most checks). Files of one record cannot
        be split at all."""
        pattern, options, _ = uneven_set
        sources = [FileSource(f, options, coders.BytesCoder(), False)
                   for f in expand_pattern(pattern, options) if f.size]
        assert len(sources) == 4
        for source in sources:
            if len(source_test_utils.read_from_source(source, None, None)) > 1:
                source_test_utils.assert_split_at_fraction_exhaustive(source)

    @pytest.mark.parametrize("name,options", [("tail.bagz", READ_TAIL), ("separate.bag", READ_SEPARATE)])
    def test_split_at_fraction_exhaustive_golden(self, tmp_path, golden_dir, name, options):
        """A 20-record prefix of a golden file (the exhaustive check is
        quadratic), rewritten with the golden file's placement. The
        concurrent trials ran on the uneven sets above."""
        records = sackli.Reader(str(golden_dir / name), options).read()[:18] + [b"", b""]
        path = write_bag(tmp_path / name, records, options.limits_placement)
        source_test_utils.assert_split_at_fraction_exhaustive(
            file_source(path, options), perform_multi_threaded_test=False)

    def test_split_at_fraction_cases(self, tmp_path):
        records = make_records(30, seed=6)
        source = file_source(write_bag(tmp_path / "f.bagz", records))
        stu = source_test_utils
        stu.assert_split_at_fraction_succeeds_and_consistent(source, 1, 0.5)
        stu.assert_split_at_fraction_succeeds_and_consistent(source, 10, 0.9)
        stu.assert_split_at_fraction_succeeds_and_consistent(source, 29, 0.999)
        stu.assert_split_at_fraction_fails(source, 10, 0.05)  # before the records read
        stu.assert_split_at_fraction_fails(source, 10, 1.0)  # at the end
        stu.assert_split_at_fraction_fails(source, 0, 0.5)  # an unstarted offset tracker refuses

    def test_split_at_fraction_of_a_shard_set(self, golden_dir):
        """The pattern source concatenates its files (empty shard included)."""
        source = bytes_source(golden_dir / "concat@4.bagz")
        for read, fraction in [(1, 0.5), (3, 0.7), (9, 0.8), (12, 0.95)]:
            source_test_utils.assert_split_at_fraction_succeeds_and_consistent(source, read, fraction)

    def test_one_large_shard_in_many_bundles(self, tmp_path):
        """20,000 records of 100 bytes: record i is at position 108 * i, so
        each of 50 equal byte ranges holds exactly 400 records."""
        records = [b"%06d" % i + bytes([65 + i % 26]) * 94 for i in range(20_000)]
        path = write_bag(tmp_path / "big.bag", records)
        source = bytes_source(path)
        size = path.stat().st_size
        assert size == 108 * 20_000
        assert source.estimate_size() == size
        bundles = list(source.split(size // 50))
        assert len(bundles) == 50
        parts = [source_test_utils.read_from_source(b.source, b.start_position, b.stop_position)
                 for b in bundles]
        assert [len(part) for part in parts] == [400] * 50
        assert [r for part in parts for r in part] == records

    @PLACEMENTS
    def test_estimate_size_is_the_size_of_the_files(self, tmp_path, placement):
        for i, n in enumerate([3, 0, 10]):
            write_bag(tmp_path / f"e-{i:05d}-of-00003.bagz", make_records(n, seed=i), placement)
        options = sackli.Reader.Options(limits_placement=placement)
        total = sum(p.stat().st_size for p in tmp_path.iterdir())  # data + limits files
        assert total > 0
        assert bytes_source(tmp_path / "e@3.bagz", options).estimate_size() == total
        assert bytes_source(tmp_path / "e-*.bagz", options).estimate_size() == total
        assert sum(f.size for f in expand_pattern(str(tmp_path / "e@*.bagz"), options)) == total

    @PLACEMENTS
    def test_estimate_and_split_do_not_open_bags(self, tmp_path, placement):
        """Garbage of a known size: estimating and splitting only list it;
        reading it fails."""
        (tmp_path / "junk.bagz").write_bytes(b"\x07" * 1000)
        if placement == SEPARATE:
            (tmp_path / "limits.junk.bagz").write_bytes(b"\x09" * 24)
        options = sackli.Reader.Options(limits_placement=placement)
        size = 1000 + (24 if placement == SEPARATE else 0)
        source = bytes_source(tmp_path / "junk.bagz", options)
        assert source.estimate_size() == size
        bundles = list(source.split(100))
        assert [(b.start_position, b.stop_position) for b in bundles] == [
            (start, min(size, start + 100)) for start in range(0, size, 100)]
        assert FileSource(BagFile("/no/such/file.bagz", 1234), options, coders.BytesCoder(),
                          False).estimate_size() == 1234
        with pytest.raises(sackli.CorruptionError):
            source_test_utils.read_from_source(source, None, None)


class TestEstimateFromListings:
    """`estimate_size` sums the sizes the listings returned: exact however
    many files, with no stat per listed file (FileSystems.match calls are
    counted around the real file system)."""

    @pytest.fixture
    def matches(self, monkeypatch):
        """The patterns of every FileSystems.match call, one list a call."""
        calls = []
        real = FileSystems.match

        def match(patterns, limits=None):
            calls.append(list(patterns))
            return real(patterns, limits)

        monkeypatch.setattr(FileSystems, "match", match)
        return calls

    @staticmethod
    def _many_files(folder, placement):
        """150 small bags `m-SSSSS-of-00150.bag` of uneven sizes; their
        total size (limits files included)."""
        for i in range(150):
            write_bag(folder / f"m-{i:05d}-of-00150.bag", make_records(i % 9, seed=i), placement)
        return sum(p.stat().st_size for p in folder.iterdir())

    @PLACEMENTS
    @pytest.mark.parametrize("entry", ["m-*.bag", "m@150.bag", "m@*.bag"])
    def test_listed_files(self, tmp_path, matches, placement, entry):
        total = self._many_files(tmp_path, placement)
        options = sackli.Reader.Options(limits_placement=placement)
        matches.clear()
        assert bytes_source(tmp_path / entry, options).estimate_size() == total
        # One listing of the files, and for SEPARATE one of their limits files.
        assert [len(call) for call in matches] == [1] * (2 if placement == SEPARATE else 1)

    @PLACEMENTS
    def test_named_files_are_sized_in_one_match(self, tmp_path, matches, placement):
        total = self._many_files(tmp_path, placement)
        options = sackli.Reader.Options(limits_placement=placement)
        names = ",".join(str(tmp_path / f"m-{i:05d}-of-00150.bag") for i in range(150))
        matches.clear()
        assert bytes_source(names, options).estimate_size() == total
        assert [len(call) for call in matches] == [300 if placement == SEPARATE else 150]

    def test_a_glob_that_lists_the_limits_files_needs_no_other(self, tmp_path, matches):
        total = self._many_files(tmp_path, SEPARATE)
        matches.clear()
        assert bytes_source(tmp_path / "*", READ_SEPARATE).estimate_size() == total
        assert len(matches) == 1

    @pytest.mark.parametrize("entry", ["m-*.bag", "m@150.bag"])
    def test_a_missing_limits_file_is_named(self, tmp_path, entry):
        self._many_files(tmp_path, SEPARATE)
        (tmp_path / "limits.m-00042-of-00150.bag").unlink()
        with pytest.raises(FileNotFoundError, match="its limits file does not exist") as info:
            bytes_source(tmp_path / entry, READ_SEPARATE).estimate_size()
        assert info.value.filename == str(tmp_path / "limits.m-00042-of-00150.bag")


class TestDynamicSplit:
    @pytest.mark.parametrize("name,options", [
        ("tail.bagz", READ_TAIL), ("tail.bag", READ_TAIL), ("separate.bagz", READ_SEPARATE)])
    def test_try_split_mid_read(self, golden_dir, name, options):
        """Read 100 records, split at record 300's position: the primary stops
        before it, the residual reads the rest."""
        path = golden_dir / name
        records = sackli.Reader(str(path), options).read()
        positions = record_positions(path, options)
        source = file_source(path, options)
        tracker = source.get_range_tracker(None, None)
        reading = iter(source.read(tracker))
        primary = [next(reading) for _ in range(100)]
        assert tracker.try_split(positions[300]) is not None
        assert tracker.stop_position() == positions[300]
        primary += list(reading)
        residual = source_test_utils.read_from_source(source, positions[300], None)
        assert primary == records[:300]
        assert residual == records[300:]

    def test_try_split_between_records(self, tmp_path):
        """A split position inside record k's bytes gives record k (whose
        position is before it) to the primary."""
        records = [b"x" * 50 for _ in range(20)]
        path = write_bag(tmp_path / "f.bag", records)
        positions = record_positions(path)
        assert positions == [58 * i for i in range(20)]
        source = file_source(path)
        tracker = source.get_range_tracker(None, None)
        reading = iter(source.read(tracker))
        primary = [next(reading) for _ in range(3)]
        assert tracker.try_split(positions[10] + 1) is not None
        primary += list(reading)
        assert len(primary) == 11
        assert source_test_utils.read_from_source(source, positions[10] + 1, None) == records[11:]

    def test_try_split_refused_behind_the_reader(self, golden_dir):
        path = golden_dir / "tail.bagz"
        positions = record_positions(path)
        source = file_source(path)
        tracker = source.get_range_tracker(None, None)
        reading = iter(source.read(tracker))
        for _ in range(50):
            next(reading)
        assert tracker.try_split(positions[20]) is None
        assert tracker.try_split(positions[49]) is None  # the last record claimed
        assert len(list(reading)) == 450

    def test_sdf_split_mid_read(self, golden_dir):
        """ReadAllFromSackli's splittable DoFn: split the restriction while
        reading; primary and residual together read every record once."""
        (file,) = expand_pattern(str(golden_dir / "tail.bagz"), READ_TAIL)
        records = sackli.Reader(file.path).read()
        fn = ReadFileRanges(READ_TAIL, coders.BytesCoder(), True, 1 << 20)
        tracker = fn.create_tracker(fn.initial_restriction(file))
        reading = fn.process(file, tracker=tracker)
        primary = [next(reading) for _ in range(100)]
        split = tracker.try_split(0.5)
        assert split is not None
        primary_range, residual_range = split
        assert primary_range.stop == residual_range.start
        primary += list(reading)
        tracker.check_done()
        residual_tracker = fn.create_tracker(residual_range)
        residual = list(fn.process(file, tracker=residual_tracker))
        residual_tracker.check_done()
        assert 100 < len(primary) < 500
        assert primary + residual == [(file.path, i, r) for i, r in enumerate(records)]
