"""The Apache Beam connectors of `sackli.beam`: `WriteToSackli`,
`ReadFromSackli` and `ReadAllFromSackli`, run as real pipelines.

Covered here:
* round trips for every write path form, both suffixes, both limits
  placements, explicit compression (and dictionaries), shard count and shard
  name template arguments, non-bytes coders, empty records and empty
  PCollections; the exact file names on disk (no `beam-temp-*` left behind);
  compatibility of the written files with Google's reference `bagz` package;
* the DirectRunner (in-process and multi-processing) and the portable runner;
* reading the bagz 0.3.8 golden files, comma lists, shard specs and Beam
  globs (which must skip SEPARATE `limits.` files), `with_metadata`;
* `ReadAllFromSackli` over a PCollection of patterns, split into ranges;
* the sources' splitting contract (`source_test_utils`), byte-position
  estimates that never open a bag, and dynamic work rebalancing;
* validation without I/O at construction, and the errors for bad input,
  missing files and corrupt bags;
* writing to S3 through Beam's own file system, against moto's server.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import random
import re

import apache_beam as beam
import bagz
import boto3
import pytest
from apache_beam import coders
from apache_beam.io import source_test_utils
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from google.protobuf import timestamp_pb2

import sackli
from sackli.beam import ReadAllFromSackli, ReadFromSackli, WriteToSackli
from sackli import _storage
from sackli._bulk import record_offsets
from sackli.beam import sacklio
from sackli.beam._files import BagFile, expand_pattern
from sackli.beam._source import FileSource, PatternSource, ReadFileRanges

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
TAIL = sackli.LimitsPlacement.TAIL
SEPARATE = sackli.LimitsPlacement.SEPARATE
READ_TAIL = sackli.Reader.Options()
READ_SEPARATE = sackli.Reader.Options(limits_placement=SEPARATE)
WRITE_SEPARATE = sackli.Writer.Options(limits_placement=SEPARATE)
SUFFIXES = pytest.mark.parametrize("ext", [".bag", ".bagz"])
PLACEMENTS = pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["TAIL", "SEPARATE"])

# The golden file names (for parametrization; the `golden_manifest` fixture
# gives their records).
GOLDEN_NAMES = sorted(
    json.loads((pathlib.Path(__file__).parent / "data" / "MANIFEST.json").read_text())["files"]
)

RUNNER_ARGS = {
    "direct": [],
    "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
}


@pytest.fixture(autouse=True)
def _quiet_beam():
    """Beam logs a warning per shard deleted or split trial observed; keep
    test output readable."""
    logger = logging.getLogger("apache_beam")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


# --- Helpers -------------------------------------------------------------------


def make_pipeline(runner: str = "direct") -> beam.Pipeline:
    return beam.Pipeline(options=PipelineOptions(RUNNER_ARGS[runner]))


def run_write(elements, path, runner: str = "direct", **kwargs) -> None:
    """Writes `elements` with WriteToSackli(path, **kwargs) in a pipeline."""
    with make_pipeline(runner) as p:
        _ = p | beam.Create(elements) | WriteToSackli(str(path), **kwargs)


def assert_reads(read: beam.PTransform, expected, runner: str = "direct") -> None:
    """Runs `p | read` and asserts its output is the multiset `expected`."""
    with make_pipeline(runner) as p:
        assert_that(p | read, equal_to(list(expected)))


def run_and_expect_failure(build, *fragments: str) -> str:
    """Runs the pipeline `build(p)` builds; it must fail with an error whose
    type name and message contain every fragment. Beam may wrap the original
    exception (the portable runner raises RuntimeError with the worker's
    traceback), so the check is on text, not on the exception type."""
    with pytest.raises(Exception) as info:
        with beam.Pipeline() as p:
            build(p)
    text = f"{type(info.value).__name__}: {info.value}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text[-2000:]}"
    return text


def make_records(n: int, seed: int = 0) -> list[bytes]:
    """`n` records of varied sizes, every 7th empty and the last two empty."""
    rng = random.Random(seed)
    records = [
        b"" if i % 7 == 3 else b"%d:" % i + rng.randbytes(rng.randrange(0, 40))
        for i in range(n)
    ]
    if n >= 2:
        records[-2:] = [b"", b""]
    return records


def write_bag(path, records, placement=TAIL) -> pathlib.Path:
    """A bag written by sackli.Writer (no record: an empty bag)."""
    with sackli.Writer(path, sackli.Writer.Options(limits_placement=placement)) as w:
        w.write_many(list(records))
    return pathlib.Path(path)


def shard_names(base: str, count: int, suffix: str) -> list[str]:
    return [f"{base}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def with_limits(names: list[str]) -> list[str]:
    return sorted(names + ["limits." + name for name in names])


def listing(folder: pathlib.Path) -> list[str]:
    """Every entry of `folder` (files and folders, so a left-over
    `beam-temp-*` folder shows)."""
    return sorted(os.listdir(folder))


def shard_set_names(folder: pathlib.Path, base: str, suffix: str) -> list[str]:
    """The names of the one complete shard set `base-SSSSS-of-NNNNN suffix`
    in `folder` (whatever N the runner picked); fails otherwise."""
    shape = re.compile(re.escape(base) + r"-(\d{5})-of-(\d{5})" + re.escape(suffix))
    matches = [shape.fullmatch(name) for name in os.listdir(folder)]
    counts = {int(m.group(2)) for m in matches if m}
    assert len(counts) == 1, f"expected one shard set, found counts {counts} in {listing(folder)}"
    (count,) = counts
    names = shard_names(base, count, suffix)
    assert sorted(m.group(0) for m in matches if m) == names
    return names


def read_files(folder: pathlib.Path, names, options=READ_TAIL) -> list[bytes]:
    return [r for name in names for r in sackli.Reader(str(folder / name), options).read()]


def read_files_with_bagz(folder: pathlib.Path, names, separate: bool = False) -> list[bytes]:
    """The records of the files, read by Google's reference bagz package."""
    options = bagz.Reader.Options(limits_placement=bagz.LimitsPlacement.SEPARATE) if separate else None
    records = []
    for name in names:
        reader = bagz.Reader(str(folder / name), options) if options else bagz.Reader(str(folder / name))
        records.extend(bytes(r) for r in reader)
    return records


def golden_expected(name: str, entry: dict) -> list[bytes]:
    if "expected" in entry:
        return entry["expected"]
    return [b"%d:%d" % (shard, j) for shard, n in enumerate(entry["shard_sizes"]) for j in range(n)]


def golden_options(entry: dict) -> sackli.Reader.Options:
    return READ_SEPARATE if entry.get("limits_placement") == "SEPARATE" else READ_TAIL


def bytes_source(pattern, options=READ_TAIL, with_metadata=False) -> PatternSource:
    return PatternSource(str(pattern), options, coders.BytesCoder(), with_metadata)


def file_source(path, options=READ_TAIL) -> FileSource:
    (file,) = expand_pattern(str(path), options)
    return FileSource(file, options, coders.BytesCoder(), False)


def record_positions(path, options=READ_TAIL) -> list[int]:
    """Record i's position: its begin offset + 8 * i (see sackli.beam._source)."""
    with sackli.Reader(str(path), options) as reader:
        return [record_offsets(reader, 0, i, 0)[0] + 8 * i for i in range(len(reader))]


# --- Writing: round trips -------------------------------------------------------

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
        def build(p):
            _ = p | beam.Create(elements) | WriteToSackli(str(tmp_path / "out@2.bagz"))

        run_and_expect_failure(build, "TypeError", f"writes bytes, not {kind}", "pass a coder")
        assert not [n for n in listing(tmp_path) if n.startswith("out")]  # no final shard

    def test_non_bytes_on_the_portable_runner(self, tmp_path):
        with pytest.raises(Exception, match="TypeError: WriteToSackli with BytesCoder writes bytes, not str"):
            run_write([b"ok", "text"], tmp_path / "out@2.bagz", "portable")

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


# --- Reading ---------------------------------------------------------------------


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


@pytest.fixture
def bag_dir(tmp_path):
    """Bags written by sackli.Writer: a plain `plain.bagz`, a shard set
    `set@3.bag` (uneven, one shard empty) and SEPARATE `g0.bagz`, `g1.bagz`
    (with their `limits.` files) in `glob/`."""
    write_bag(tmp_path / "plain.bagz", [b"p0", b"", b"p2"])
    for name, records in zip(shard_names("set", 3, ".bag"), [[b"s0", b"s1", b""], [], [b"s2"]]):
        write_bag(tmp_path / name, records)
    (tmp_path / "glob").mkdir()
    for i in range(2):
        write_bag(tmp_path / "glob" / f"g{i}.bagz", [b"g%d" % i, b"", b"g%d!" % i], SEPARATE)
    write_bag(tmp_path / "glob" / "other.bag", [b"not matched by *.bagz"])
    return tmp_path


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


class TestValidation:
    def test_no_io_without_validate(self, tmp_path):
        """validate=False touches no storage: the folder need not exist."""
        for pattern in ["nope@4.bagz", "nope@*.bagz", "*.bagz", "nope.bag"]:
            read = ReadFromSackli(str(tmp_path / "missing" / pattern), validate=False)
            assert isinstance(read, ReadFromSackli)
        assert not (tmp_path / "missing").exists()

    def test_path_created_after_construction(self, tmp_path):
        read = ReadFromSackli(str(tmp_path / "late@2.bagz"), validate=False)
        read_all = ReadAllFromSackli()
        write_bag(tmp_path / "late-00000-of-00002.bagz", [b"l0", b""])
        write_bag(tmp_path / "late-00001-of-00002.bagz", [b"l1"])
        assert_reads(read, [b"l0", b"", b"l1"])
        assert_reads(beam.Create([str(tmp_path / "late@*.bagz")]) | read_all, [b"l0", b"", b"l1"])

    def test_missing_file(self, tmp_path):
        path = str(tmp_path / "nope.bagz")
        with pytest.raises(FileNotFoundError, match=re.escape(path)) as info:
            ReadFromSackli(path)
        assert info.value.filename == path

    def test_missing_shard(self, tmp_path):
        for i in (0, 1, 3):
            write_bag(tmp_path / f"s-{i:05d}-of-00004.bagz", [b"x"])
        missing = str(tmp_path / "s-00002-of-00004.bagz")
        with pytest.raises(FileNotFoundError, match="shard 2 of 4 is missing") as info:
            ReadFromSackli(str(tmp_path / "s@4.bagz"))
        assert info.value.filename == missing

    def test_missing_shard_set(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="no shards match"):
            ReadFromSackli(str(tmp_path / "s@*.bagz"))
        with pytest.raises(FileNotFoundError, match="shard 0 of 4 is missing"):
            ReadFromSackli(str(tmp_path / "no_dir" / "s@4.bagz"))

    def test_glob_without_match(self, tmp_path):
        pattern = str(tmp_path / "*.bagz")
        with pytest.raises(FileNotFoundError, match="no files match") as info:
            ReadFromSackli(pattern)
        assert info.value.filename == pattern

    def test_missing_limits_file(self, golden_dir):
        with pytest.raises(FileNotFoundError, match="limits file") as info:
            ReadFromSackli(str(golden_dir / "tail.bagz"), options=READ_SEPARATE)
        assert info.value.filename == str(golden_dir / "limits.tail.bagz")

    def test_ambiguous_star(self, tmp_path):
        write_bag(tmp_path / "a-00000-of-00001.bagz", [b"x"])
        for i in range(2):
            write_bag(tmp_path / f"a-{i:05d}-of-00002.bagz", [b"y"])
        with pytest.raises(ValueError, match="ambiguous"):
            ReadFromSackli(str(tmp_path / "a@*.bagz"))
        assert_reads(ReadFromSackli(str(tmp_path / "a@2.bagz")), [b"y", b"y"])  # a count is fine

    @pytest.mark.parametrize("args,kwargs,error,message", [
        ((123,), {}, TypeError, "int"),
        ((b"x.bagz",), {}, TypeError, "bytes"),
        (("x.bagz",), {"options": sackli.Writer.Options()}, TypeError, "sackli.Reader.Options"),
        (("x.bagz", bytes), {}, TypeError, "Coder"),
        (("",), {}, ValueError, "empty"),
        (("http://host/x.bagz",), {"validate": False}, ValueError, "not supported"),
    ])
    def test_bad_arguments(self, args, kwargs, error, message):
        with pytest.raises(error, match=message):
            ReadFromSackli(*args, **kwargs)

    @pytest.mark.parametrize("validate", [True, False])
    def test_empty_entry(self, bag_dir, validate):
        """Caught at construction, without I/O, also with validate=False."""
        for pattern in (f"{bag_dir}/plain.bagz,", f",{bag_dir}/plain.bagz"):
            with pytest.raises(ValueError, match="empty entry"):
                ReadFromSackli(pattern, validate=validate)

    @pytest.mark.parametrize("kwargs,error", [
        ({"desired_bundle_size": 0}, ValueError),
        ({"desired_bundle_size": "64"}, TypeError),
        ({"desired_bundle_size": True}, TypeError),
        ({"options": sackli.Writer.Options()}, TypeError),
        ({"coder": str}, TypeError),
    ])
    def test_read_all_bad_arguments(self, kwargs, error):
        with pytest.raises(error):
            ReadAllFromSackli(**kwargs)


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


class LatinCoder(coders.Coder):
    """Records as latin-1 str."""

    def encode(self, value):
        return value.encode("latin-1")

    def decode(self, encoded):
        return encoded.decode("latin-1")

    def is_deterministic(self):
        return True

    def to_type_hint(self):
        return str


# --- Splitting and dynamic work rebalancing -------------------------------------


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


# --- S3 through Beam's file system ------------------------------------------------

BUCKET = "sackli-beam-test"


@pytest.fixture(scope="module")
def s3_endpoint():
    """The URL of a moto S3 server (in a thread) with the bucket BUCKET."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        s3_client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        server.stop()


def s3_client(url: str):
    return boto3.client("s3", aws_access_key_id="testing", aws_secret_access_key="testing",
                        region_name="us-east-1", endpoint_url=url)


class TestS3:
    @PLACEMENTS
    def test_write(self, s3_endpoint, tmp_path, monkeypatch, placement):
        # Beam takes the credentials from the pipeline options; the
        # environment only keeps a real profile of the machine out of it.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        prefix = f"{placement.name.lower()}/dir"
        records = make_records(500, seed=7)
        pipeline_options = PipelineOptions([
            f"--s3_endpoint_url={s3_endpoint}", "--s3_access_key_id=testing",
            "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"])
        names = shard_names("out", 3, ".bagz")
        with beam.Pipeline(options=pipeline_options) as p:
            written = p | beam.Create(records) | WriteToSackli(
                f"s3://{BUCKET}/{prefix}/out@3.bagz",
                options=sackli.Writer.Options(limits_placement=placement))
            assert_that(written, equal_to([f"s3://{BUCKET}/{prefix}/{n}" for n in names]))

        client = s3_client(s3_endpoint)
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix=placement.name.lower() + "/")
        keys = sorted(o["Key"] for o in listed.get("Contents", []))
        expected = with_limits(names) if placement == SEPARATE else names
        assert keys == [f"{prefix}/{n}" for n in expected]  # no temporary keys left
        for name in expected:
            client.download_file(BUCKET, f"{prefix}/{name}", str(tmp_path / name))
        options = sackli.Reader.Options(limits_placement=placement)
        assert sorted(read_files(tmp_path, names, options)) == sorted(records)
        assert sorted(read_files_with_bagz(tmp_path, names, placement == SEPARATE)) == sorted(records)

        # Read back in a pipeline: Beam's S3 file system lists the shards,
        # sackli's own S3 back-end (configured by the environment) reads them.
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        _storage.reset_clients()
        try:
            for pattern in (f"s3://{BUCKET}/{prefix}/out@*.bagz", f"s3://{BUCKET}/{prefix}/*.bagz"):
                with beam.Pipeline(options=pipeline_options) as p:
                    read = p | ReadFromSackli(pattern, options=options, validate=False)
                    assert_that(read, equal_to(records))
        finally:
            _storage.reset_clients()


def test_public_names():
    assert sacklio.ReadFromSackli is ReadFromSackli
    assert sacklio.ReadAllFromSackli is ReadAllFromSackli
    assert sacklio.WriteToSackli is WriteToSackli
