"""The read transforms' API past the happy path: coders without type hints,
empty matches, upstream-compatible positional arguments (bagz's `bagzio`),
`compression_type`, and display data that says what the read does."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.fileio import EmptyMatchTreatment
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.display import DisplayData
from bagz.beam import bagzio

import sackli
from sackli.beam import ReadAllFromSackli, ReadFromSackli, WriteToSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, LatinCoder, assert_reads, make_pipeline, make_records, run_and_expect_failure, write_bag,
)


class UntypedCoder(coders.Coder):
    """A coder as users write them: Beam's base `Coder` gives no type hint."""

    def encode(self, value):
        return value[::-1]

    def decode(self, encoded):
        return encoded[::-1]

    def is_deterministic(self):
        return True


def _display(transform) -> dict:
    return {item.key: item.value for item in DisplayData.create_from(transform).items}


@pytest.fixture
def bags(tmp_path):
    """Two bags: `a.bag` (raw) and `b.bagz` (zstd), 20 records each."""
    write_bag(tmp_path / "a.bag", make_records(20, seed=1))
    write_bag(tmp_path / "b.bagz", make_records(20, seed=2))
    return tmp_path


class TestCoderWithoutTypeHint:
    def test_read_all_runs_with_it(self, bags):
        expected = [r[::-1] for r in make_records(20, seed=1)]
        with make_pipeline() as p:
            out = p | beam.Create([str(bags / "a.bag")]) | ReadAllFromSackli(UntypedCoder())
            assert_that(out, equal_to(expected))

    def test_read_takes_the_same_coder(self, bags):
        expected = [r[::-1] for r in make_records(20, seed=1)]
        assert_reads(ReadFromSackli(str(bags / "a.bag"), UntypedCoder()), expected)

    def test_with_metadata(self, bags):
        path = str(bags / "a.bag")
        expected = [(path, i, r[::-1]) for i, r in enumerate(make_records(20, seed=1))]
        with make_pipeline() as p:
            out = p | beam.Create([path]) | ReadAllFromSackli(UntypedCoder(), with_metadata=True)
            assert_that(out, equal_to(expected))


class TestEmptyMatches:
    def test_read_all_allows_an_empty_glob_by_default(self, bags):
        with make_pipeline() as p:
            out = (p | beam.Create([str(bags / "none-*.bag"), str(bags / "a.bag")])
                   | ReadAllFromSackli())
            assert_that(out, equal_to(make_records(20, seed=1)))

    def test_read_all_allows_an_empty_star_shard_set_by_default(self, bags):
        with make_pipeline() as p:
            out = p | beam.Create([str(bags / "none@*.bagz")]) | ReadAllFromSackli()
            assert_that(out, equal_to([]))

    def test_read_all_still_refuses_a_missing_named_file(self, bags):
        path = str(bags / "gone.bag")
        run_and_expect_failure(lambda p: p | beam.Create([path]) | ReadAllFromSackli(),
                               "FileNotFoundError", path)

    def test_read_all_disallow(self, bags):
        pattern = str(bags / "none-*.bag")
        run_and_expect_failure(
            lambda p: p | beam.Create([pattern])
            | ReadAllFromSackli(empty_match_treatment=EmptyMatchTreatment.DISALLOW),
            "FileNotFoundError", "no files match")

    def test_read_all_allow_takes_a_missing_named_file(self, bags):
        with make_pipeline() as p:
            out = (p | beam.Create([str(bags / "gone.bag")])
                   | ReadAllFromSackli(empty_match_treatment=EmptyMatchTreatment.ALLOW))
            assert_that(out, equal_to([]))

    def test_a_partial_shard_set_is_an_error_even_when_allowed(self, bags):
        write_bag(bags / "part-00000-of-00002.bag", [b"x"])
        pattern = str(bags / "part@2.bag")
        run_and_expect_failure(
            lambda p: p | beam.Create([pattern])
            | ReadAllFromSackli(empty_match_treatment=EmptyMatchTreatment.ALLOW),
            "FileNotFoundError", "shard 1 of 2 is missing")

    def test_read_disallows_by_default(self, bags):
        with pytest.raises(FileNotFoundError, match="no files match"):
            ReadFromSackli(str(bags / "none-*.bag"))

    def test_read_with_allow_if_wildcard(self, bags):
        pattern = f"{bags / 'none-*.bag'},{bags / 'a.bag'}"
        read = ReadFromSackli(pattern, empty_match_treatment=EmptyMatchTreatment.ALLOW_IF_WILDCARD)
        assert_reads(read, make_records(20, seed=1))

    def test_read_of_nothing_at_all(self, bags):
        read = ReadFromSackli(str(bags / "none-*.bag"),
                              empty_match_treatment=EmptyMatchTreatment.ALLOW)
        assert_reads(read, [])

    def test_unknown_treatment(self, bags):
        with pytest.raises(ValueError, match="empty_match_treatment"):
            ReadFromSackli(str(bags / "a.bag"), empty_match_treatment="SOMETIMES")
        with pytest.raises(ValueError, match="empty_match_treatment"):
            ReadAllFromSackli(empty_match_treatment=None)


class TestUpstreamSignature:
    """`ReadFromBagz(file_pattern, coder, compression_type)` calls work
    unchanged on ReadFromSackli, with the same results."""

    def test_positional_arguments_as_bagzio(self, bags):
        path = str(bags / "b.bagz")
        expected = [r.decode("latin-1") for r in make_records(20, seed=2)]
        for transform in (ReadFromSackli, bagzio.ReadFromBagz):
            assert_reads(transform(path, LatinCoder(), CompressionTypes.AUTO), expected)

    @pytest.mark.parametrize("compression_type", [CompressionTypes.AUTO, CompressionTypes.UNCOMPRESSED])
    def test_same_records_as_bagzio(self, bags, compression_type):
        path = str(bags / "a.bag")
        with make_pipeline() as p:
            ours = p | "Ours" >> ReadFromSackli(path, coders.BytesCoder(), compression_type)
            theirs = p | "Theirs" >> bagzio.ReadFromBagz(path, coders.BytesCoder(), compression_type)
            assert_that(ours, equal_to(make_records(20, seed=1)), label="ours")
            assert_that(theirs, equal_to(make_records(20, seed=1)), label="theirs")

    def test_bagzio_writes_we_read(self, tmp_path):
        records = make_records(50, seed=3)
        with make_pipeline() as p:
            _ = p | beam.Create(records) | bagzio.WriteToBagz(str(tmp_path / "up@3.bagz"))
        assert_reads(ReadFromSackli(str(tmp_path / "up@3.bagz"), coders.BytesCoder(),
                                    CompressionTypes.AUTO), records)

    def test_bagzio_reads_what_we_write(self, tmp_path):
        records = make_records(50, seed=6)
        path = str(tmp_path / "ours@3.bagz")
        with make_pipeline() as p:
            _ = (p | beam.Create(records)
                 | WriteToSackli(path, coders.BytesCoder(), CompressionTypes.AUTO))
        assert_reads(bagzio.ReadFromBagz(path, coders.BytesCoder(), CompressionTypes.AUTO), records)

    def test_bad_path_message_starts_as_upstream(self, tmp_path):
        path = str(tmp_path / "no-shard-spec.bag")
        messages = []
        for transform in (WriteToSackli, bagzio.WriteToBagz):
            with pytest.raises(ValueError) as info:
                transform(path, coders.BytesCoder(), CompressionTypes.AUTO)
            messages.append(str(info.value))
        prefix = f'File path "{path}" must be in the form'
        assert all(m.startswith(prefix) for m in messages), messages

    def test_zstd_whatever_the_name(self, tmp_path):
        records = make_records(30, seed=4)
        zstd = sackli.Writer.Options(compression=sackli.CompressionZstd())
        with sackli.Writer(str(tmp_path / "z.bag"), zstd) as writer:
            writer.write_many(records)
        path = str(tmp_path / "z.bag")
        assert_reads(ReadFromSackli(path, coders.BytesCoder(), CompressionTypes.ZSTD), records)
        with make_pipeline() as p:
            out = p | beam.Create([path]) | ReadAllFromSackli(coders.BytesCoder(), CompressionTypes.ZSTD)
            assert_that(out, equal_to(records))

    def test_uncompressed_whatever_the_name(self, tmp_path):
        records = make_records(30, seed=5)
        raw = sackli.Writer.Options(compression=sackli.CompressionNone())
        with sackli.Writer(str(tmp_path / "r.bagz"), raw) as writer:
            writer.write_many(records)
        read = ReadFromSackli(str(tmp_path / "r.bagz"), coders.BytesCoder(),
                              CompressionTypes.UNCOMPRESSED)
        assert_reads(read, records)

    @pytest.mark.parametrize("kind", [CompressionTypes.GZIP, CompressionTypes.BZIP2,
                                      CompressionTypes.DEFLATE, CompressionTypes.LZMA])
    def test_whole_file_compressions_are_refused(self, bags, kind):
        with pytest.raises(ValueError, match="compresses each record"):
            ReadFromSackli(str(bags / "a.bag"), coders.BytesCoder(), kind)
        with pytest.raises(ValueError, match="compresses each record"):
            ReadAllFromSackli(coders.BytesCoder(), kind)

    def test_compression_type_must_agree_with_options(self, bags):
        options = sackli.Reader.Options(compression=sackli.CompressionNone())
        with pytest.raises(ValueError, match="contradicts"):
            ReadFromSackli(str(bags / "a.bag"), coders.BytesCoder(), CompressionTypes.ZSTD,
                           options=options)

    def test_compression_type_of_another_type(self, bags):
        with pytest.raises(TypeError, match="CompressionTypes"):
            ReadFromSackli(str(bags / "a.bag"), coders.BytesCoder(), 3)


class TestDisplayData:
    def test_read_shows_pattern_options_and_coder(self, bags):
        dictionary = sackli.CompressionZstd(dictionary=b"d" * 10)
        read = ReadFromSackli(str(bags / "a.bag"), UntypedCoder(),
                              options=sackli.Reader.Options(compression=dictionary))
        shown = _display(read)
        assert shown["file_pattern"] == str(bags / "a.bag")
        assert shown["record_compression"] == "zstd with a dictionary of 10 bytes"
        assert shown["limits_placement"] == "TAIL"
        assert shown["coder"] == "UntypedCoder"
        assert shown["with_metadata"] is False
        assert shown["empty_match_treatment"] == "DISALLOW"
        assert not any("uncompressed" in str(v) for v in shown.values())

    def test_auto_compression_says_the_rule(self, bags):
        shown = _display(ReadFromSackli(str(bags / "b.bagz")))
        assert shown["record_compression"] == "auto (zstd for .bagz names)"

    def test_read_all_shows_its_settings(self):
        read = ReadAllFromSackli(coders.BytesCoder(), CompressionTypes.UNCOMPRESSED,
                                 with_metadata=True, desired_bundle_size=1 << 20)
        shown = _display(read)
        assert shown["record_compression"] == "none"
        assert shown["with_metadata"] is True
        assert shown["desired_bundle_size"] == 1 << 20
        assert shown["empty_match_treatment"] == "ALLOW_IF_WILDCARD"
        assert shown["coder"] == "BytesCoder"
