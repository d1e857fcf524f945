"""Bad input to sackli.datasets: each raises a clear exception naming the
field and the file, and a failed write leaves nothing a reader would accept."""

from __future__ import annotations

import os
import re

import bags.bags
import pytest

import sackli
from sackli import datasets
from sackli.datasets._spec import parse_spec

SPEC = {"label": "int(4)", "name": "utf8", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"label": i, "name": f"n{i}", "words": ["a"] * i}


def _write(directory, count: int = 3) -> None:
    with datasets.DatasetWriter(directory, SPEC) as writer:
        for i in range(count):
            writer.append(_point(i))


# --- Specs ------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    {"a": "utf8"}, {"a": "int(4)", "b": "utf8[]"}, {"a": "array(float32,10,4)[]"},
    {"a": "x-y_z(1.5,,a-b)"}, {"a": "int()"}, {"A b": "bytes"}, {},
])
def test_specs_bags_accepts_parse_the_same(spec):
    assert parse_spec(spec) == bags.bags.parse_spec(dict(sorted(spec.items())))


@pytest.mark.parametrize("spec, error", [
    ({"a": "Utf8"}, ValueError), ({"a": "utf8[][]"}, ValueError), ({"a": "int(4"}, ValueError),
    ({"a": "int(A)"}, ValueError), ({"a": ""}, ValueError), ({"a": "int (4)"}, ValueError),
    ({"refs": "utf8"}, ValueError), ({1: "utf8"}, TypeError), ({"a": 5}, TypeError),
    (["a"], TypeError),
])
def test_specs_bags_rejects_raise(spec, error):
    with pytest.raises((AssertionError, AttributeError)):  # bags asserts, or fails later
        bags.bags.parse_spec(spec)
    with pytest.raises(error):
        parse_spec(spec)


@pytest.mark.parametrize("name", ["", "..", "a/b"])
def test_field_names_that_cannot_be_files(tmp_path, name):
    with pytest.raises(ValueError, match="file name"):
        datasets.DatasetWriter(tmp_path / "ds", {name: "utf8"})
    assert not (tmp_path / "ds").exists()


def test_type_without_encoder(tmp_path):
    with pytest.raises(ValueError, match="'pic'.*'webp'"):
        datasets.DatasetWriter(tmp_path / "ds", {"pic": "webp"})
    assert list(tmp_path.iterdir()) == []


def test_existing_directory(tmp_path):
    (tmp_path / "ds").mkdir()
    with pytest.raises(FileExistsError, match="ds"):
        datasets.DatasetWriter(tmp_path / "ds", SPEC)


# --- Datapoints -------------------------------------------------------------

@pytest.mark.parametrize("datapoint, message", [
    ({"label": 1, "name": "x"}, r"missing fields: 'words'; unknown fields: none"),
    ({**_point(1), "extra": 2}, r"missing fields: none; unknown fields: 'extra'"),
    ({"label": 1, "name": "x", "word": []}, r"missing fields: 'words'; unknown fields: 'word'"),
])
def test_datapoint_with_wrong_fields(tmp_path, datapoint, message):
    with datasets.DatasetWriter(tmp_path / "ds", SPEC) as writer:
        writer.append(_point(0))
        with pytest.raises(ValueError, match=re.escape(str(tmp_path / "ds")) + ".*" + message):
            writer.append(datapoint)
        writer.append(_point(1))  # the writer goes on, unchanged by the failure
    assert datasets.DatasetReader(tmp_path / "ds").read_indices([0, 1]) == [_point(0), _point(1)]


@pytest.mark.parametrize("field, value, error", [
    ("label", -1, ValueError), ("label", 2 ** 40, ValueError), ("name", 5, ValueError),
    ("words", ["ok", 7], ValueError), ("words", 3, TypeError),
])
def test_value_the_encoder_rejects(tmp_path, field, value, error):
    with datasets.DatasetWriter(tmp_path / "ds", SPEC) as writer:
        writer.append(_point(0))
        bad = {**_point(1), field: value}
        path = os.path.join(tmp_path / "ds", f"{field}.bag")
        with pytest.raises(error, match=f"field '{field}' \\({re.escape(path)}\\)"):
            writer.append(bad)
        writer.append(_point(2))
    # The rejected datapoint left no values behind: refs and fields agree.
    assert list(datasets.DatasetReader(tmp_path / "ds")) == [_point(0), _point(2)]
    assert len(datasets.BagReader(tmp_path / "ds" / "words.bag")) == 2


def test_array_of_wrong_shape(tmp_path):
    np = pytest.importorskip("numpy")
    with datasets.DatasetWriter(tmp_path / "ds", {"x": "array(float32,2)"}) as writer:
        with pytest.raises(ValueError, match=r"field 'x'.*shape \(2,\)"):
            writer.append({"x": np.zeros(3, np.float32)})
        with pytest.raises(ValueError, match=r"field 'x'.*dtype float32"):
            writer.append({"x": np.zeros(2, np.float64)})


def test_encoder_returning_non_bytes(tmp_path):
    encoders = {**datasets.encoders, "utf8": lambda value: value}
    with datasets.DatasetWriter(tmp_path / "ds", {"s": "utf8"}, encoders) as writer:
        with pytest.raises(TypeError, match="field 's'.*returned str, not bytes"):
            writer.append({"s": "text"})


# --- Masks ------------------------------------------------------------------

def test_bad_masks(tmp_path):
    _write(tmp_path / "ds")
    reader = datasets.DatasetReader(tmp_path / "ds")
    with pytest.raises(ValueError, match="'colour'.*fields: 'label', 'name', 'words'"):
        reader[0, {"colour": True}]
    with pytest.raises(TypeError, match="scalar field 'label'"):
        reader[0, {"label": range(1)}]
    with pytest.raises(TypeError, match="list field 'words'"):
        reader[0, {"words": 2}]
    with pytest.raises(ValueError, match="'words'.*step 1"):
        reader[2, {"words": range(0, 2, 2)}]
    with pytest.raises(ValueError, match="'words'"):
        reader[2, {"words": range(-1, 2)}]
    with pytest.raises(TypeError, match="dict"):
        reader[0, ["label"]]
    with pytest.raises(ValueError, match="'colour'"):
        reader.read_indices([0, 1], {"colour": True})


# --- Damaged datasets -------------------------------------------------------

def _replace_bag(path, records) -> None:
    os.remove(path)
    with datasets.BagWriter(path) as writer:
        for record in records:
            writer.append(record)


def test_scalar_ref_past_the_field_file(tmp_path):
    _write(tmp_path / "ds")
    _replace_bag(tmp_path / "ds" / "name.bag", [b"n0"])
    reader = datasets.DatasetReader(tmp_path / "ds")
    assert reader[0] == _point(0)
    with pytest.raises(sackli.CorruptionError, match=(
            r"refs\.bag: datapoint 2 refers to 2 in field 'name', but .*name\.bag has 1 records")):
        reader.read_indices([0, 2])


def test_list_ref_past_the_field_file(tmp_path):
    _write(tmp_path / "ds")
    _replace_bag(tmp_path / "ds" / "words.bag", [b"a"])  # datapoint 2 refers to [1, 2]
    reader = datasets.DatasetReader(tmp_path / "ds")
    assert reader[1] == _point(1)
    with pytest.raises(sackli.CorruptionError, match=r"\[1, 2\] in field 'words'.*words\.bag"):
        reader[2]


@pytest.mark.parametrize("name", ["spec.json", "refs.bag", "words.bag"])
def test_missing_file(tmp_path, name):
    _write(tmp_path / "ds")
    os.remove(tmp_path / "ds" / name)
    with pytest.raises(FileNotFoundError, match=re.escape(name)):
        datasets.DatasetReader(tmp_path / "ds")


def test_invalid_spec_json(tmp_path):
    _write(tmp_path / "ds")
    (tmp_path / "ds" / "spec.json").write_text('{"label": "int(4"}')
    with pytest.raises(ValueError, match=r"spec\.json: not a valid dataset spec.*'label'"):
        datasets.DatasetReader(tmp_path / "ds")


@pytest.mark.parametrize("cut", [1, 7, 9])
def test_truncated_field_file(tmp_path, cut):
    _write(tmp_path / "ds")
    path = tmp_path / "ds" / "name.bag"
    os.truncate(path, path.stat().st_size - cut)
    with pytest.raises(sackli.CorruptionError, match=re.escape(str(path))):
        datasets.DatasetReader(tmp_path / "ds")[2]


def test_bagz_file_that_is_not_a_bags_file(tmp_path):
    with sackli.Writer(str(tmp_path / "x.bag")) as writer:
        writer.write(b"first record not empty")
    with pytest.raises(sackli.CorruptionError, match="x.bag: not a bags file"):
        datasets.BagReader(tmp_path / "x.bag")
    (tmp_path / "empty.bag").write_bytes(b"")
    with pytest.raises(sackli.CorruptionError, match="empty.bag: not a bags file"):
        datasets.BagReader(tmp_path / "empty.bag")


def test_missing_decoder(tmp_path):
    _write(tmp_path / "ds")
    reader = datasets.DatasetReader(tmp_path / "ds", decoders={"utf8": bytes.decode})
    assert reader[1, {"name": True}] == {"name": "n1"}
    with pytest.raises(ValueError, match="field 'label'.*no decoder for type 'int'"):
        reader[1]


def test_misnumbered_shards(tmp_path):
    _write(tmp_path / "ds" / "000000")
    _write(tmp_path / "ds" / "000002")
    with pytest.raises(ValueError, match="000002.*shard 000001"):
        datasets.ShardedDatasetReader(tmp_path / "ds")
    with pytest.raises(FileNotFoundError):
        datasets.ShardedDatasetReader(tmp_path / "nothing")
    os.rename(tmp_path / "ds" / "000002", tmp_path / "ds" / "000001")
    with pytest.raises(ValueError, match="no shard selected"):
        datasets.ShardedDatasetReader(tmp_path / "ds", shard_start=2)


# --- Failed writes ----------------------------------------------------------

def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with datasets.DatasetWriter(tmp_path / "ds", SPEC) as writer:
            writer.append(_point(0))
            writer.flush()
            raise RuntimeError("the job failed")
    assert list(tmp_path.iterdir()) == []


def test_shard_being_written_is_invisible(tmp_path):
    writer = datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_length=2)
    for i in range(3):
        writer.append(_point(i))
    writer.flush()
    # Shard 000001 is still being written (as after a crash): readers of
    # either package see only shard 000000 or refuse, never a partial shard.
    reader = datasets.ShardedDatasetReader(tmp_path / "ds")
    assert list(reader) == [_point(0), _point(1)]
    assert not (tmp_path / "ds" / "000001").exists()
    [partial] = [name for name in os.listdir(tmp_path / "ds") if name.startswith(".")]
    assert partial.startswith(".000001.sackli-partial-")
    writer.close()
    assert sorted(os.listdir(tmp_path / "ds")) == ["000000", "000001"]
    assert list(datasets.ShardedDatasetReader(tmp_path / "ds")) == [_point(i) for i in range(3)]


def test_sharded_write_that_fails_keeps_the_finished_shards(tmp_path):
    with pytest.raises(ValueError):
        with datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_length=2) as writer:
            for i in range(3):
                writer.append(_point(i))
            writer.append({"label": "not a number", "name": "x", "words": []})
    assert sorted(os.listdir(tmp_path / "ds")) == ["000000"]
    assert list(datasets.ShardedDatasetReader(tmp_path / "ds")) == [_point(0), _point(1)]


def test_bag_writer_refuses_existing_file_and_discards_on_error(tmp_path):
    (tmp_path / "x.bag").write_bytes(b"")
    with pytest.raises(FileExistsError):
        datasets.BagWriter(tmp_path / "x.bag")
    with pytest.raises(RuntimeError):
        with datasets.BagWriter(tmp_path / "y.bag") as writer:
            writer.append(b"abc")
            raise RuntimeError
    assert sorted(os.listdir(tmp_path)) == ["x.bag"]
    with pytest.raises(TypeError, match="bytes"):
        with datasets.BagWriter(tmp_path / "z.bag") as writer:
            writer.append("text")
    assert sorted(os.listdir(tmp_path)) == ["x.bag"]


@pytest.mark.parametrize("refs", [b"\xc1", b"\x92\x00\x00", b"\x05"])
def test_refs_that_are_not_a_list_per_field(tmp_path, refs):
    _write(tmp_path / "ds")
    _replace_bag(tmp_path / "ds" / "refs.bag", [refs])
    with pytest.raises(sackli.CorruptionError,
                       match=r"refs\.bag: the refs of datapoint 0 are not a msgpack list of 3"):
        datasets.DatasetReader(tmp_path / "ds")[0, {"label": True}]


def test_value_that_does_not_decode(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", {"name": "bytes"}) as writer:
        for value in (b"ok", b"fine", b"\xff\xfe not utf-8"):
            writer.append({"name": value})
    (tmp_path / "ds" / "spec.json").write_text('{"name": "utf8"}')
    reader = datasets.DatasetReader(tmp_path / "ds")
    assert reader.read_indices([0, 1]) == [{"name": "ok"}, {"name": "fine"}]
    with pytest.raises(ValueError, match=r"name\.bag: record 2 of field 'name' does not decode"
                                         r" as utf8: UnicodeDecodeError"):
        reader.read_indices([1, 2])
