"""One overwrite rule for `WriteToSackli` and `sackli.ShardedWriter`
(sackli/_set_conflicts.py, sackli/beam/_sink.py), and the element types
`WriteToSackli` declares (sackli/beam/sacklio.py).

- Writing `name@2` where a set `name@3` exists is refused (FileExistsError
  naming the existing set, telling to pass overwrite=True) before anything
  under the final names changes: when the pipeline starts for a fixed
  count, at finalisation for `@*`. The old set stays byte for byte.
- `overwrite=True` puts the new set in place, then deletes the other set
  with its `limits.` files, schema file and (on a bucket) manifest.
- A set of the same count is replaced, with or without `overwrite`.
- Streaming: the same rule, per window and pane.
- With the default BytesCoder, Beam's construction-time type check refuses
  elements that are not bytes-like (schema'd rows still write as Arrow
  rows); another coder takes the type its `to_type_hint()` names.

Real pipelines on the DirectRunner (in-memory and multi_processing), local
and on moto's S3 server through Beam's own S3 file system.
"""

from __future__ import annotations

import shutil
import typing

import apache_beam as beam
import pytest
from apache_beam import coders
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_stream
from apache_beam.transforms import window
from apache_beam.transforms.display import DisplayData
from apache_beam.typehints.decorators import TypeCheckError

import sackli
from sackli.beam import ReadFromSackli, WriteToSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, RUNNER_ARGS, SEPARATE, TAIL, PLACEMENTS, assert_reads, listing, run_write, shard_names,
    with_limits,
)  # noqa: F401
from remote_helpers import Remote, servers  # noqa: F401 (fixture)

RUNNERS = pytest.mark.parametrize("runner", ["direct", "multi_processing"])
OLD = [b"old %d" % i for i in range(7)]
NEW = [b"new %d" % i for i in range(4)]


# The functional form: `from __future__ import annotations` would leave a
# class body's annotations as strings, which Beam's schemas do not resolve.
Row = typing.NamedTuple("Row", [("id", int), ("name", str)])


beam.coders.registry.register_coder(Row, beam.coders.RowCoder)


def _snapshot(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in listing(folder)}


def _write_rows(spec, rows, **kwargs) -> None:
    with beam.Pipeline() as p:
        _ = p | beam.Create(rows) | WriteToSackli(str(spec), **kwargs)


def _refused(spec, elements, runner="direct", **kwargs) -> str:
    """Runs a write that must be refused; the message of the failure."""
    with pytest.raises(Exception) as info:
        run_write(elements, spec, runner, **kwargs)
    text = str(info.value)
    assert "FileExistsError" in f"{type(info.value).__name__}: {text}", text[-2000:]
    return text


def _read(spec, placement=TAIL) -> list[bytes]:
    return sorted(sackli.Reader(str(spec), limits_placement=placement).read())


# --- Refused without overwrite ---------------------------------------------------


class TestRefused:
    @RUNNERS
    @PLACEMENTS
    def test_a_fixed_count_is_refused_before_the_write_starts(self, tmp_path, runner, placement):
        options = sackli.Writer.Options(limits_placement=placement)
        run_write(OLD, tmp_path / "out@3.bagz", options=options)
        before = _snapshot(tmp_path)
        text = _refused(tmp_path / "out@2.bagz", NEW, runner, options=options)
        assert f"{tmp_path}/out@3.bagz ({tmp_path}/out-00000-of-00003.bagz and 2 more file(s))" in text
        assert "pass overwrite=True" in text and f"{tmp_path}/out@*.bagz ambiguous" in text
        assert "InitializeWrite" in text  # before any shard was written
        assert _snapshot(tmp_path) == before  # not even a temporary folder
        assert _read(tmp_path / "out@*.bagz", placement) == sorted(OLD)

    @RUNNERS
    def test_star_is_refused_before_any_shard_is_renamed(self, tmp_path, runner):
        """`@*` learns its count at finalisation: refused there, before the
        moves; its temporary folder is removed too."""
        run_write(OLD, tmp_path / "out@3.bag")
        before = _snapshot(tmp_path)
        text = _refused(tmp_path / "out@*.bag", NEW, runner, num_shards=2)
        assert f"{tmp_path}/out@3.bag (" in text and "overwrite=True" in text
        assert _snapshot(tmp_path) == before
        assert _read(tmp_path / "out@*.bag") == sorted(OLD)

    def test_every_other_set_is_named(self, tmp_path):
        run_write(OLD, tmp_path / "out@3.bag")
        run_write(OLD, tmp_path / "out@5.bag", overwrite=True)
        (tmp_path / "out-00000-of-00003.bag").write_bytes(b"")  # one stray shard counts
        text = _refused(tmp_path / "out@2.bag", NEW)
        assert f"{tmp_path}/out@3.bag ({tmp_path}/out-00000-of-00003.bag)" in text
        assert f"{tmp_path}/out@5.bag ({tmp_path}/out-00000-of-00005.bag and 4 more" in text

    def test_the_sharded_writer_refuses_the_same_way(self, tmp_path):
        """One wording for both writers (`_set_conflicts.other_sets_error`)."""
        run_write(OLD, tmp_path / "out@3.bag")
        beam_text = _refused(tmp_path / "out@2.bag", NEW)
        with pytest.raises(FileExistsError) as info:
            sackli.ShardedWriter(str(tmp_path / "out@2.bag"))
        assert info.value.strerror in beam_text

    def test_other_outputs_are_not_conflicts(self, tmp_path):
        """Other names sharing the prefix, another suffix, an unsharded
        file: none is another set of `out@N.bag`."""
        for spec in ["out-2@3.bag", "out@3.bagz", "outer@1.bag", "out.bag@0"]:
            run_write([b"keep"], tmp_path / spec)
        kept = _snapshot(tmp_path)
        run_write(NEW, tmp_path / "out@2.bag")
        after = _snapshot(tmp_path)
        assert {n: after[n] for n in kept} == kept
        assert sorted(set(after) - set(kept)) == shard_names("out", 2, ".bag")


# --- overwrite=True ---------------------------------------------------------------


class TestOverwrite:
    @RUNNERS
    @PLACEMENTS
    def test_replaces_the_set_and_its_companions(self, tmp_path, runner, placement):
        """An old row set (SEPARATE limits, its schema file) and a record
        format file named after it: all go once the new set is in place."""
        _write_rows(tmp_path / "out@3.bag", [Row(i, f"n{i}") for i in range(9)],
                    options=sackli.Writer.Options(limits_placement=SEPARATE))
        (tmp_path / "out-of-00003.bag.record_format").write_bytes(b"json")
        (tmp_path / "out.bag.arrow_schema").write_bytes(b"a plain out.bag's")
        assert "out-of-00003.bag.arrow_schema" in listing(tmp_path)
        run_write(NEW, tmp_path / "out@2.bag", runner, overwrite=True,
                  options=sackli.Writer.Options(limits_placement=placement))
        names = shard_names("out", 2, ".bag")
        expected = with_limits(names) if placement == SEPARATE else names
        assert listing(tmp_path) == sorted(expected + ["out.bag.arrow_schema"])
        assert _read(tmp_path / "out@*.bag", placement) == sorted(NEW)

    @RUNNERS
    def test_star_replaces_another_count(self, tmp_path, runner):
        run_write(OLD, tmp_path / "out@3.bagz", options=sackli.Writer.Options(limits_placement=SEPARATE))
        run_write(NEW, tmp_path / "out@*.bagz", runner, num_shards=2, overwrite=True)
        assert listing(tmp_path) == shard_names("out", 2, ".bagz")
        assert_reads(ReadFromSackli(str(tmp_path / "out@*.bagz")), NEW, runner)

    def test_the_new_set_is_in_place_before_the_old_goes(self, tmp_path, monkeypatch):
        from apache_beam.io.filesystems import FileSystems

        run_write(OLD, tmp_path / "out@3.bag")
        seen = []
        delete = FileSystems.delete

        def spy(paths):
            seen.append((list(paths), listing(tmp_path)))
            return delete(paths)

        monkeypatch.setattr(FileSystems, "delete", staticmethod(spy))
        run_write(NEW, tmp_path / "out@2.bag", overwrite=True)
        old = [p for paths, _ in seen for p in paths if "-of-00003" in p]
        assert sorted(old) == [str(tmp_path / n) for n in shard_names("out", 3, ".bag")]
        for paths, present in seen:
            if any("-of-00003" in p for p in paths):
                assert set(shard_names("out", 2, ".bag")) <= set(present)

    def test_overwrite_must_be_a_bool(self, tmp_path):
        with pytest.raises(TypeError, match="overwrite must be a bool"):
            WriteToSackli(str(tmp_path / "out@2.bag"), overwrite="yes")

    @pytest.mark.parametrize("overwrite", [False, True])
    def test_display_data_shows_overwrite(self, tmp_path, overwrite):
        items = {i.key: i.value for i in DisplayData.create_from(
            WriteToSackli(str(tmp_path / "out@2.bag"), overwrite=overwrite)).items}
        assert items["overwrite"] is overwrite


# --- The same count is replaced, with or without overwrite -------------------------


class TestSameCount:
    @RUNNERS
    @pytest.mark.parametrize("overwrite", [False, True])
    def test_fixed_count(self, tmp_path, runner, overwrite):
        """TAIL over SEPARATE, fewer records than shards: exactly the new
        records, the old `limits.` files gone."""
        run_write(OLD, tmp_path / "out@3.bag", options=sackli.Writer.Options(limits_placement=SEPARATE))
        run_write(NEW[:1], tmp_path / "out@3.bag", runner, overwrite=overwrite)
        assert listing(tmp_path) == shard_names("out", 3, ".bag")
        assert _read(tmp_path / "out@3.bag") == NEW[:1]

    def test_star_with_the_same_count(self, tmp_path):
        run_write(OLD, tmp_path / "out@2.bag")
        run_write(NEW, tmp_path / "out@*.bag", num_shards=2)
        assert listing(tmp_path) == shard_names("out", 2, ".bag")
        assert _read(tmp_path / "out@*.bag") == sorted(NEW)

    def test_unsharded(self, tmp_path):
        run_write(OLD, tmp_path / "out.bag@0", options=sackli.Writer.Options(limits_placement=SEPARATE))
        run_write(NEW, tmp_path / "out.bag@0")
        assert listing(tmp_path) == ["out.bag"]
        assert _read(tmp_path / "out.bag") == sorted(NEW)

    def test_own_template_without_the_count(self, tmp_path):
        """`-SSSSS`: names carry no count. Fewer shards than before leave
        shards no new name overwrites: another set, refused; the same
        number replaces the old names."""
        template = {"file_name_suffix": ".bag", "shard_name_template": "-SSSSS"}
        run_write(OLD, tmp_path / "out", num_shards=3, **template)
        run_write(NEW, tmp_path / "out", num_shards=3, **template)
        assert listing(tmp_path) == ["out-00000.bag", "out-00001.bag", "out-00002.bag"]
        text = _refused(tmp_path / "out", NEW, num_shards=2, **template)
        assert f"other shards ({tmp_path}/out-00002.bag)" in text
        run_write(NEW, tmp_path / "out", num_shards=2, overwrite=True, **template)
        assert listing(tmp_path) == ["out-00000.bag", "out-00001.bag"]


# --- Streaming: per window and pane ------------------------------------------------


def _stream() -> test_stream.TestStream:
    """Two records in the window [0, 10)."""
    return (test_stream.TestStream()
            .add_elements([window.TimestampedValue(b"a", 1), window.TimestampedValue(b"b", 2)])
            .advance_watermark_to_infinity())


def _write_stream(spec, **kwargs) -> None:
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with beam.Pipeline(options=options) as p:
        _ = (p | _stream() | beam.WindowInto(window.FixedWindows(10))
             | WriteToSackli(str(spec), **kwargs))


WINDOW = "1970-01-01T00-00-00_1970-01-01T00-00-10"


class TestStreaming:
    def test_a_window_follows_the_rule(self, tmp_path):
        _write_stream(tmp_path / "out@3.bag")
        before = _snapshot(tmp_path)
        with pytest.raises(Exception, match=rf"out-{WINDOW}@3\.bag .*overwrite=True"):
            _write_stream(tmp_path / "out@2.bag")
        # (The stream's temporary folder may stay: a runner retries a pane.)
        for temp in tmp_path.glob("beam-temp-*"):
            shutil.rmtree(temp)
        assert _snapshot(tmp_path) == before
        _write_stream(tmp_path / "out@2.bag", overwrite=True)
        assert listing(tmp_path) == shard_names(f"out-{WINDOW}", 2, ".bag")
        _write_stream(tmp_path / "out@2.bag")  # the same count
        assert _read(tmp_path / f"out-{WINDOW}@2.bag") == [b"a", b"b"]

    def test_other_windows_are_not_conflicts(self, tmp_path):
        """A set of another window (here: a bounded write's names) is
        another output, whatever its count."""
        run_write(OLD, tmp_path / "out@3.bag")
        _write_stream(tmp_path / "out@2.bag")
        assert listing(tmp_path) == sorted(
            shard_names("out", 3, ".bag") + shard_names(f"out-{WINDOW}", 2, ".bag"))


# --- S3 (moto) through Beam's file system -------------------------------------------


@pytest.fixture
def s3(servers, request):  # noqa: F811 (the fixture)
    """A folder of its own on moto's S3 server, for sackli's client and for
    Beam's S3 file system (the pipeline options of `s3_options`)."""
    return Remote("s3", servers, f"beam-overwrite-{request.node.name[:60]}/".replace("[", "-")
                  .replace("]", ""))


def _s3_write(s3, records, spec, runner="direct", **kwargs) -> None:
    flags = [f"--s3_endpoint_url={s3.servers.moto.url}", "--s3_access_key_id=testing",
             "--s3_secret_access_key=testing", "--s3_region_name=us-east-1", *RUNNER_ARGS[runner]]
    with beam.Pipeline(options=PipelineOptions(flags)) as p:
        _ = p | beam.Create(records) | WriteToSackli(s3.url(spec), **kwargs)


class TestS3:
    @RUNNERS
    def test_refused_then_overwritten_with_the_manifest(self, s3, runner):
        """An old set a sackli writer left (its manifest, SEPARATE limits, a
        schema file): refused without overwrite, untouched; with it, the new
        set replaces all of it."""
        with sackli.ShardedWriter(s3.url("out@3.bag"), limits_placement=SEPARATE) as writer:
            writer.write_many(OLD)
        s3.put("out-of-00003.bag.arrow_schema", b"schema")
        before = {name: s3.get(name) for name in s3.objects()}
        assert "out-of-00003.bag.sackli_set" in before
        with pytest.raises(Exception, match=r"out@3\.bag \(.*overwrite=True"):
            _s3_write(s3, NEW, "out@2.bag", runner)
        with pytest.raises(Exception, match=r"out@3\.bag \(.*overwrite=True"):
            _s3_write(s3, NEW, "out@*.bag", runner, num_shards=2)
        assert {name: s3.get(name) for name in s3.objects()} == before
        _s3_write(s3, NEW, "out@2.bag", runner, overwrite=True)
        assert sorted(s3.objects()) == shard_names("out", 2, ".bag")
        assert sorted(sackli.Reader(s3.url("out@*.bag")).read()) == sorted(NEW)

    def test_the_same_count_drops_the_stale_manifest(self, s3):
        """A manifest describes the objects of the set a sackli writer made;
        after Beam replaced them it would make readers take the new set as
        torn: it goes."""
        with sackli.ShardedWriter(s3.url("out@2.bag")) as writer:
            writer.write_many(OLD)
        _s3_write(s3, NEW, "out@2.bag")
        assert sorted(s3.objects()) == shard_names("out", 2, ".bag")
        assert sorted(sackli.Reader(s3.url("out@2.bag")).read()) == sorted(NEW)


# --- Declared input types ---------------------------------------------------------------


class TestInputTypes:
    @pytest.mark.parametrize("elements,coder", [
        ([1, 2], coders.BytesCoder()),
        (["text"], coders.BytesCoder()),
        ([1, 2], coders.StrUtf8Coder()),
    ], ids=["int-bytes", "str-bytes", "int-str"])
    def test_refused_when_the_pipeline_is_built(self, tmp_path, elements, coder):
        p = beam.Pipeline()
        with pytest.raises(TypeCheckError, match="Input type hint violation at WriteToSackli"):
            _ = p | beam.Create(elements) | WriteToSackli(str(tmp_path / "out@2.bag"), coder)
        assert listing(tmp_path) == []

    @pytest.mark.parametrize("elements,coder,expected", [
        ([b"a", bytearray(b"b")], coders.BytesCoder(), [b"a", b"b"]),  # Create cannot pickle a memoryview
        (["a", "b", "c"], coders.StrUtf8Coder(), ["a", "b", "c"]),
        ([1, "b", 3.0], coders.PickleCoder(), [1, "b", 3.0]),  # Any: the coder does not say
    ], ids=["bytes-like", "str", "any"])
    def test_taken(self, tmp_path, elements, coder, expected):
        with beam.Pipeline() as p:
            _ = p | beam.Create(elements) | WriteToSackli(str(tmp_path / "out@1.bag"), coder)
        read = [coder.decode(r) for r in sackli.Reader(str(tmp_path / "out@1.bag")).read()]
        assert sorted(read, key=repr) == sorted(expected, key=repr)

    @pytest.mark.parametrize("make", [lambda i: Row(i, f"n{i}"), lambda i: beam.Row(id=i, name=f"n{i}")],
                             ids=["namedtuple", "beam-row"])
    def test_schema_rows_still_write_as_arrow_rows(self, tmp_path, make):
        pa = pytest.importorskip("pyarrow")
        from sackli import arrow as sackli_arrow

        _write_rows(tmp_path / "rows@1.bag", [make(i) for i in range(5)])
        table = sackli_arrow.read_table(str(tmp_path / "rows@1.bag"))
        assert table.sort_by("id").to_pylist() == [{"id": i, "name": f"n{i}"} for i in range(5)]
        assert pa.types.is_integer(table.schema.field("id").type)

    def test_untyped_input_is_checked_when_it_runs(self, tmp_path):
        """Elements Beam cannot type (Any) pass the check; the sink still
        refuses a non-bytes element when it comes."""
        with pytest.raises(Exception, match="writes bytes, not int"):
            with beam.Pipeline() as p:
                _ = (p | beam.Create([b"ok", 7]).with_output_types(typing.Any)
                     | WriteToSackli(str(tmp_path / "out@1.bag")))

    def test_datasets_take_dicts(self, tmp_path):
        from sackli.beam import WriteToSackliDataset

        p = beam.Pipeline()
        with pytest.raises(TypeCheckError, match="Dict"):
            _ = p | beam.Create([1, 2]) | WriteToSackliDataset(str(tmp_path / "ds"), {"x": "int"})
