"""Classic templates: the transforms take ValueProviders for their paths
(and WriteToSackli for its suffix and shard count, ReadAllFromSackli for its
compression type and bundle size), resolved only when the pipeline runs;
and WriteToSackli takes a bare prefix ("dir/name"), as WriteToTFRecord does.

A template is built with options that are RuntimeValueProviders (not
accessible while the pipeline is built) and launched with values. Here the
values are the launch's pipeline args: multi_processing workers read them at
startup, as Dataflow's workers do; the in-memory runner installs no runtime
options of its own (`{}`), so `launch` hands it the values.
"""

from __future__ import annotations

import os
import pickle

import apache_beam as beam
import cloudpickle
import dill
import pytest
from apache_beam import coders
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.value_provider import RuntimeValueProvider, StaticValueProvider
from apache_beam.testing.util import assert_that, equal_to

import sackli
from sackli import datasets
from sackli.beam import (
    ReadAllFromSackli,
    ReadFromSackli,
    ReadFromSackliBatched,
    ReadFromSackliDataset,
    WriteToSackli,
    WriteToSackliDataset,
)
from sackli.beam._provided import Derived
from sackli.beam._write_path import parse_write_path
from beam_helpers import (  # noqa: F401 (_quiet_beam: a fixture)
    RUNNER_ARGS,
    _quiet_beam,
    make_pipeline,
    make_records,
    shard_names,
)

RUNNERS = pytest.mark.parametrize("runner", ["direct", "multi_processing"])
SPEC = {"label": "int(8)", "words": "utf8[]"}
PICKLERS = pytest.mark.parametrize("pickler", [pickle, dill, cloudpickle], ids=lambda m: m.__name__)


class TemplateOptions(PipelineOptions):
    """A template's own options, as `add_value_provider_argument` makes them."""

    @classmethod
    def _add_argparse_args(cls, parser):
        for name in ("in_pattern", "out_path", "out_suffix", "read_compression", "dataset_folder"):
            parser.add_value_provider_argument(f"--{name}", type=str)
        for name in ("out_shards", "bundle_bytes"):
            parser.add_value_provider_argument(f"--{name}", type=int)


@pytest.fixture
def template(monkeypatch):
    """The options as a pipeline built for a template sees them: each a
    RuntimeValueProvider, not accessible. (Any pipeline run earlier in this
    process made them accessible, with their defaults: forget that.)"""
    monkeypatch.setattr(RuntimeValueProvider, "runtime_options", None)
    options = TemplateOptions([])
    assert isinstance(options.out_path, RuntimeValueProvider)
    assert not options.out_path.is_accessible()
    return options


@pytest.fixture
def launch(monkeypatch):
    """`launch(build, values, runner)`: runs the pipeline `build(p)` builds
    as a launch of the template with `values` (option -> str)."""
    def run(build, values: dict[str, str], runner: str = "direct") -> None:
        args = RUNNER_ARGS[runner] + [f"--{name}={v}" for name, v in values.items()]
        if runner == "direct":
            monkeypatch.setattr(
                RuntimeValueProvider, "set_runtime_options",
                classmethod(lambda cls, unused: setattr(cls, "runtime_options", dict(values))))
        with beam.Pipeline(options=PipelineOptions(args)) as p:
            build(p)
    return run


def _fails(launch, build, values, *fragments: str, runner: str = "direct") -> str:
    """The launch fails with an error whose text holds every fragment
    (runners wrap the worker's exception: checked on text)."""
    with pytest.raises(Exception) as info:
        launch(build, values, runner)
    text = f"{type(info.value).__name__}: {info.value}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text[-2000:]}"
    return text


def _write_set(folder, name: str, records: list[bytes], count: int = 2) -> str:
    """`folder/name@count.bagz` written by sackli; its pattern."""
    pattern = str(folder / f"{name}@{count}.bagz")
    with sackli.ShardedWriter(pattern) as writer:
        writer.write_many(records)
    return pattern


def _read_set(folder, names: list[str]) -> list[bytes]:
    records = []
    for name in names:
        with sackli.Reader(str(folder / name)) as reader:
            records += list(reader)
    return records


# --- Reads ------------------------------------------------------------------------


@RUNNERS
def test_read_from_a_provided_pattern(tmp_path, template, launch, runner):
    records = make_records(40)
    pattern = _write_set(tmp_path, "in", records)
    read = ReadFromSackli(template.in_pattern)  # validate=True: the listing waits for the run
    launch(lambda p: assert_that(p | read, equal_to(records)), {"in_pattern": pattern}, runner)


def test_read_batched_from_a_provided_pattern(tmp_path, template, launch):
    records = make_records(30, seed=1)
    pattern = _write_set(tmp_path, "in", records)
    read = ReadFromSackliBatched(template.in_pattern, decode="raw")
    launch(lambda p: assert_that(p | read | beam.FlatMap(list), equal_to(records)),
           {"in_pattern": pattern})


@RUNNERS
def test_read_all_with_provided_compression_and_bundle_size(tmp_path, template, launch, runner):
    # zstd records in a `.bag` file: AUTO would yield the frames, ZSTD the records.
    records = [b"record %d " % i * 20 for i in range(50)]
    path = str(tmp_path / "zstd-records.bag")
    with sackli.Writer(path, sackli.Writer.Options(compression=sackli.CompressionZstd())) as w:
        w.write_many(records)
    read = ReadAllFromSackli(compression_type=template.read_compression,
                             desired_bundle_size=template.bundle_bytes)
    launch(lambda p: assert_that(p | beam.Create([path]) | read, equal_to(records)),
           {"read_compression": CompressionTypes.ZSTD, "bundle_bytes": "100"}, runner)


def test_read_all_checks_the_provided_values_at_run_time(tmp_path, template, launch):
    path = str(tmp_path / "x.bag")
    with sackli.Writer(path) as w:
        w.write_many([b"a", b"b"])
    with pytest.raises(ValueError) as plain_size:
        ReadAllFromSackli(desired_bundle_size=0)
    with pytest.raises(ValueError) as plain_compression:
        ReadAllFromSackli(compression_type=CompressionTypes.GZIP)
    # Both built before a launch makes the providers accessible.
    read_size = ReadAllFromSackli(desired_bundle_size=template.bundle_bytes)
    read_compression = ReadAllFromSackli(compression_type=template.read_compression)
    _fails(launch, lambda p: p | beam.Create([path]) | read_size, {"bundle_bytes": "0"},
           str(plain_size.value))
    _fails(launch, lambda p: p | beam.Create([path]) | read_compression,
           {"read_compression": CompressionTypes.GZIP}, str(plain_compression.value))


@pytest.mark.parametrize("transform", [ReadFromSackli, ReadFromSackliBatched])
def test_a_missing_provided_file_fails_at_run_time_as_a_plain_one(
        tmp_path, template, launch, transform):
    missing = str(tmp_path / "missing@2.bagz")
    with pytest.raises(FileNotFoundError) as plain:
        transform(missing)  # validate=True: a listing while the pipeline is built
    read = transform(template.in_pattern)  # nothing to list yet
    _fails(launch, lambda p: p | read, {"in_pattern": missing}, str(plain.value))


def test_a_malformed_provided_pattern_fails_at_run_time_as_a_plain_one(tmp_path, template, launch):
    bad = f"{tmp_path}/a.bag,,{tmp_path}/b.bag"
    with pytest.raises(ValueError) as plain:
        ReadFromSackli(bad)
    read = ReadFromSackli(template.in_pattern)
    _fails(launch, lambda p: p | read, {"in_pattern": bad}, str(plain.value))


def test_as_rows_needs_the_pattern_while_the_pipeline_is_built(template):
    with pytest.raises(ValueError, match="as_rows=True .* known only at run time"):
        ReadFromSackli(template.in_pattern, as_rows=True)


def test_an_accessible_provider_is_checked_while_the_pipeline_is_built(tmp_path):
    # A StaticValueProvider (what `--in_pattern=...` given at construction
    # makes) is a value: listed, parsed and refused at once.
    with pytest.raises(FileNotFoundError):
        ReadFromSackli(StaticValueProvider(str, str(tmp_path / "missing@2.bagz")))
    with pytest.raises(ValueError, match="must be in the form"):
        WriteToSackli(StaticValueProvider(str, str(tmp_path / "out.bag")))
    with pytest.raises(ValueError, match="file_pattern is empty"):
        ReadFromSackli(StaticValueProvider(str, ""))
    with pytest.raises(ValueError, match="directory is empty"):
        ReadFromSackliDataset(StaticValueProvider(str, ""))


def test_static_providers_read_and_write_as_values(tmp_path):
    records = make_records(20, seed=2)
    out = StaticValueProvider(str, str(tmp_path / "out"))
    with make_pipeline() as p:
        _ = p | beam.Create(records) | WriteToSackli(
            out, file_name_suffix=StaticValueProvider(str, ".bagz"),
            num_shards=StaticValueProvider(int, 2))
    names = shard_names("out", 2, ".bagz")
    assert sorted(os.listdir(tmp_path)) == names
    with make_pipeline() as p:
        assert_that(p | ReadFromSackli(StaticValueProvider(str, str(tmp_path / "out@2.bagz"))),
                    equal_to(records))


# --- Writes -----------------------------------------------------------------------


@RUNNERS
def test_write_to_a_provided_path(tmp_path, template, launch, runner):
    records = make_records(60, seed=3)
    write = WriteToSackli(template.out_path)
    out = tmp_path / "out"
    out.mkdir()

    def build(p):
        files = p | beam.Create(records) | write
        assert_that(files, equal_to([str(out / n) for n in shard_names("part", 3, ".bagz")]))

    launch(build, {"out_path": str(out / "part@3.bagz")}, runner)
    names = shard_names("part", 3, ".bagz")
    assert sorted(os.listdir(out)) == names
    assert sorted(_read_set(out, names)) == sorted(records)


@pytest.mark.parametrize("shards,expected", [("4", 4), ("0", None)])
def test_write_with_provided_prefix_suffix_and_shard_count(
        tmp_path, template, launch, shards, expected):
    records = make_records(50, seed=4)
    write = WriteToSackli(template.out_path, file_name_suffix=template.out_suffix,
                          num_shards=template.out_shards)
    launch(lambda p: p | beam.Create(records) | write,
           {"out_path": str(tmp_path / "pre"), "out_suffix": ".data.bagz", "out_shards": shards})
    names = sorted(os.listdir(tmp_path))
    count = expected or len(names)  # 0: the runner decides
    assert names == shard_names("pre", count, ".data.bagz")
    assert sorted(_read_set(tmp_path, names)) == sorted(records)


def test_a_provided_shard_count_pads_with_empty_shards(tmp_path, template, launch):
    write = WriteToSackli(template.out_path, num_shards=template.out_shards)
    launch(lambda p: p | beam.Create([b"only"]) | write,
           {"out_path": str(tmp_path / "few@*.bag"), "out_shards": "3"})
    names = shard_names("few", 3, ".bag")
    assert sorted(os.listdir(tmp_path)) == names
    assert _read_set(tmp_path, names) == [b"only"]


@pytest.mark.parametrize("skip_if_empty,expected", [(False, 1), (True, 0)])
def test_an_empty_write_to_a_provided_path(tmp_path, template, launch, skip_if_empty, expected):
    write = WriteToSackli(template.out_path, skip_if_empty=skip_if_empty)
    launch(lambda p: p | beam.Create([], reshuffle=False).with_output_types(bytes) | write,
           {"out_path": str(tmp_path / "empty@*.bag")})
    assert sorted(os.listdir(tmp_path)) == shard_names("empty", expected, ".bag")


def test_provided_shard_limits_start_new_shards(tmp_path, template, launch):
    records = [b"%03d" % i for i in range(10)]
    write = WriteToSackli(template.out_path, max_records_per_shard=3)
    launch(lambda p: p | beam.Create(records, reshuffle=False) | write,
           {"out_path": str(tmp_path / "lim@*.bag")})
    names = sorted(os.listdir(tmp_path))
    assert len(names) >= 4
    assert sorted(_read_set(tmp_path, names)) == records


def test_a_provided_path_replaces_the_older_set(tmp_path, template, launch):
    _write_set(tmp_path, "out", [b"old"] * 5, count=2)
    write = WriteToSackli(template.out_path)
    launch(lambda p: p | beam.Create([b"new"]) | write, {"out_path": str(tmp_path / "out@2.bagz")})
    names = shard_names("out", 2, ".bagz")
    assert sorted(os.listdir(tmp_path)) == names
    assert _read_set(tmp_path, names) == [b"new"]


def test_schema_rows_to_a_provided_path(tmp_path, template, launch):
    rows = [beam.Row(n=i, s=f"r{i}") for i in range(8)]
    write = WriteToSackli(template.out_path)
    launch(lambda p: p | beam.Create(rows) | write, {"out_path": str(tmp_path / "rows@2.bagz")})
    with make_pipeline() as p:
        read = p | ReadFromSackli(str(tmp_path / "rows@2.bagz"), as_rows=True)
        assert_that(read | beam.Map(lambda r: (r.n, r.s)), equal_to([(i, f"r{i}") for i in range(8)]))


@pytest.mark.parametrize("path", ["out.bag", "dir/", "out@4.txt"])
def test_a_malformed_provided_path_fails_at_run_time_as_a_plain_one(
        tmp_path, template, launch, path):
    full = str(tmp_path / path) + ("/" if path.endswith("/") else "")
    with pytest.raises(ValueError) as plain:
        WriteToSackli(full)
    write = WriteToSackli(template.out_path)
    _fails(launch, lambda p: p | beam.Create([b"x"]) | write, {"out_path": full}, str(plain.value))
    assert not [n for n in os.listdir(tmp_path) if not n.startswith("dir")]


def test_settings_that_need_the_path_are_checked_at_run_time(tmp_path, template, launch):
    with pytest.raises(ValueError) as plain:
        WriteToSackli(str(tmp_path / "out@3.bag"), max_records_per_shard=2)
    write = WriteToSackli(template.out_path, max_records_per_shard=2)
    _fails(launch, lambda p: p | beam.Create([b"x"]) | write,
           {"out_path": str(tmp_path / "out@3.bag")}, str(plain.value))


def test_unbounded_input_to_a_provided_path(tmp_path, template, launch):
    """A stream's shard sets (one per window) go where the launch says;
    the window template and the shard count are settled on the workers."""
    from apache_beam.testing.test_stream import TestStream

    stream = (TestStream()
              .add_elements([beam.window.TimestampedValue(b"e%d" % t, t) for t in (1, 2, 3, 12)])
              .advance_watermark_to_infinity())
    write = WriteToSackli(template.out_path, triggering_frequency=10)
    launch(lambda p: p | stream | write, {"out_path": str(tmp_path / "out@2.bag")})
    first = "out-1970-01-01T00-00-00_1970-01-01T00-00-10"
    second = "out-1970-01-01T00-00-10_1970-01-01T00-00-20"
    assert sorted(os.listdir(tmp_path)) == [
        f"{window}-{shard:05d}-of-00002.bag" for window in (first, second) for shard in range(2)]
    assert sorted(sackli.Reader(str(tmp_path / f"{first}@2.bag"))) == [b"e1", b"e2", b"e3"]
    assert list(sackli.Reader(str(tmp_path / f"{second}@2.bag"))) == [b"e12"]


# --- Datasets ---------------------------------------------------------------------


@RUNNERS
def test_dataset_write_and_read_with_provided_folders(tmp_path, template, launch, runner):
    points = [{"label": i, "words": [f"w{i}"] * (i % 3)} for i in range(25)]
    folder = str(tmp_path / "ds")
    # Both built as templates are, before any launch (after one, Beam deems
    # RuntimeValueProviders accessible in this process, with their defaults).
    write = WriteToSackliDataset(template.dataset_folder, SPEC, shard_length=10)
    read = ReadFromSackliDataset(template.dataset_folder)
    launch(lambda p: p | beam.Create(points) | write, {"dataset_folder": folder}, runner)
    with datasets.ShardedDatasetReader(folder) as reader:
        assert sorted(reader, key=lambda d: d["label"]) == points
    launch(lambda p: assert_that(p | read | beam.Map(lambda d: d["label"]),
                                 equal_to(list(range(25)))),
           {"dataset_folder": folder}, runner)


def test_a_missing_provided_dataset_fails_at_run_time(tmp_path, template, launch):
    read = ReadFromSackliDataset(template.dataset_folder)
    _fails(launch, lambda p: p | read, {"dataset_folder": str(tmp_path / "none")}, "FileNotFoundError")


# --- Display data, pickling -------------------------------------------------------


def _display(transform) -> dict[str, object]:
    return {key: item.value for key, item in transform.display_data().items()}


def test_display_data_says_what_is_resolved_at_run_time(template):
    out = "RuntimeValueProvider(option: out_path, type: str, default_value: None)"
    write = _display(WriteToSackli(template.out_path, num_shards=template.out_shards))
    assert write["file_path"] == out
    assert write["num_shards"] == "RuntimeValueProvider(option: out_shards, type: int, default_value: None)"
    assert write["record_compression"] == "auto (zstd for .bagz names)"
    pattern = "RuntimeValueProvider(option: in_pattern, type: str, default_value: None)"
    for read in (ReadFromSackli(template.in_pattern), ReadFromSackliBatched(template.in_pattern)):
        assert _display(read)["file_pattern"] == f"resolved at run time from {pattern}"
    read_all = _display(ReadAllFromSackli(compression_type=template.read_compression,
                                          desired_bundle_size=template.bundle_bytes))
    assert read_all["compression_type"].startswith("RuntimeValueProvider(option: read_compression")
    assert read_all["desired_bundle_size"] == "resolved at run time from RuntimeValueProvider(" \
        "option: bundle_bytes, type: int, default_value: None)"
    dataset = "resolved at run time from RuntimeValueProvider(option: dataset_folder, type: str, " \
        "default_value: None)"
    assert _display(ReadFromSackliDataset(template.dataset_folder))["directory"] == dataset
    assert _display(WriteToSackliDataset(template.dataset_folder, SPEC))["directory"] == dataset


@PICKLERS
def test_what_workers_get_pickles_and_resolves_there(template, pickler, monkeypatch):
    sink = WriteToSackli(template.out_path, num_shards=template.out_shards)._sink
    source = ReadFromSackli(template.in_pattern)._source
    options = ReadAllFromSackli(compression_type=template.read_compression)._options
    dataset_sink = WriteToSackliDataset(template.dataset_folder, SPEC)._sink
    assert isinstance(sink, Derived) and isinstance(options, Derived)
    copies = [pickler.loads(pickler.dumps(part)) for part in (sink, source, options, dataset_sink)]
    monkeypatch.setattr(RuntimeValueProvider, "runtime_options", {
        "out_path": "dir/out@*.bagz", "out_shards": "2", "in_pattern": "in@3.bag",
        "read_compression": CompressionTypes.UNCOMPRESSED, "dataset_folder": "ds"})
    sink, source, options, dataset_sink = copies
    assert sink.get().where.pattern() == "dir/out-SSSSS-of-NNNNN.bagz"
    assert sink.get().num_shards == 2
    assert source.pattern == "in@3.bag"
    assert options.get().compression == sackli.CompressionNone()
    assert dataset_sink.directory == "ds"


# --- A bare prefix ----------------------------------------------------------------


@pytest.mark.parametrize("kwargs,suffix", [
    ({}, ".bag"),
    ({"compression_type": CompressionTypes.UNCOMPRESSED}, ".bag"),
    ({"compression_type": CompressionTypes.ZSTD}, ".bagz"),
    ({"options": sackli.Writer.Options(compression=sackli.CompressionZstd(level=5))}, ".bagz"),
    ({"options": sackli.Writer.Options(compression=sackli.CompressionNone())}, ".bag"),
])
def test_a_bare_prefix_takes_the_suffix_of_its_compression(tmp_path, kwargs, suffix):
    records = [b"record %d " % i * 10 for i in range(30)]
    with make_pipeline() as p:
        _ = p | beam.Create(records) | WriteToSackli(str(tmp_path / "out"), num_shards=2, **kwargs)
    names = shard_names("out", 2, suffix)
    assert sorted(os.listdir(tmp_path)) == names
    assert sorted(_read_set(tmp_path, names)) == sorted(records)  # the suffix tells the Reader


@pytest.mark.parametrize("num_shards", [None, 0])
def test_a_bare_prefix_lets_the_runner_decide(tmp_path, num_shards):
    records = make_records(40, seed=5)
    with make_pipeline() as p:
        _ = p | beam.Create(records) | WriteToSackli(str(tmp_path / "out"), num_shards=num_shards)
    names = sorted(os.listdir(tmp_path))
    assert names == shard_names("out", len(names), ".bag")
    assert sorted(_read_set(tmp_path, names)) == sorted(records)


def test_a_bare_prefix_with_an_empty_template_is_one_file(tmp_path):
    with make_pipeline() as p:
        _ = p | beam.Create([b"a", b"b"]) | WriteToSackli(
            str(tmp_path / "single"), coders.BytesCoder(), CompressionTypes.ZSTD,
            shard_name_template="")
    assert os.listdir(tmp_path) == ["single.bagz"]
    assert sorted(_read_set(tmp_path, ["single.bagz"])) == [b"a", b"b"]


@pytest.mark.parametrize("path,kwargs,shown", [
    ("dir/name", {}, "dir/name-SSSSS-of-NNNNN.bag"),
    ("dir/name", {"num_shards": 3}, "dir/name-SSSSS-of-NNNNN.bag"),
    ("dir/name.v2", {}, "dir/name.v2-SSSSS-of-NNNNN.bag"),
    ("dir/name", {"file_name_suffix": ".bagz"}, "dir/name-SSSSS-of-NNNNN.bagz"),
    ("dir/name@3.bagz", {}, "dir/name-SSSSS-of-NNNNN.bagz"),
    ("dir/name.bag@0", {}, "dir/name.bag"),
])
def test_accepted_forms(path, kwargs, shown):
    assert parse_write_path(path, **kwargs).pattern() == shown


@pytest.mark.parametrize("path", ["dir/", "dir/name.bag", "dir/name.bagz", "dir/name@3", "dir/@"])
def test_malformed_prefixes_are_refused(path):
    with pytest.raises(ValueError, match="must be in the form"):
        WriteToSackli(path)
