"""Every public entry point that takes a path refuses a wrong type with one
message: "{name} must be a str or os.PathLike, not {type}" (bytes paths
included), from sackli/_storage/_paths.py."""

from __future__ import annotations

import io
import os
import re

import pytest

import sackli
from sackli import datasets, formats, maps
from sackli._storage import path_argument


class BytesPathLike(os.PathLike):
    """A path object whose path is bytes (as os.DirEntry of a bytes scandir)."""

    def __fspath__(self) -> bytes:
        return b"x.bag"


# (wrong value, the type the message names)
WRONG = [(42, "int"), (b"x.bag", "bytes"), (BytesPathLike(), "bytes"), (io.BytesIO(), "BytesIO"),
         (None, "NoneType")]


def _arrow():
    return pytest.importorskip("sackli.arrow")


def _table():
    return pytest.importorskip("pyarrow").table({"a": [1]})


# (entry point, the argument's name in the message)
ENTRY_POINTS = {
    "Reader": (lambda path: sackli.Reader(path), "file_spec"),
    "Writer": (lambda path: sackli.Writer(path), "path"),
    "ShardedWriter": (lambda path: sackli.ShardedWriter(path), "file_spec"),
    "recover": (lambda path: sackli.recover(path), "path"),
    "DatasetReader": (lambda path: datasets.DatasetReader(path), "directory"),
    "DatasetWriter": (lambda path: datasets.DatasetWriter(path, {"a": "bytes"}), "directory"),
    "ShardedDatasetReader": (lambda path: datasets.ShardedDatasetReader(path), "directory"),
    "ShardedDatasetWriter": (
        lambda path: datasets.ShardedDatasetWriter(path, {"a": "bytes"}), "directory"),
    "BagReader": (lambda path: datasets.BagReader(path), "path"),
    "BagWriter": (lambda path: datasets.BagWriter(path), "path"),
    "maps.write": (lambda path: maps.write(path, {1: b"x"}), "path"),
    "arrow.write_table": (lambda path: _arrow().write_table(_table(), path), "file_spec"),
    "arrow.read_schema": (lambda path: _arrow().read_schema(path), "file_spec"),
    "arrow.schema_path": (lambda path: _arrow().schema_path(path), "file_spec"),
}


def _message(name: str, type_name: str) -> str:
    return "^" + re.escape(f"{name} must be a str or os.PathLike, not {type_name}") + "$"


@pytest.mark.parametrize("value, type_name", WRONG, ids=[t for _, t in WRONG])
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_wrong_path_type_gets_the_one_message(tmp_path, monkeypatch, entry, value, type_name):
    monkeypatch.chdir(tmp_path)  # nothing may be written, but never beside the tests
    call, name = ENTRY_POINTS[entry]
    with pytest.raises(TypeError, match=_message(name, type_name)):
        call(value)
    assert os.listdir(tmp_path) == []


# Arguments that are a path or something else (a buffer, a stream, a table):
# only a path object can be a bytes path there.
EITHER_PATH_OR_DATA = {
    "MapBuffer": (lambda path: maps.MapBuffer(path), "a map path"),
    "IntMap": (lambda path: maps.IntMap(path), "a map path"),
    "formats.read_tfrecords": (lambda path: list(formats.read_tfrecords(path)), "path"),
    "formats.TFRecordWriter": (lambda path: formats.TFRecordWriter(path), "path"),
    "arrow.write_table data": (
        lambda path: _arrow().write_table(path, "never-written.bag"), "a Parquet path"),
}


@pytest.mark.parametrize("entry", EITHER_PATH_OR_DATA)
def test_a_bytes_path_object_gets_the_one_message(tmp_path, monkeypatch, entry):
    monkeypatch.chdir(tmp_path)
    call, name = EITHER_PATH_OR_DATA[entry]
    with pytest.raises(TypeError, match=_message(name, "bytes")):
        call(BytesPathLike())
    assert os.listdir(tmp_path) == []


def test_the_check_returns_str_paths_as_given(tmp_path):
    class Name(str):
        pass

    name = Name("x.bag")
    assert path_argument(name, "path") is name
    assert path_argument(tmp_path / "x.bag", "path") == str(tmp_path / "x.bag")
    assert path_argument("gs://bucket/x.bag", "path") == "gs://bucket/x.bag"


def _beam():
    return pytest.importorskip("sackli.beam")


# The Beam transforms' paths, given as values or as Beam ValueProviders.
BEAM_ENTRY_POINTS = {
    "ReadFromSackli": (lambda path: _beam().ReadFromSackli(path), "file_pattern"),
    "ReadFromSackliBatched": (lambda path: _beam().ReadFromSackliBatched(path), "file_pattern"),
    "WriteToSackli": (lambda path: _beam().WriteToSackli(path), "file_path"),
    "ReadFromSackliDataset": (lambda path: _beam().ReadFromSackliDataset(path), "directory"),
    "WriteToSackliDataset": (
        lambda path: _beam().WriteToSackliDataset(path, {"a": "bytes"}), "directory"),
}


@pytest.mark.parametrize("value, type_name", WRONG, ids=[t for _, t in WRONG])
@pytest.mark.parametrize("entry", BEAM_ENTRY_POINTS)
def test_a_wrong_beam_path_type_gets_the_one_message(entry, value, type_name):
    call, name = BEAM_ENTRY_POINTS[entry]
    with pytest.raises(TypeError, match=_message(name, type_name)):
        call(value)


@pytest.mark.parametrize("entry", BEAM_ENTRY_POINTS)
def test_beam_paths_from_value_providers(tmp_path, entry, monkeypatch):
    """A provider known now is checked now, with the one message; one known
    only at run time is taken as it is (checked on the workers)."""
    _beam()
    from apache_beam.options.value_provider import RuntimeValueProvider, StaticValueProvider

    # While a pipeline is built no run-time options are set; a pipeline run
    # earlier in this process leaves its own behind (Beam keeps them in a
    # class attribute), which would make the provider below readable now.
    monkeypatch.setattr(RuntimeValueProvider, "runtime_options", None)

    call, name = BEAM_ENTRY_POINTS[entry]
    with pytest.raises(TypeError, match=_message(name, "int")):
        call(StaticValueProvider(int, 42))
    call(RuntimeValueProvider(option_name="unset_path", value_type=str, default_value=None))
