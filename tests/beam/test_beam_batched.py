"""`ReadFromSackliBatched` (Arrow batches and raw lists) and schema-aware
pipelines (`as_rows=True`, schema'd writes), on real DirectRunner
pipelines."""

from __future__ import annotations

import apache_beam as beam
import pyarrow as pa
import pytest
from apache_beam.dataframe.convert import to_dataframe, to_pcollection
from apache_beam.io import range_trackers
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.display import DisplayData

import sackli
import sackli.arrow
from sackli.beam import ReadFromSackli, ReadFromSackliBatched, WriteToSackli
from sackli.beam._batched import ArrowBatchCoder, _BatchMaker, read_batches_of_range
from sackli.beam._files import expand_pattern
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, READ_TAIL, make_pipeline, make_records, write_bag,
)


def _flatten(batches):
    records = []
    for batch in batches:
        records.extend(batch if isinstance(batch, list) else batch.column("record").to_pylist())
    return records


@pytest.fixture
def shard_set(tmp_path):
    """`set@3.bag`: three shards of 40, 0 and 25 records."""
    records = [make_records(40, seed=1), [], make_records(25, seed=2)]
    for i, shard in enumerate(records):
        write_bag(tmp_path / f"set-{i:05d}-of-00003.bag", shard)
    return str(tmp_path / "set@3.bag"), [r for shard in records for r in shard]


@pytest.fixture
def table_set(tmp_path):
    """`t@2.bagz` written by sackli.arrow.write_table with Arrow rows."""
    table = pa.table({
        "id": pa.array(range(300), pa.int64()),
        "name": [f"n{i}" for i in range(300)],
        "score": [i / 4 for i in range(300)],
        "tags": [[f"t{j}" for j in range(i % 3)] for i in range(300)],
    })
    spec = str(tmp_path / "t@2.bagz")
    sackli.arrow.write_table(table, spec, encoding="arrow")
    return spec, table


class TestBatchedReads:
    def test_raw_lists_hold_every_record_once(self, shard_set):
        spec, records = shard_set
        with make_pipeline() as p:
            batches = p | ReadFromSackliBatched(spec, decode="raw", batch_size=7)
            assert_that(batches | beam.FlatMap(lambda b: b), equal_to(records), label="records")
            assert_that(batches | beam.Map(len) | beam.CombineGlobally(max), equal_to([7]),
                        label="sizes")

    def test_record_batches(self, shard_set):
        spec, records = shard_set
        with make_pipeline() as p:
            batches = p | ReadFromSackliBatched(spec, batch_size=16)
            assert_that(batches | beam.FlatMap(lambda b: b.column("record").to_pylist()),
                        equal_to(records), label="records")
            assert_that(batches | beam.Map(lambda b: (tuple(b.schema.names), str(b.schema.field(0).type)))
                        | beam.Distinct(), equal_to([(("record",), "large_binary")]), label="schema")

    def test_arrow_rows_with_columns(self, table_set):
        spec, table = table_set
        expected = table.select(["name", "id"]).to_pylist()
        with make_pipeline() as p:
            batches = p | ReadFromSackliBatched(spec, "arrow", ["name", "id"], batch_size=50)
            assert_that(batches | beam.FlatMap(lambda b: b.to_pylist()), equal_to(expected))

    def test_a_schema_that_differs_from_the_schema_file_fails_naming_the_field(self, table_set):
        spec, _ = table_set
        wrong = pa.schema([("id", pa.int64()), ("score", pa.float32())])
        with pytest.raises(ValueError, match=r"schema= differs from the set's schema file .* "
                                             r"at field 'score'"):
            with make_pipeline() as p:
                _ = p | ReadFromSackliBatched(spec, "arrow", schema=wrong, batch_size=50)

    def test_a_projection_with_a_widening_cast_reads_by_name(self, table_set):
        spec, table = table_set
        schema = pa.schema([("score", pa.float64()), ("id", pa.int64()),
                            ("name", pa.large_string())])
        expected = table.select(["score", "id", "name"]).to_pylist()
        with make_pipeline() as p:
            batches = p | ReadFromSackliBatched(spec, "arrow", schema=schema, batch_size=50)
            assert_that(batches | beam.FlatMap(lambda b: b.to_pylist()), equal_to(expected),
                        label="rows")
            assert_that(batches | beam.Map(lambda b: str(b.schema)) | beam.Distinct(),
                        equal_to([str(schema)]), label="schema")

    def test_dictionary_columns_keep_the_recorded_dictionary(self, tmp_path):
        kinds = pa.Table.from_batches([
            pa.record_batch({"kind": pa.array(["b", "a", "b"]).dictionary_encode()}),
            pa.record_batch({"kind": pa.array(["c", "a"]).dictionary_encode()}),
        ])
        spec = str(tmp_path / "k@2.bagz")
        sackli.arrow.write_table(kinds, spec)
        with make_pipeline() as p:
            batches = p | ReadFromSackliBatched(spec, "arrow", batch_size=2)
            assert_that(batches | beam.Map(lambda b: tuple(b.column("kind").dictionary.to_pylist()))
                        | beam.Distinct(), equal_to([("b", "a", "c")]), label="dictionary")
            assert_that(batches | beam.FlatMap(lambda b: b.column("kind").indices.to_pylist()),
                        equal_to([0, 1, 0, 2, 1]), label="codes")

    def test_multi_processing_runner(self, shard_set):
        spec, records = shard_set
        with make_pipeline("multi_processing") as p:
            batches = p | ReadFromSackliBatched(spec, decode="raw", batch_size=5)
            assert_that(batches | beam.FlatMap(lambda b: b), equal_to(records))

    def test_raw_takes_no_columns(self, shard_set):
        with pytest.raises(ValueError, match="decode='raw'"):
            ReadFromSackliBatched(shard_set[0], "raw", ["a"])

    def test_bad_batch_size(self, shard_set):
        with pytest.raises(ValueError, match="batch_size"):
            ReadFromSackliBatched(shard_set[0], batch_size=0)

    def test_display_data(self, table_set):
        read = ReadFromSackliBatched(table_set[0], "arrow", ["id"], batch_size=64)
        shown = {i.key: i.value for i in DisplayData.create_from(read).items}
        assert shown["decode"] == "arrow"
        assert shown["columns"] == "id"
        assert shown["batch_size"] == 64
        assert shown["coder"] == "ArrowBatchCoder"

    def test_arrow_batch_coder_round_trip(self, table_set):
        batch = table_set[1].to_batches()[0]
        coder = ArrowBatchCoder()
        assert coder.decode(coder.encode(batch)).equals(batch)


class TestSplitsWhileReading:
    """Every split point of a file, taken while its second batch is
    pending: the primary's batches and the residual's hold every record
    exactly once."""

    @pytest.mark.parametrize("batch_size", [1, 4, 9])
    def test_exhaustive_splits(self, tmp_path, batch_size):
        records = make_records(30, seed=9)
        path = str(write_bag(tmp_path / "s.bag", records))
        (file,) = expand_pattern(path, READ_TAIL)
        make = _BatchMaker("raw", None, None, batch_size)
        for split in range(file.size + 1):
            tracker = range_trackers.OffsetRangeTracker(0, file.size)
            batches = read_batches_of_range(path, READ_TAIL, tracker, make)
            primary = [next(batches)]
            accepted = tracker.try_split(split)
            primary.extend(batches)
            got = _flatten(primary)
            if accepted:
                residual = range_trackers.OffsetRangeTracker(split, file.size)
                got += _flatten(read_batches_of_range(path, READ_TAIL, residual, make))
            assert got == records, f"split at {split} (accepted: {bool(accepted)})"


class TestRows:
    @pytest.mark.parametrize("runner", ["direct", "multi_processing"])
    def test_read_as_rows(self, table_set, runner):
        spec, table = table_set
        with make_pipeline(runner) as p:
            rows = p | ReadFromSackli(spec, as_rows=True)
            assert_that(rows | beam.Map(lambda r: (r.id, r.name, r.score, list(r.tags))),
                        equal_to([(r["id"], r["name"], r["score"], r["tags"])
                                  for r in table.to_pylist()]))

    def test_rows_work_with_the_dataframe_api(self, table_set):
        spec, table = table_set
        with make_pipeline() as p:
            rows = p | ReadFromSackli(spec, as_rows=True)
            frame = to_dataframe(rows)
            total = to_pcollection(frame[["id"]].sum(), yield_elements="pandas")
            assert_that(total | beam.Map(lambda s: int(s["id"])), equal_to([sum(range(300))]))

    def test_types_beam_cannot_hold(self, tmp_path):
        table = pa.table({"at": pa.array([0, 1], pa.timestamp("us", "UTC")), "n": [1, 2]})
        spec = str(tmp_path / "ts.bagz")
        sackli.arrow.write_table(table, spec, encoding="arrow")
        with pytest.raises(ValueError, match="column 'at' has Arrow type timestamp"):
            ReadFromSackli(spec, as_rows=True)

    def test_no_schema_file(self, shard_set):
        with pytest.raises(FileNotFoundError, match="no Arrow schema"):
            ReadFromSackli(shard_set[0], as_rows=True)

    def test_write_schemad_pcollection(self, tmp_path):
        rows = [beam.Row(id=i, name=f"n{i}", score=i / 2) for i in range(100)]
        spec = str(tmp_path / "out@2.bagz")
        with make_pipeline() as p:
            _ = p | beam.Create(rows) | WriteToSackli(spec)
        assert sackli.arrow.row_encoding(spec) == "row"
        table = sackli.arrow.read_table(spec, decode="arrow")
        assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [
            {"id": i, "name": f"n{i}", "score": i / 2} for i in range(100)]
        with make_pipeline() as p:
            back = p | ReadFromSackli(spec, as_rows=True)
            assert_that(back | beam.Map(tuple), equal_to([tuple(r) for r in rows]))

    def test_a_coder_keeps_rows_as_the_coder_says(self, tmp_path):
        spec = str(tmp_path / "out@1.bag")
        with make_pipeline() as p:
            _ = (p | beam.Create([beam.Row(a=1)])
                 | WriteToSackli(spec, beam.coders.PickleCoder()))
        assert sackli.arrow.row_encoding(spec) is None
