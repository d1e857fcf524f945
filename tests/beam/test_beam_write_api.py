"""`WriteToSackli`'s finalisation and API (sackli/beam/_sink.py,
_shard_names.py, _write_path.py, sacklio.py), run as real pipelines on the
DirectRunner: older output survives a failed finalisation, a new write
replaces an older shard set of its count (and, with overwrite=True, of
any count: tests/beam/test_beam_overwrite.py), the upstream positional
signature, truthful display data, and WriteToText's parameters."""

from __future__ import annotations

import shutil

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.io import iobase
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms.display import DisplayData

import sackli
from sackli.beam import ReadFromSackli, WriteToSackli
from sackli.beam._sink import BagSink
from sackli.beam._write_path import parse_write_path
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, ZSTD_MAGIC, SEPARATE, PLACEMENTS, run_write,
    assert_reads, make_pipeline, shard_names, with_limits, listing, shard_set_names,
    read_files,
)


def _snapshot(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in listing(folder)}


# --- Older output survives a failed finalisation (3b) ------------------------


class _TempFolderLostSink(BagSink):
    """A BagSink whose temporary folder becomes a plain file once every
    bundle has written its shard (as if another process clobbered it), so
    making the empty shards that pad `@N` fails for real in the file
    system: NotADirectoryError, root or not."""

    def pre_finalize(self, init_result, writer_results):
        super().pre_finalize(init_result, writer_results)
        shutil.rmtree(init_result)
        with open(init_result, "wb") as clobber:
            clobber.write(b"not a folder")


class TestOlderOutputSurvivesFailure:
    @PLACEMENTS
    def test_padding_failure_keeps_the_older_set(self, tmp_path, placement):
        """One record into `out@3.bag` (two padding empty shards to make)
        over an older 3-shard output: the padding fails, and the older
        output is still there, byte for byte (main deleted it first)."""
        options = sackli.Writer.Options(limits_placement=placement)
        old = tmp_path / "out"
        old.mkdir()
        run_write([b"old0", b"old1", b"old2", b"old3"], old / "out@3.bag", options=options)
        before = _snapshot(old)
        sink = _TempFolderLostSink(parse_write_path(str(old / "out@3.bag")), coders.BytesCoder(),
                                   options)
        with pytest.raises(Exception, match="NotADirectoryError|Not a directory"):
            with make_pipeline() as p:
                _ = p | beam.Create([b"new"]) | iobase.Write(sink)
        after = {n: b for n, b in _snapshot(old).items() if not n.startswith("beam-temp-")}
        assert after == before
        read = sackli.Reader(str(old / "out@3.bag"), limits_placement=placement).read()
        assert sorted(read) == [b"old0", b"old1", b"old2", b"old3"]


# --- A new write replaces older sets: any count with overwrite=True (5) --------


class TestReplacesOlderSets:
    @PLACEMENTS
    @pytest.mark.parametrize("runner", ["direct", "multi_processing"])
    def test_star_over_another_count(self, tmp_path, placement, runner):
        """`out@*` over a 3-shard set with overwrite=True: one set remains,
        so `out@*` reads are not ambiguous; with SEPARATE the older
        `limits.` files go too."""
        options = sackli.Writer.Options(limits_placement=placement)
        read = sackli.Reader.Options(limits_placement=placement)
        run_write([b"a", b"b", b"c", b"d"], tmp_path / "out@3.bagz", options=options)
        run_write([b"x", b"y"], tmp_path / "out@*.bagz", runner, options=options, num_shards=2,
                  overwrite=True)
        names = shard_names("out", 2, ".bagz")
        assert listing(tmp_path) == (with_limits(names) if placement == SEPARATE else names)
        assert sorted(sackli.Reader(str(tmp_path / "out@*.bagz"), read).read()) == [b"x", b"y"]

    def test_star_lets_the_runner_pick(self, tmp_path):
        run_write([b"%d" % i for i in range(5)], tmp_path / "out@4.bag")
        run_write([b"new"], tmp_path / "out@*.bag", overwrite=True)
        names = shard_set_names(tmp_path, "out", ".bag")
        assert listing(tmp_path) == names
        assert sackli.Reader(str(tmp_path / "out@*.bag")).read() == [b"new"]

    def test_fixed_count_over_another_count(self, tmp_path):
        run_write([b"a", b"b"], tmp_path / "out@2.bag")
        with pytest.raises(Exception, match=r"out@2\.bag .*pass overwrite=True"):
            run_write([b"x", b"y", b"z"], tmp_path / "out@3.bag")
        assert listing(tmp_path) == shard_names("out", 2, ".bag")
        run_write([b"x", b"y", b"z"], tmp_path / "out@3.bag", overwrite=True)
        assert listing(tmp_path) == shard_names("out", 3, ".bag")

    def test_tail_over_separate_drops_the_limits_files(self, tmp_path):
        run_write([b"a"], tmp_path / "out@2.bag", options=sackli.Writer.Options(limits_placement=SEPARATE))
        run_write([b"x"], tmp_path / "out@2.bag")
        assert listing(tmp_path) == shard_names("out", 2, ".bag")
        assert sackli.Reader(str(tmp_path / "out@2.bag")).read() == [b"x"]

    def test_other_outputs_stay(self, tmp_path):
        """Outputs that share the prefix but are other sets are kept:
        `out-2@3.bag`, `out@3.bagz`, `outer@1.bag`, an unsharded `out.bag`."""
        for spec in ["out-2@3.bag", "out@3.bagz", "outer@1.bag", "out.bag@0"]:
            run_write([b"keep"], tmp_path / spec)
        kept = _snapshot(tmp_path)
        run_write([b"a"], tmp_path / "out@3.bag")
        run_write([b"b"], tmp_path / "out@*.bag", num_shards=2, overwrite=True)
        after = _snapshot(tmp_path)
        assert {n: after[n] for n in kept} == kept
        assert sorted(set(after) - set(kept)) == shard_names("out", 2, ".bag")


# --- Upstream's positional signature (8) -------------------------------------


class TestUpstreamSignature:
    def test_positional_compression_type(self, tmp_path):
        """`(path, coder, compression_type)` as bagz's bagzio takes them:
        ZSTD compresses the records of a `.bag`, UNCOMPRESSED keeps those of
        a `.bagz` raw."""
        with make_pipeline() as p:
            records = p | beam.Create(["a" * 50, "b" * 70])
            _ = records | "zstd" >> WriteToSackli(
                str(tmp_path / "z@1.bag"), coders.StrUtf8Coder(), CompressionTypes.ZSTD)
            _ = records | "raw" >> WriteToSackli(
                str(tmp_path / "r@1.bagz"), coders.StrUtf8Coder(), CompressionTypes.UNCOMPRESSED)
        raw = sackli.Reader.Options(compression=sackli.CompressionNone())
        zstd = read_files(tmp_path, ["z-00000-of-00001.bag"], raw)
        assert zstd and all(r.startswith(ZSTD_MAGIC) for r in zstd)
        assert sorted(read_files(tmp_path, ["r-00000-of-00001.bagz"], raw)) == [b"a" * 50, b"b" * 70]
        assert sorted(sackli.Reader(str(tmp_path / "z@1.bag"), compression=sackli.CompressionZstd()).read()) == [
            b"a" * 50, b"b" * 70]

    @pytest.mark.parametrize("compression_type,error", [
        (CompressionTypes.GZIP, ValueError), (CompressionTypes.BZIP2, ValueError), (3, TypeError)])
    def test_unsupported_compression_type(self, tmp_path, compression_type, error):
        with pytest.raises(error, match="compression_type"):
            WriteToSackli(str(tmp_path / "out@2.bagz"), coders.BytesCoder(), compression_type)

    def test_compression_type_contradicting_options(self, tmp_path):
        with pytest.raises(ValueError, match="contradicts"):
            WriteToSackli(str(tmp_path / "out@2.bagz"), coders.BytesCoder(), CompressionTypes.ZSTD,
                          options=sackli.Writer.Options(compression=sackli.CompressionNone()))

    @pytest.mark.parametrize("path", ["out.bagz", "out@4.txt", "out.bag@1"])
    def test_bad_path_message_as_upstream(self, tmp_path, path):
        full = str(tmp_path / path)
        with pytest.raises(ValueError) as info:
            WriteToSackli(full)
        assert str(info.value).startswith(f'File path "{full}" must be in the form')
        assert "dir/name@N.ext" in str(info.value)


# --- Display data (9) ------------------------------------------------------------


def _display(transform) -> dict[str, object]:
    return {item.key: item.value for item in DisplayData.create_from(transform).items}


class TestDisplayData:
    @pytest.mark.parametrize("spec,kwargs,expected", [
        ("out@4.bagz", {}, {"file_pattern": "out-SSSSS-of-NNNNN.bagz", "shards": 4,
                            "record_compression": "zstd level 3", "limits_placement": "TAIL",
                            "coder": "BytesCoder"}),
        ("out@*.bag", {}, {"shards": "decided by the runner", "record_compression": "none"}),
        ("out.bagz@0", {"options": sackli.Writer.Options(
            limits_placement=SEPARATE, compression=sackli.CompressionZstd(level=7))},
         {"file_pattern": "out.bagz", "record_compression": "zstd level 7",
          "limits_placement": "SEPARATE", "shard_name_template": "(one unsharded file)"}),
        ("out@2.bagz", {"compression_type": CompressionTypes.UNCOMPRESSED,
                        "coder": coders.PickleCoder()},
         {"record_compression": "none", "coder": "PickleCoder"}),
        ("out@*.bag", {"max_records_per_shard": 10, "skip_if_empty": True},
         {"max_records_per_shard": 10, "skip_if_empty": True}),
    ])
    def test_what_it_writes(self, tmp_path, spec, kwargs, expected):
        shown = _display(WriteToSackli(str(tmp_path / spec), **kwargs))
        for key, value in expected.items():
            if key == "file_pattern":
                value = str(tmp_path / value)
            assert shown[key] == value, key
        assert "compression" not in shown  # Beam's file-level 'uncompressed'


# --- WriteToText's parameters (10) ----------------------------------------------


class TestBeamParameters:
    @pytest.mark.parametrize("kwargs,names", [
        ({"file_name_suffix": ".bagz", "num_shards": 3}, shard_names("prefix", 3, ".bagz")),
        ({"file_name_suffix": ".bagz", "shard_name_template": ""}, ["prefix.bagz"]),
        ({"file_name_suffix": ".data.bag", "num_shards": 2, "shard_name_template": "_SS"},
         ["prefix_00.data.bag", "prefix_01.data.bag"]),
    ])
    def test_prefix_and_suffix(self, tmp_path, kwargs, names):
        """Beam's `file_path_prefix` + `file_name_suffix` form; the suffix
        decides the compression as in the `@` form."""
        records = [b"r%d" % i for i in range(10)]
        run_write(records, tmp_path / "prefix", **kwargs)
        assert listing(tmp_path) == names
        assert sorted(read_files(tmp_path, names)) == records
        stored = read_files(tmp_path, names, sackli.Reader.Options(compression=sackli.CompressionNone()))
        assert all(r.startswith(ZSTD_MAGIC) for r in stored) == names[0].endswith(".bagz")

    def test_prefix_with_runner_picked_count(self, tmp_path):
        run_write([b"a", b"b"], tmp_path / "prefix", file_name_suffix=".bag")
        names = shard_set_names(tmp_path, "prefix", ".bag")
        assert sorted(read_files(tmp_path, names)) == [b"a", b"b"]

    @pytest.mark.parametrize("path,kwargs,message", [
        ("out@3.bagz", {"file_name_suffix": ".bagz"}, "file_name_suffix"),
        ("out.bagz@0", {"file_name_suffix": ".bagz"}, "file_name_suffix"),
        ("out@3.bagz", {"max_records_per_shard": 10}, "shard count"),
        ("out.bagz@0", {"max_bytes_per_shard": 10}, "shard count"),
        ("prefix", {"file_name_suffix": ".bag", "num_shards": 2, "max_records_per_shard": 1},
         "shard count"),
        ("out@*.bagz", {"max_records_per_shard": 0}, "max_records_per_shard"),
        ("out@*.bagz", {"triggering_frequency": 0}, "triggering_frequency"),
        ("dir/", {"file_name_suffix": ".bag"}, "no file name"),
    ])
    def test_conflicts(self, tmp_path, path, kwargs, message):
        with pytest.raises(ValueError, match=message):
            WriteToSackli(str(tmp_path / path) + ("/" if path.endswith("/") else ""), **kwargs)

    @pytest.mark.parametrize("kwargs", [{"file_name_suffix": 3}, {"max_bytes_per_shard": "1"}])
    def test_bad_types(self, tmp_path, kwargs):
        with pytest.raises(TypeError):
            WriteToSackli(str(tmp_path / "out@*.bag"), **kwargs)

    @pytest.mark.parametrize("kwargs,check", [
        ({"max_records_per_shard": 3}, lambda records: len(records) <= 3),
        ({"max_bytes_per_shard": 25}, lambda records: sum(map(len, records)) < 25 + 10),
    ], ids=["records", "bytes"])
    def test_shard_capacity(self, tmp_path, kwargs, check):
        """20 records of 10 bytes: every shard stops at the limit (bytes
        before compression: a shard is closed once it reached the limit)."""
        records = [b"record%04d" % i for i in range(20)]
        run_write(records, tmp_path / "out@*.bagz", **kwargs)
        names = shard_set_names(tmp_path, "out", ".bagz")
        per_shard = [sackli.Reader(str(tmp_path / n)).read() for n in names]
        assert len(names) >= 7
        assert all(check(shard) for shard in per_shard)
        assert sorted(r for shard in per_shard for r in shard) == records
        assert_reads(ReadFromSackli(str(tmp_path / "out@*.bagz")), records)

    def test_skip_if_empty(self, tmp_path):
        """An empty PCollection writes no shard (without: 3 empty bags),
        and replaces the older output, as WriteToText does."""
        run_write([b"old"], tmp_path / "out@3.bag")
        (tmp_path / "other.bag").write_bytes(b"")
        run_write([], tmp_path / "out@3.bag", skip_if_empty=True)
        assert listing(tmp_path) == ["other.bag"]
