"""`WriteToSackli` (sackli/beam/_sink.py, _write_path.py), run as real
pipelines: every write path form, both suffixes and placements, explicit
compression, shard arguments, coders, empty input, exact file names,
compatibility with bagz, the runners, and the errors."""

from __future__ import annotations

import typing

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.testing.util import assert_that, equal_to
from google.protobuf import timestamp_pb2

import sackli
from sackli.beam import ReadFromSackli, WriteToSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, ZSTD_MAGIC, TAIL, SEPARATE, READ_SEPARATE, WRITE_SEPARATE, SUFFIXES,
    PLACEMENTS, run_write, assert_reads, run_and_expect_failure, make_records, shard_names,
    with_limits, listing, shard_set_names, read_files, read_files_with_bagz, make_pipeline,
)


# --- Writing: round trips -----------------------------------------------------


# (path given to WriteToSackli, final names (None: the runner picks the shard
# count), pattern to read them back). `{ext}` is .bag or .bagz.
PATH_FORMS = [
    ("out@3{ext}", shard_names("out", 3, "{ext}"), "out@3{ext}"),
    ("out@*{ext}", None, "out@*{ext}"),
    ("out{ext}@0", ["out{ext}"], "out{ext}"),
    ("out@0{ext}", ["out{ext}"], "out{ext}"),
    ("out@3.data{ext}", shard_names("out", 3, ".data{ext}"), "out@3.data{ext}"),
    ("out@2_x{ext}", shard_names("out", 2, "_x{ext}"), "out@2_x{ext}"),
]


class TestWriteRoundTrip:
    @SUFFIXES
    @pytest.mark.parametrize("spec,names,read_spec", PATH_FORMS, ids=[f[0] for f in PATH_FORMS])
    def test_path_forms(self, tmp_path, ext, spec, names, read_spec):
        """Every accepted path form writes exactly the expected files, which
        ReadFromSackli, sackli.Reader and the reference bagz all read back;
        the default compression follows the final suffix."""
        records = make_records(300)
        run_write(records, tmp_path / spec.format(ext=ext))
        if names is None:
            names = shard_set_names(tmp_path, "out", ext)
        else:
            names = [name.format(ext=ext) for name in names]
        assert listing(tmp_path) == sorted(names)  # nothing else, no beam-temp-*

        assert_reads(ReadFromSackli(str(tmp_path / read_spec.format(ext=ext))), records)
        assert sorted(read_files(tmp_path, names)) == sorted(records)
        assert sorted(read_files_with_bagz(tmp_path, names)) == sorted(records)

        stored = read_files(tmp_path, names, sackli.Reader.Options(compression=sackli.CompressionNone()))
        if ext == ".bag":
            assert sorted(stored) == sorted(records)
        else:
            assert sum(1 for r in stored if r) == sum(1 for r in records if r)
            assert all(r.startswith(ZSTD_MAGIC) for r in stored if r)

    @SUFFIXES
    def test_separate_placement(self, tmp_path, ext):
        """SEPARATE writes `limits.<final shard name>` beside each shard;
        the shards have no TAIL limits."""
        records = make_records(200, seed=1)
        run_write(records, tmp_path / f"out@3{ext}", options=WRITE_SEPARATE)
        names = shard_names("out", 3, ext)
        assert listing(tmp_path) == with_limits(names)

        assert_reads(ReadFromSackli(str(tmp_path / f"out@3{ext}"), options=READ_SEPARATE), records)
        assert sorted(read_files(tmp_path, names, READ_SEPARATE)) == sorted(records)
        assert sorted(read_files_with_bagz(tmp_path, names, separate=True)) == sorted(records)
        with pytest.raises(sackli.CorruptionError, match="SEPARATE"):
            sackli.Reader(str(tmp_path / names[0]))  # TAIL: the limits are elsewhere

    def test_separate_placement_unsharded(self, tmp_path):
        records = make_records(50, seed=2)
        run_write(records, tmp_path / "one.bagz@0", options=WRITE_SEPARATE)
        assert listing(tmp_path) == ["limits.one.bagz", "one.bagz"]
        assert sackli.Reader(str(tmp_path / "one.bagz"), READ_SEPARATE).read() == records
        assert_reads(ReadFromSackli(str(tmp_path / "one.bagz"), options=READ_SEPARATE), records)

    def test_output_is_the_final_file_names(self, tmp_path):
        with beam.Pipeline() as p:
            written = p | beam.Create([b"a", b"b", b"c"]) | WriteToSackli(
                str(tmp_path / "out@2.bagz"), options=WRITE_SEPARATE)
            assert_that(written, equal_to([str(tmp_path / n) for n in shard_names("out", 2, ".bagz")]))

    def test_zstd_compression_of_a_bag_file(self, tmp_path):
        """Explicit compression wins over the suffix: a `.bag` shard is
        zstd-compressed, so raw reads return frames, not records."""
        records = [b"compressible " * 40 + b"%d" % i for i in range(200)] + [b""]
        run_write(records, tmp_path / "z.bag@0",
                  options=sackli.Writer.Options(compression=sackli.CompressionZstd(level=19)))
        path = tmp_path / "z.bag"
        assert path.stat().st_size < sum(map(len, records)) // 10

        raw = sackli.Reader(str(path), sackli.Reader.Options(compression=sackli.CompressionNone())).read()
        assert raw != records
        assert all(r.startswith(ZSTD_MAGIC) for r in raw if r)
        zstd = sackli.Reader.Options(compression=sackli.CompressionZstd())
        assert sackli.Reader(str(path), zstd).read() == records
        assert_reads(ReadFromSackli(str(path), options=zstd), records)

    def test_no_compression_of_a_bagz_file(self, tmp_path):
        records = [b"compressible " * 40 + b"%d" % i for i in range(100)] + [b""]
        run_write(records, tmp_path / "raw@0.bagz",
                  options=sackli.Writer.Options(compression=sackli.CompressionNone()))
        path = tmp_path / "raw.bagz"
        # TAIL: the records, then one 8-byte limit each.
        assert path.stat().st_size == sum(map(len, records)) + 8 * len(records)
        none = sackli.Reader.Options(compression=sackli.CompressionNone())
        assert sackli.Reader(str(path), none).read() == records
        assert_reads(ReadFromSackli(str(path), options=none), records)

    def test_zstd_dictionary(self, tmp_path):
        dictionary = b"alpha beta gamma delta " * 100
        records = [b"alpha gamma %d beta" % i for i in range(300)]
        compression = sackli.CompressionZstd(level=5, dictionary=dictionary)
        run_write(records, tmp_path / "d@2.bagz", options=sackli.Writer.Options(compression=compression))
        assert listing(tmp_path) == shard_names("d", 2, ".bagz")
        assert_reads(ReadFromSackli(str(tmp_path / "d@2.bagz"),
                                    options=sackli.Reader.Options(compression=compression)), records)
        with pytest.raises(sackli.CorruptionError):
            sackli.Reader(str(tmp_path / "d-00000-of-00002.bagz")).read()  # no dictionary

    def test_num_shards_overrides_star(self, tmp_path):
        records = make_records(100)
        run_write(records, tmp_path / "out@*.bagz", num_shards=4)
        names = shard_names("out", 4, ".bagz")
        assert listing(tmp_path) == names
        assert sorted(read_files(tmp_path, names)) == sorted(records)

    def test_shard_name_template(self, tmp_path):
        records = make_records(60)
        run_write(records, tmp_path / "out@3.bagz", shard_name_template="_SS", options=WRITE_SEPARATE)
        names = ["out_00.bagz", "out_01.bagz", "out_02.bagz"]
        assert listing(tmp_path) == with_limits(names)
        assert_reads(ReadFromSackli(str(tmp_path / "out_*.bagz"), options=READ_SEPARATE), records)

    def test_unsharded_with_num_shards_one(self, tmp_path):
        run_write([b"a", b""], tmp_path / "one.bag@0", num_shards=1)
        assert listing(tmp_path) == ["one.bag"]
        assert sackli.Reader(str(tmp_path / "one.bag")).read() == [b"a", b""]

    @pytest.mark.parametrize("path,kwargs", [
        ("out@3.bagz", {"num_shards": 4}),
        ("out@0.bagz", {"num_shards": 2}),
        ("out.bagz@0", {"num_shards": 3}),
        ("out@*.bagz", {"num_shards": -1}),
        ("out@*.bagz", {"num_shards": 100_000}),
        ("out@100000.bagz", {}),
        ("out@3.bagz", {"shard_name_template": "-of-NN"}),  # no shard number
    ])
    def test_conflicting_shard_arguments(self, tmp_path, path, kwargs):
        with pytest.raises(ValueError):
            WriteToSackli(str(tmp_path / path), **kwargs)

    def test_empty_template_conflicts_with_shard_count(self, tmp_path):
        """`out@3.bagz` names 3 shards, but shard_name_template='' makes
        Beam write one unsharded file `out.bagz` (FileBasedSink sets
        num_shards=1 for an empty template): a ValueError, like the
        num_shards conflicts above."""
        with pytest.raises(ValueError, match="unsharded"):
            WriteToSackli(str(tmp_path / "out@3.bagz"), shard_name_template="")

    def test_uuid_template_with_separate_limits_is_refused(self, tmp_path):
        """A 'U' in the template draws a new UUID per name, so limits files
        could not be named after their shards."""
        separate = sackli.Writer.Options(limits_placement=SEPARATE)
        with pytest.raises(ValueError, match="UUID"):
            WriteToSackli(str(tmp_path / "out@2.bagz"), shard_name_template="-SSSSS-UUUU",
                          options=separate)

    @pytest.mark.parametrize("coder,elements", [
        (coders.PickleCoder(), [(i, "x" * (i % 5), b"\x00" * (i % 3), None) for i in range(200)]),
        (coders.coders.ProtoCoder(timestamp_pb2.Timestamp),
         [timestamp_pb2.Timestamp(seconds=i, nanos=7 * i) for i in range(200)]
         + [timestamp_pb2.Timestamp()]),  # encodes to an empty record
    ], ids=["pickle", "proto"])
    def test_coders(self, tmp_path, coder, elements):
        run_write(elements, tmp_path / "c@2.bagz", coder=coder)
        names = shard_names("c", 2, ".bagz")
        assert listing(tmp_path) == names
        # Each record is the coder's encoding of one element.
        assert sorted(read_files(tmp_path, names)) == sorted(coder.encode(e) for e in elements)
        assert_reads(ReadFromSackli(str(tmp_path / "c@2.bagz"), coder=coder), elements)

    @pytest.mark.parametrize("spec,placement,names", [
        ("out@3.bagz", TAIL, shard_names("out", 3, ".bagz")),
        ("out@*.bag", TAIL, shard_names("out", 1, ".bag")),
        ("out.bagz@0", TAIL, ["out.bagz"]),
        ("out@2.bag", SEPARATE, with_limits(shard_names("out", 2, ".bag"))),
    ])
    def test_empty_pcollection(self, tmp_path, spec, placement, names):
        """An empty PCollection still writes the shards (empty bags: 0 bytes),
        which read back as nothing."""
        run_write([], tmp_path / spec, options=sackli.Writer.Options(limits_placement=placement))
        assert listing(tmp_path) == names
        assert all((tmp_path / n).stat().st_size == 0 for n in names)
        data = [n for n in names if not n.startswith("limits.")]
        options = sackli.Reader.Options(limits_placement=placement)
        assert read_files(tmp_path, data, options) == []
        assert read_files_with_bagz(tmp_path, data, separate=placement == SEPARATE) == []
        pattern = ",".join(str(tmp_path / n) for n in data)
        assert_reads(ReadFromSackli(pattern, options=options), [])

    @PLACEMENTS
    def test_overwrite_with_fewer_elements_than_shards(self, tmp_path, placement):
        """Rewriting `t@3.bag` with fewer non-empty bundles than shards
        leaves no stale shard. (Beam's own pre_finalize, as WriteToText
        shows, deletes old outputs matching `-of-<number of bundles>`, 1
        here, and finalize then keeps an old shard whose size, the local
        'checksum', equals the new one's.) The output must be exactly the
        second run's records."""
        options = sackli.Writer.Options(limits_placement=placement)
        run_write([b"a", b"b", b"c"], tmp_path / "t@3.bag", options=options)
        run_write([b"x"], tmp_path / "t@3.bag", options=options)
        names = shard_names("t", 3, ".bag")
        assert listing(tmp_path) == (with_limits(names) if placement == SEPARATE else names)
        read = sackli.Reader(str(tmp_path / "t@3.bag"), sackli.Reader.Options(limits_placement=placement))
        assert read.read() == [b"x"]


class TestRunners:
    @pytest.mark.parametrize("runner", ["direct", "multi_processing", "portable"])
    def test_round_trip(self, tmp_path, runner):
        """A few thousand records written with `@*` (the runner picks the
        count) and SEPARATE limits, then read back, on each runner."""
        records = make_records(3000, seed=3)
        run_write(records, tmp_path / "out@*.bagz", runner, options=WRITE_SEPARATE)
        names = shard_set_names(tmp_path, "out", ".bagz")
        assert listing(tmp_path) == with_limits(names)
        assert sorted(read_files(tmp_path, names, READ_SEPARATE)) == sorted(records)
        assert_reads(ReadFromSackli(str(tmp_path / "out@*.bagz"), options=READ_SEPARATE),
                     records, runner)


class TestWriteErrors:
    @pytest.mark.parametrize("elements,kind", [([b"ok", "text"], "str"),
                                               ([bytearray(b"ok"), 7], "int")])
    def test_non_bytes_with_bytes_coder(self, tmp_path, elements, kind):
        """Elements typed Any (Beam cannot refuse them when the pipeline is
        built: tests/beam/test_beam_overwrite.py) are checked as they come."""
        def build(p):
            _ = (p | beam.Create(elements).with_output_types(typing.Any)
                 | WriteToSackli(str(tmp_path / "out@2.bagz")))

        run_and_expect_failure(build, "TypeError", f"writes bytes, not {kind}", "pass a coder")
        assert not [n for n in listing(tmp_path) if n.startswith("out")]  # no final shard

    def test_non_bytes_on_the_portable_runner(self, tmp_path):
        with pytest.raises(Exception, match="TypeError: WriteToSackli with BytesCoder writes bytes, not str"):
            with make_pipeline("portable") as p:
                _ = (p | beam.Create([b"ok", "text"]).with_output_types(typing.Any)
                     | WriteToSackli(str(tmp_path / "out@2.bagz")))

    @pytest.mark.parametrize("path", [
        "out.bagz", "out.bag", "out@4.txt", "out@4", "out@-1.bagz", "out@x.bagz", "out@4bagz",
        "out@4-x.bagz", "out.bag@1", "out.bagz@", ".bagz@0", "out@4.bagz.tmp",
    ])
    def test_bad_paths(self, tmp_path, path):
        with pytest.raises(ValueError, match="accepted forms") as info:
            WriteToSackli(str(tmp_path / path))
        assert path in str(info.value)

    @pytest.mark.parametrize("args,kwargs,message", [
        ((123,), {}, "int"),
        (("out@2.bagz",), {"options": sackli.Reader.Options()}, "sackli.Writer.Options"),
        (("out@2.bagz",), {"options": {"compression": "zstd"}}, "sackli.Writer.Options"),
        (("out@2.bagz", bytes), {}, "Coder"),
        (("out@*.bagz",), {"num_shards": "3"}, "num_shards"),
        (("out@*.bagz",), {"num_shards": True}, "num_shards"),
        (("out@*.bagz",), {"shard_name_template": 5}, "shard_name_template"),
    ])
    def test_bad_types(self, args, kwargs, message):
        with pytest.raises(TypeError, match=message):
            WriteToSackli(*args, **kwargs)
