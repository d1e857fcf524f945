"""The Beam connectors pickle with the standard library's `pickle`, with
`dill` and with `cloudpickle` (runners ship sources, sinks and DoFns to
workers with whichever `--pickle_library` says), and still work once
unpickled: a sink writes, a source reads the same records. Then whole
pipelines run with `--pickle_library=dill` and `=cloudpickle`.

Every object is built through the public transforms, as a pipeline builds
it, and held state is module-level (no lambda or local function in a
source, sink or DoFn)."""

from __future__ import annotations

import operator
import pickle

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.internal import pickler
from apache_beam.io import source_test_utils
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import sackli
import sackli.datasets
from sackli.beam import (
    ReadAllFromSackli, ReadFromSackli, ReadFromSackliBatched, ReadFromSackliDataset,
    WriteToSackli, WriteToSackliDataset,
)
from sackli.beam._file_sink import SackliSink
from sackli.beam._rows import BatchesToRows, EncodeRows, WriteSchemaFile, row_schema
from sackli.beam._source import ReadFileRanges
from sackli.beam._stream_write import WritePanes
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, SEPARATE, listing, shard_names,
)

dill = pytest.importorskip("dill")
cloudpickle = pytest.importorskip("cloudpickle")

LIBRARIES = pytest.mark.parametrize("library", [pickle, dill, cloudpickle],
                                    ids=["pickle", "dill", "cloudpickle"])
RECORDS = [b"r%02d" % i for i in range(20)]


def _round_trip(library, obj):
    copy = library.loads(library.dumps(obj))
    assert type(copy) is type(obj)
    return copy


@pytest.fixture(autouse=True)
def _default_pickler():
    """A pipeline's --pickle_library stays Beam's setting after it: put
    Beam's default back for the tests that follow."""
    yield
    pickler.set_library(pickler.DEFAULT_PICKLE_LIB)


@pytest.fixture
def bags(tmp_path):
    """`in@2.bag` (SEPARATE limits) holding RECORDS."""
    with sackli.ShardedWriter(str(tmp_path / "in@2.bag"), limits_placement=SEPARATE) as writer:
        writer.write_many(RECORDS)
    return tmp_path


READ = sackli.Reader.Options(limits_placement=SEPARATE)


# --- Sinks -------------------------------------------------------------------------------


def _run_sink(sink, elements) -> list[str]:
    """Writes `elements` through `sink` as Beam's Write does, in one bundle."""
    init = sink.initialize_write()
    writer = sink.open_writer(init, "bundle-0")
    for element in elements:
        writer.write(element)
    results = [writer.close()]
    pre = sink.pre_finalize(init, results)
    return list(sink.finalize_write(init, results, pre))


@LIBRARIES
@pytest.mark.parametrize("coder,elements", [
    (coders.BytesCoder(), RECORDS),
    (coders.StrUtf8Coder(), [r.decode() for r in RECORDS]),
], ids=["bytes", "str"])
def test_bag_sink(tmp_path, library, coder, elements):
    sink = _round_trip(library, WriteToSackli(str(tmp_path / "out@1.bag"), coder)._sink)
    assert _run_sink(sink, elements) == [str(tmp_path / "out-00000-of-00001.bag")]
    assert sackli.Reader(str(tmp_path / "out@1.bag")).read() == RECORDS
    with pytest.raises(TypeError if coder == coders.BytesCoder() else AttributeError):
        _run_sink(sink, [7])  # the encoder came along


@LIBRARIES
def test_sackli_sink(tmp_path, library):
    sink = _round_trip(library, SackliSink())
    with open(tmp_path / "one.bag", "wb") as file:
        sink.open(file)
        for record in RECORDS:
            sink.write(record)
        sink.flush()
    assert sackli.Reader(str(tmp_path / "one.bag")).read() == RECORDS
    checked = _round_trip(library, SackliSink())
    with open(tmp_path / "two.bag", "wb") as file:
        checked.open(file)
        with pytest.raises(TypeError, match="writes bytes, not int"):  # the encoder came along
            checked.write(7)
        checked.flush()


@LIBRARIES
def test_dataset_sink(tmp_path, library):
    sink = _round_trip(library, WriteToSackliDataset(str(tmp_path / "ds"), {"x": "int"})._sink)
    _run_sink(sink, [{"x": i} for i in range(5)])
    with sackli.datasets.ShardedDatasetReader(str(tmp_path / "ds")) as reader:
        assert [point["x"] for point in reader] == list(range(5))


# --- Sources -----------------------------------------------------------------------------


@LIBRARIES
def test_pattern_and_file_sources(bags, library):
    source = _round_trip(library, ReadFromSackli(str(bags / "in@2.bag"), options=READ)._source)
    assert sorted(source_test_utils.read_from_source(source)) == RECORDS
    for bundle in source.split(desired_bundle_size=64):  # the FileSources of the files
        part = _round_trip(library, bundle.source)
        assert source_test_utils.read_from_source(part) == source_test_utils.read_from_source(
            bundle.source)


@LIBRARIES
@pytest.mark.parametrize("decode", ["raw", None])
def test_batched_source(bags, library, decode):
    source = ReadFromSackliBatched(str(bags / "in@2.bag"), decode, options=READ)._source
    copy = _round_trip(library, source)
    batches = source_test_utils.read_from_source(copy)
    records = [r for b in batches for r in (b if decode == "raw" else b.column(0).to_pylist())]
    assert sorted(records) == RECORDS


@LIBRARIES
def test_dataset_source(tmp_path, library):
    with sackli.datasets.ShardedDatasetWriter(str(tmp_path / "ds"), {"x": "int"}) as writer:
        for i in range(6):
            writer.append({"x": i})
    source = _round_trip(library, ReadFromSackliDataset(str(tmp_path / "ds"))._source)
    points = source_test_utils.read_from_source(source)
    assert sorted(point["x"] for point in points) == list(range(6))


# --- DoFns and the transforms' held state ----------------------------------------------


@LIBRARIES
def test_read_file_ranges(bags, library):
    transform = _round_trip(library, ReadAllFromSackli(options=READ))
    fn = _round_trip(library, ReadFileRanges(transform._options, transform._coder, False, 64))
    assert isinstance(fn, ReadFileRanges)


@LIBRARIES
def test_row_fns(library):
    pa = pytest.importorskip("pyarrow")
    from sackli.beam._rows import _beam_row_type

    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    make = _beam_row_type(schema, "test")  # a class Beam generates
    to_rows = _round_trip(library, BatchesToRows(make))
    batch = pa.record_batch({"id": [1, 2], "name": ["a", "b"]})
    assert [tuple(r) for r in to_rows.process(batch)] == [(1, "a"), (2, "b")]
    assert _round_trip(library, EncodeRows(schema))._schema == schema
    assert _round_trip(library, WriteSchemaFile(schema))._message == WriteSchemaFile(schema)._message
    assert row_schema(make) is not None


@LIBRARIES
def test_transforms(tmp_path, bags, library):
    """Each transform, unpickled, still builds and runs its pipeline."""
    write = _round_trip(library, WriteToSackli(str(tmp_path / "out@2.bag")))
    streaming = WriteToSackli(str(tmp_path / "win@1.bag"))._sink
    assert isinstance(_round_trip(library, WritePanes(streaming)), WritePanes)
    read = _round_trip(library, ReadFromSackli(str(bags / "in@2.bag"), options=READ))
    read_all = _round_trip(library, ReadAllFromSackli(options=READ))
    with beam.Pipeline() as p:
        records = p | read
        _ = records | write
        assert_that(records, equal_to(RECORDS), label="read")
        assert_that(p | beam.Create([str(bags / "in@2.bag")]) | read_all, equal_to(RECORDS),
                    label="read_all")
    assert sorted(sackli.Reader(str(tmp_path / "out@2.bag")).read()) == RECORDS


# --- Pipelines with --pickle_library ---------------------------------------------------------


@pytest.mark.parametrize("library", ["dill", "cloudpickle"])
@pytest.mark.parametrize("runner", ["direct", "multi_processing"])
def test_pipelines_with_the_pickle_library(tmp_path, bags, library, runner):
    """Bytes, rows and datasets written and read back in pipelines whose
    functions Beam pickles with `library`. (No function of this module in
    them: dill pickles those by reference, and workers cannot import a
    test module.)"""
    flags = [f"--pickle_library={library}"]
    if runner == "multi_processing":
        flags += ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    rows = [beam.Row(id=i, name=f"n{i}") for i in range(12)]
    with beam.Pipeline(options=PipelineOptions(flags)) as p:
        records = p | "Read" >> ReadFromSackli(str(bags / "in@2.bag"), options=READ)
        _ = records | "Write" >> WriteToSackli(str(tmp_path / "out@*.bagz"), num_shards=3)
        _ = p | "Rows" >> beam.Create(rows) | "WriteRows" >> WriteToSackli(str(tmp_path / "rows@2.bag"))
        _ = (p | "Points" >> beam.Create([{"x": i} for i in range(7)])
             | "WriteDataset" >> WriteToSackliDataset(str(tmp_path / "ds"), {"x": "int"}))
    assert listing(tmp_path).count("rows-of-00002.bag.arrow_schema") == 1
    assert set(shard_names("out", 3, ".bagz")) <= set(listing(tmp_path))
    with beam.Pipeline(options=PipelineOptions(flags)) as p:
        assert_that(p | "Bytes" >> ReadFromSackli(str(tmp_path / "out@*.bagz")), equal_to(RECORDS),
                    label="bytes")
        as_rows = p | "AsRows" >> ReadFromSackli(str(tmp_path / "rows@2.bag"), as_rows=True)
        assert_that(as_rows | "RowTuples" >> beam.Map(tuple),
                    equal_to([(i, f"n{i}") for i in range(12)]), label="rows")
        batches = p | "Batches" >> ReadFromSackliBatched(str(tmp_path / "out@*.bagz"), "raw")
        assert_that(batches | beam.FlatMap(list), equal_to(RECORDS), label="batches")
        points = p | "Dataset" >> ReadFromSackliDataset(str(tmp_path / "ds"))
        assert_that(points | "X" >> beam.Map(operator.itemgetter("x")), equal_to(list(range(7))),
                    label="dataset")
        read_all = p | beam.Create([str(bags / "in@*.bag")]) | ReadAllFromSackli(options=READ)
        assert_that(read_all, equal_to(RECORDS), label="read_all")
