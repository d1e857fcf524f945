"""`ReadFromSackli` and `ReadAllFromSackli` (sackli/beam/_files.py,
_source.py): golden files, comma lists, shard specs and Beam globs,
`with_metadata`, and the errors for missing files and corrupt bags."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.testing.util import assert_that, equal_to

from sackli.beam import ReadAllFromSackli, ReadFromSackli
from sackli.beam._files import BagFile, expand_pattern
from sackli.beam._source import ReadFileRanges
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, READ_TAIL, READ_SEPARATE, GOLDEN_NAMES, make_pipeline, assert_reads,
    run_and_expect_failure, make_records, write_bag, shard_names, golden_expected,
    golden_options, LatinCoder, bag_dir,
)


# --- Reading ------------------------------------------------------------------


class TestReadGolden:
    @pytest.mark.parametrize("name", GOLDEN_NAMES)
    def test_golden_file(self, golden_dir, golden_manifest, name):
        """Each bagz 0.3.8 golden file (or shard set) reads as its records."""
        entry = golden_manifest["files"][name]
        assert_reads(ReadFromSackli(str(golden_dir / name), options=golden_options(entry)),
                     golden_expected(name, entry))

    def test_golden_shards_with_metadata(self, golden_dir, golden_manifest):
        sizes = golden_manifest["files"]["concat@4.bagz"]["shard_sizes"]
        expected = [
            (str(golden_dir / f"concat-{shard:05d}-of-00004.bagz"), j, b"%d:%d" % (shard, j))
            for shard, n in enumerate(sizes) for j in range(n)
        ]
        assert_reads(ReadFromSackli(str(golden_dir / "concat@4.bagz"), with_metadata=True), expected)

    def test_golden_comma_list(self, golden_dir, golden_manifest):
        files = golden_manifest["files"]
        pattern = ",".join(str(golden_dir / n) for n in ["readme.bag", "inter@3.bag", "blanks.bagz"])
        expected = [r for n in ["readme.bag", "inter@3.bag", "blanks.bagz"]
                    for r in golden_expected(n, files[n])]
        assert_reads(ReadFromSackli(pattern), expected)


PLAIN = [b"p0", b"", b"p2"]


SET = [b"s0", b"s1", b"", b"s2"]


GLOB = [b"g0", b"", b"g0!", b"g1", b"", b"g1!"]


class TestRead:
    def test_comma_list_of_a_file_and_a_shard_set(self, bag_dir):
        assert_reads(ReadFromSackli(f"{bag_dir}/plain.bagz,{bag_dir}/set@3.bag"), PLAIN + SET)

    def test_shard_set_with_star(self, bag_dir):
        assert_reads(ReadFromSackli(f"{bag_dir}/set@*.bag"), SET)

    def test_glob_skips_limits_files(self, bag_dir):
        """`glob/*.bagz` also lists `limits.g0.bagz`...; with SEPARATE
        placement those are the limits of listed bags, not bags."""
        pattern = f"{bag_dir}/glob/*.bagz"
        folder = bag_dir / "glob"
        assert expand_pattern(pattern, READ_SEPARATE) == [
            BagFile(str(folder / f"g{i}.bagz"),
                    (folder / f"g{i}.bagz").stat().st_size + (folder / f"limits.g{i}.bagz").stat().st_size)
            for i in range(2)
        ]
        assert_reads(ReadFromSackli(pattern, options=READ_SEPARATE), GLOB)

    def test_glob_of_tail_bags(self, bag_dir):
        assert_reads(ReadFromSackli(f"{bag_dir}/set-*.bag"), SET)

    def test_with_metadata_on_three_shards(self, tmp_path):
        shards = [[b"a0", b"", b"a2"], [b"b0"], [b"", b"c1", b"c2", b""]]
        for name, records in zip(shard_names("m", 3, ".bagz"), shards):
            write_bag(tmp_path / name, records)
        expected = [
            (str(tmp_path / f"m-{shard:05d}-of-00003.bagz"), j, record)
            for shard, records in enumerate(shards) for j, record in enumerate(records)
        ]
        assert_reads(ReadFromSackli(str(tmp_path / "m@3.bagz"), with_metadata=True), expected)

    def test_with_metadata_and_a_coder(self, tmp_path):
        coder = coders.PickleCoder()
        write_bag(tmp_path / "p.bag", [coder.encode(("x", i)) for i in range(3)])
        expected = [(str(tmp_path / "p.bag"), i, ("x", i)) for i in range(3)]
        assert_reads(ReadFromSackli(str(tmp_path / "p.bag"), coder, with_metadata=True), expected)

    def test_large_file(self, tmp_path):
        records = [b"%06d" % i + b"." * 94 for i in range(20_000)]
        write_bag(tmp_path / "big.bagz", records)
        assert_reads(ReadFromSackli(str(tmp_path / "big.bagz")), records)

    def test_pathlike_pattern(self, bag_dir):
        assert_reads(ReadFromSackli(bag_dir / "plain.bagz"), PLAIN)


class TestReadFailures:
    @pytest.mark.parametrize("content", [b"\x01" * 100, b"", b"\xff" * 7], ids=["junk", "empty", "short"])
    def test_corrupt_bag(self, tmp_path, content):
        """A garbage file fails the pipeline with a CorruptionError naming it
        (an empty file is an empty bag: it reads as nothing)."""
        path = tmp_path / "bad.bagz"
        path.write_bytes(content)
        if not content:
            assert_reads(ReadFromSackli(str(path)), [])
            return
        run_and_expect_failure(lambda p: p | ReadFromSackli(str(path)), "CorruptionError", str(path))
        run_and_expect_failure(lambda p: p | beam.Create([str(path)]) | ReadAllFromSackli(),
                               "CorruptionError", str(path))

    def test_separate_bag_read_as_tail(self, bag_dir):
        path = bag_dir / "glob" / "g0.bagz"
        run_and_expect_failure(lambda p: p | ReadFromSackli(str(path)),
                               "CorruptionError", str(path), "SEPARATE")

    def test_read_all_missing_file(self, tmp_path):
        path = str(tmp_path / "gone@2.bagz")
        run_and_expect_failure(lambda p: p | beam.Create([path]) | ReadAllFromSackli(),
                               "FileNotFoundError", "gone-00000-of-00002.bagz")


class TestReadAll:
    @pytest.mark.parametrize("runner", ["direct", "portable"])
    def test_patterns(self, bag_dir, runner):
        """A shard spec, a glob (SEPARATE) and a plain file, read in ranges of
        16 bytes, so every file is split."""
        patterns = [f"{bag_dir}/set@3.bag", f"{bag_dir}/glob/*.bagz", f"{bag_dir}/plain.bagz"]
        # SEPARATE for the glob only: read it with its own transform.
        with make_pipeline(runner) as p:
            tail = p | "tail" >> beam.Create([patterns[0], patterns[2]]) | "read tail" >> ReadAllFromSackli(
                desired_bundle_size=16)
            separate = p | "sep" >> beam.Create([patterns[1]]) | "read sep" >> ReadAllFromSackli(
                options=READ_SEPARATE, desired_bundle_size=16)
            assert_that(tail, equal_to(SET + PLAIN), label="tail ok")
            assert_that(separate, equal_to(GLOB), label="separate ok")

    def test_with_metadata(self, tmp_path, golden_dir, golden_manifest):
        write_bag(tmp_path / "a.bag", [b"a0", b"", b"a2"])
        write_bag(tmp_path / "b.bagz", [b"", b"b1"])
        expected = [(str(tmp_path / "a.bag"), 0, b"a0"), (str(tmp_path / "a.bag"), 1, b""),
                    (str(tmp_path / "a.bag"), 2, b"a2"), (str(tmp_path / "b.bagz"), 0, b""),
                    (str(tmp_path / "b.bagz"), 1, b"b1")]
        expected += [(str(golden_dir / f"inter-{s:05d}-of-00003.bag"), j, b"%d:%d" % (s, j))
                     for s, n in enumerate(golden_manifest["files"]["inter@3.bag"]["shard_sizes"])
                     for j in range(n)]
        patterns = [str(tmp_path / "a.bag"), str(tmp_path / "b.bagz"), str(golden_dir / "inter@*.bag")]
        assert_reads(beam.Create(patterns) | ReadAllFromSackli(with_metadata=True, desired_bundle_size=7),
                     expected)

    def test_coder_and_golden_files(self, golden_dir, golden_manifest):
        """Golden files of both placements through one ReadAll each, with a
        coder that decodes bytes to str."""
        files = golden_manifest["files"]
        tail = ["tail.bag", "tail.bagz", "level19.bagz", "empty.bagz"]
        expected = [r.decode("latin-1") for n in tail for r in golden_expected(n, files[n])]
        coder = LatinCoder()
        assert_reads(beam.Create([str(golden_dir / n) for n in tail])
                     | ReadAllFromSackli(coder, desired_bundle_size=4096), expected)

    def test_ranges_partition_each_file(self, tmp_path):
        """ReadFileRanges's initial ranges cover [0, size) and, read one by
        one, yield every record once, in order."""
        records = make_records(40, seed=5)
        path = write_bag(tmp_path / "r.bagz", records)
        (file,) = expand_pattern(str(path), READ_TAIL)
        fn = ReadFileRanges(READ_TAIL, coders.BytesCoder(), False, 50)
        ranges = list(fn.split(file, fn.initial_restriction(file)))
        assert ranges[0].start == 0 and ranges[-1].stop == file.size == path.stat().st_size
        assert all(a.stop == b.start for a, b in zip(ranges, ranges[1:]))
        assert len(ranges) >= file.size // 50 - 1
        read = []
        for restriction in ranges:
            tracker = fn.create_tracker(restriction)
            read += list(fn.process(file, tracker=tracker))
            tracker.check_done()
        assert read == records
