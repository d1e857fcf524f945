"""The element types the read transforms declare (sacklio.py, datasetio.py):
what Beam sees on the output PCollection, so that type checks downstream
run when the pipeline is built."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam import coders
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.typehints import TypeCheckError
from apache_beam.typehints.native_type_compatibility import convert_to_beam_type

import sackli.arrow
from sackli.beam import (
    ReadAllFromSackli, ReadFromSackli, ReadFromSackliBatched, ReadFromSackliDataset,
)
from sackli.beam._batched import ArrowBatchCoder
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, LatinCoder, make_pipeline, make_records, write_bag,
)


class SilentCoder(coders.Coder):
    """A coder that does not say what it decodes to (no to_type_hint)."""

    def encode(self, value):
        return value

    def decode(self, encoded):
        return encoded

    def is_deterministic(self):
        return True


@pytest.fixture
def bag(tmp_path):
    path = write_bag(tmp_path / "r.bag", make_records(10, seed=1))
    return str(path)


@pytest.fixture
def table_bag(tmp_path):
    table = pa.table({"id": pa.array(range(20), pa.int64()), "name": [f"n{i}" for i in range(20)]})
    sackli.arrow.write_table(table, str(tmp_path / "t.bag"), encoding="arrow")
    return str(tmp_path / "t.bag")


def _element_type(read: beam.PTransform, label: str = "Read") -> Any:
    return (beam.Pipeline() | label >> read).element_type


def _same(declared: Any, expected: Any) -> bool:
    return declared == convert_to_beam_type(expected)


class TestReadFromSackli:
    @pytest.mark.parametrize("coder,with_metadata,expected", [
        (coders.BytesCoder(), False, bytes),
        (coders.StrUtf8Coder(), False, str),
        (LatinCoder(), False, str),
        (SilentCoder(), False, Any),
        (coders.BytesCoder(), True, Tuple[str, int, bytes]),
        (LatinCoder(), True, Tuple[str, int, str]),
        (SilentCoder(), True, Tuple[str, int, Any]),
    ], ids=["bytes", "str", "coder-type", "coder-silent", "meta-bytes", "meta-coder",
            "meta-silent"])
    def test_declared_type(self, bag, coder, with_metadata, expected):
        read = ReadFromSackli(bag, coder, with_metadata=with_metadata)
        assert _same(_element_type(read), expected)

    def test_a_mismatched_consumer_fails_when_the_pipeline_is_built(self, bag):
        p = beam.Pipeline()
        records = p | ReadFromSackli(bag)
        with pytest.raises(TypeCheckError, match="bytes"):
            _ = records | beam.Map(len).with_input_types(int)

    def test_a_matching_consumer_builds_and_runs(self, bag):
        with make_pipeline() as p:
            sizes = (p | ReadFromSackli(bag) | beam.Map(len).with_input_types(bytes)
                     | beam.CombineGlobally(sum))
            assert_that(sizes, equal_to([sum(map(len, make_records(10, seed=1)))]))

    def test_metadata_tuples_check_their_parts(self, bag):
        p = beam.Pipeline()
        read = p | ReadFromSackli(bag, with_metadata=True)
        _ = read | "Fine" >> beam.Map(lambda t: t[1]).with_input_types(Tuple[str, int, bytes])
        with pytest.raises(TypeCheckError):
            _ = read | "Bad" >> beam.Map(lambda t: t[1]).with_input_types(Tuple[str, str, bytes])

    def test_rows_declare_their_row_type(self, table_bag):
        read = ReadFromSackli(table_bag, as_rows=True)
        declared = _element_type(read)
        assert declared == read._row_type
        assert [name for name, _ in declared.__annotations__.items()] == ["id", "name"]

    def test_the_pcollection_coder_matches_the_source(self, bag):
        # Beam takes a PCollection's coder from its element type.
        for read, coder in [(ReadFromSackli(bag), coders.BytesCoder()),
                            (ReadFromSackli(bag, with_metadata=True), coders.TupleCoder(
                                [coders.StrUtf8Coder(), coders.VarIntCoder(), coders.BytesCoder()]))]:
            assert coders.registry.get_coder(_element_type(read)) == coder


class TestReadFromSackliBatched:
    @pytest.mark.parametrize("decode", [None, "arrow", "row", "json", pa.RecordBatch.from_arrays])
    def test_record_batches(self, table_bag, decode):
        if callable(decode):
            decode = _decode_records
        read = ReadFromSackliBatched(table_bag, decode, validate=False)
        assert _element_type(read) is pa.RecordBatch

    def test_raw_lists(self, bag):
        declared = _element_type(ReadFromSackliBatched(bag, "raw"))
        assert _same(declared, List[bytes])
        assert coders.registry.get_coder(declared) == coders.ListCoder(coders.BytesCoder())

    def test_type_checks(self, bag):
        p = beam.Pipeline()
        batches = p | ReadFromSackliBatched(bag)
        _ = batches | "Fine" >> beam.Map(lambda b: b.num_rows).with_input_types(pa.RecordBatch)
        with pytest.raises(TypeCheckError):
            _ = batches | "Bad" >> beam.Map(len).with_input_types(bytes)
        raw = p | "Raw" >> ReadFromSackliBatched(bag, "raw")
        with pytest.raises(TypeCheckError):
            _ = raw | "BadRaw" >> beam.Map(len).with_input_types(pa.RecordBatch)

    def test_batches_travel_with_the_arrow_coder(self, table_bag):
        declared = _element_type(ReadFromSackliBatched(table_bag, "arrow"))
        assert isinstance(coders.registry.get_coder(declared), ArrowBatchCoder)
        with make_pipeline() as p:
            rows = (p | ReadFromSackliBatched(table_bag, "arrow") | beam.Reshuffle()  # batches cross a stage boundary
                    | beam.FlatMap(lambda b: b.column("id").to_pylist()))
            assert_that(rows, equal_to(list(range(20))))


def _decode_records(records: pa.LargeBinaryArray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([records], ["bytes"])


class TestReadAll:
    @pytest.mark.parametrize("coder,with_metadata,expected", [
        (coders.BytesCoder(), False, bytes),
        (SilentCoder(), False, Any),
        (coders.BytesCoder(), True, Tuple[str, int, bytes]),
        (SilentCoder(), True, Tuple[str, int, Any]),
    ])
    def test_declared_type(self, coder, with_metadata, expected):
        p = beam.Pipeline()
        read = p | beam.Create(["x.bag"]) | ReadAllFromSackli(coder, with_metadata=with_metadata)
        assert _same(read.element_type, expected)


class TestReadFromSackliDataset:
    def test_datapoints_are_dicts(self, tmp_path):
        read = ReadFromSackliDataset(str(tmp_path / "ds"))
        declared = _element_type(read)
        assert _same(declared, Dict[str, Any])
        assert coders.registry.get_coder(declared) == read._source.default_output_coder()
        p = beam.Pipeline()
        points = p | ReadFromSackliDataset(str(tmp_path / "ds"))
        with pytest.raises(TypeCheckError):
            _ = points | beam.Map(len).with_input_types(bytes)
