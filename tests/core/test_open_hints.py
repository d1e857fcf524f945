"""A `sackli.Reader` that fails to open says what the file or folder is and
how to open it (sackli/_open_hints.py), with the command line's rules
(sackli/_sniff.py): a Parquet or Arrow IPC file names its conversion, a
`sackli.datasets` folder its reader, a folder of bags the spec that reads
them, `name@N.ext` the shard counts that do exist. The exception types stay
those callers catch, and a successful open computes no hint."""

from __future__ import annotations

import errno
import os

import pytest

import sackli
import sackli.arrow
import sackli.datasets
import sackli.maps
from sackli import _open_hints, _reader

pa = pytest.importorskip("pyarrow")
import pyarrow.ipc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

TABLE = pa.table({"id": [1, 2, 3], "kind": ["a", "b", "c"]})


@pytest.fixture
def here(tmp_path, monkeypatch):
    """Tests open relative paths, as a user types them."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _open_error(spec: str, error_type: type[BaseException]) -> BaseException:
    with pytest.raises(error_type) as caught:
        sackli.Reader(spec)
    return caught.value


def _write_bag(path: str, records: list[bytes]) -> None:
    with sackli.Writer(path) as writer:
        writer.write_many(records)


def _write_set(spec: str, records: list[bytes]) -> None:
    with sackli.ShardedWriter(spec) as writer:
        writer.write_many(records)


def _write_other_set(base: str, count: int, suffix: str) -> None:
    """A second set of `base`'s name, shard by shard (a ShardedWriter
    refuses to make `base@*` ambiguous; a copy from elsewhere does not)."""
    for i in range(count):
        _write_bag(f"{base}-{i:05d}-of-{count:05d}{suffix}", [b"%d" % i])


# --- files that are something else ------------------------------------------------


def test_a_parquet_file_names_the_call_and_the_command_that_convert_it(here) -> None:
    pq.write_table(TABLE, "events.parquet")
    error = _open_error("events.parquet", sackli.CorruptionError)
    assert str(error) == (
        "events.parquet: not a bag: it is a Parquet file: convert it with "
        "sackli.arrow.write_table('events.parquet', 'events.bagz'); from a shell: try sackli "
        "convert events.parquet events.bagz (as a bag: events.parquet: the last 8 bytes do not "
        f"point at a limits section (not a bag with TAIL limits, or truncated) (byte offset "
        f"{os.path.getsize('events.parquet') - 8}))")
    # The call it names does convert it.
    sackli.arrow.write_table("events.parquet", "events.bagz")
    assert sackli.arrow.read_table("events.bagz").equals(TABLE)


def test_a_parquet_file_named_as_a_bag_is_read_by_pyarrow_first(here) -> None:
    pq.write_table(TABLE, "events.bag")
    error = _open_error("events.bag", sackli.CorruptionError)
    assert "it is a Parquet file: convert it with sackli.arrow.write_table(" \
           "pyarrow.parquet.read_table('events.bag'), 'events.bagz')" in str(error)
    assert "name it .parquet and try sackli convert" in str(error)


def test_arrow_ipc_files_and_streams_name_their_conversion(here) -> None:
    with pa.ipc.new_file("t.arrow", TABLE.schema) as writer:
        writer.write_table(TABLE)
    with pa.ipc.new_stream("s.arrows", TABLE.schema) as writer:
        writer.write_table(TABLE)
    file_error = _open_error("t.arrow", sackli.CorruptionError)
    assert str(file_error).startswith(
        "t.arrow: not a bag: it is an Arrow IPC file: convert it with sackli.arrow.write_table("
        "pyarrow.ipc.open_file('t.arrow').read_all(), 't.arrow.bagz')")
    stream_error = _open_error("s.arrows", sackli.CorruptionError)
    assert str(stream_error).startswith(
        "s.arrows: not a bag: it is an Arrow IPC stream: convert it with "
        "sackli.arrow.write_table(pyarrow.ipc.open_stream('s.arrows'), 's.arrows.bagz')")


def _tfrecord(path: str) -> None:
    from sackli import formats

    with formats.TFRecordWriter(path) as writer:
        writer.write_many([b"a", b"bc"])


@pytest.mark.parametrize(
    ("name", "make", "what"),
    [
        ("lines.bag", lambda p: open(p, "w").write('{"a": 1}\n{"a": 2}\n'),
         "it is JSON Lines: name it .jsonl and try sackli convert"),
        ("rec.tfrecord", _tfrecord,
         "it is a TFRecord file: try sackli convert rec.tfrecord rec.bagz"),
        ("m.mb", lambda p: sackli.maps.write(p, [(1, b"one")]),
         "it is a map (MapBuffer): open it with sackli.maps.MapBuffer('m.mb')"),
    ],
)
def test_other_known_files_are_named(here, name, make, what) -> None:
    make(name)
    error = _open_error(name, sackli.CorruptionError)
    assert str(error).startswith(f"{name}: not a bag: {what}"), str(error)


def test_the_map_a_hint_names_opens(here) -> None:
    sackli.maps.write("m.mb", [(1, b"one")])
    _open_error("m.mb", sackli.CorruptionError)
    assert sackli.maps.MapBuffer("m.mb")[1] == b"one"


def test_a_damaged_bag_keeps_the_engines_message(here) -> None:
    (here / "junk.bag").write_bytes(b"\x00\x01\x02\xff" * 10)
    error = _open_error("junk.bag", sackli.CorruptionError)
    assert "limits section" in str(error) and "not a bag: it is" not in str(error)


def test_the_file_of_a_list_that_is_parquet_is_the_one_named(here) -> None:
    _write_bag("good.bag", [b"x"])
    pq.write_table(TABLE, "events.parquet")
    error = _open_error("good.bag,events.parquet", sackli.CorruptionError)
    assert str(error).startswith("events.parquet: not a bag: it is a Parquet file")


# --- folders -------------------------------------------------------------------------


def test_a_sharded_dataset_folder_names_its_reader(here) -> None:
    with sackli.datasets.ShardedDatasetWriter("ds", {"label": "int(8)"}, shard_length=2) as writer:
        for i in range(3):
            writer.append({"label": i})
    error = _open_error("ds", IsADirectoryError)
    assert (error.errno, error.filename) == (errno.EISDIR, "ds")
    assert error.strerror == (
        "ds: not a bag: it is a sackli.datasets folder (a sharded dataset): open it with "
        "sackli.datasets.ShardedDatasetReader('ds'); from a shell: read it with sackli info ds "
        "(or cat, head, count, verify)")
    assert len(sackli.datasets.ShardedDatasetReader("ds")) == 3


def test_a_dataset_shard_folder_names_its_reader(here) -> None:
    with sackli.datasets.DatasetWriter("one", {"label": "int(8)"}) as writer:
        writer.append({"label": 7})
    error = _open_error("one", IsADirectoryError)
    assert "it is a sackli.datasets folder (one dataset shard): open it with " \
           "sackli.datasets.DatasetReader('one')" in str(error)
    assert sackli.datasets.DatasetReader("one")[0]["label"] == 7


def test_a_folder_of_bags_names_a_glob_that_reads_them(here) -> None:
    os.mkdir("plain")
    _write_bag("plain/a.bag", [b"a"])
    _write_bag("plain/b.bag", [b"b", b"c"])
    error = _open_error("plain", IsADirectoryError)
    assert error.strerror == (
        "plain: not a bag: it is a folder of bags: open them with sackli.Reader('plain/*.bag'); "
        "from a shell: read them with 'plain/*.bag'")
    assert sackli.Reader("plain/*.bag").read() == [b"a", b"b", b"c"]


def test_a_folder_hint_leaves_out_limits_files_and_hidden_ones(here) -> None:
    os.mkdir("sep")
    with sackli.Writer("sep/x.bagz", limits_placement=sackli.LimitsPlacement.SEPARATE) as writer:
        writer.write(b"x")
    _write_bag("sep/.hidden-00000-of-00002.bag", [b"h"])
    error = _open_error("sep", IsADirectoryError)
    assert "open them with sackli.Reader('sep/*.bagz'); from a shell" in error.strerror
    assert "hidden" not in error.strerror and "limits." not in error.strerror


def test_a_folder_of_shard_sets_names_each_set(here) -> None:
    os.mkdir("sets")
    _write_set("sets/imgs@2.bagz", [b"a", b"b"])
    _write_set("sets/labels@3.bag", [b"1", b"2", b"3"])
    error = _open_error("sets", IsADirectoryError)
    assert "it is a folder of bags: open them with sackli.Reader('sets/imgs@2.bagz') " \
           "(or 'sets/labels@3.bag')" in str(error)
    assert len(sackli.Reader("sets/imgs@2.bagz")) == 2


def test_a_folder_without_bags_says_what_a_bag_is(here) -> None:
    os.mkdir("empty")
    error = _open_error("empty", IsADirectoryError)
    assert error.strerror == (
        "empty: not a bag: it is a folder without bags: a bag is a file: name one, a glob of "
        "files ('empty/*.bag') or a shard set ('empty/name@*.bagz')")


def test_a_folder_of_parquet_files_names_its_conversion(here) -> None:
    os.mkdir("events")
    pq.write_table(TABLE, "events/part-0.parquet")
    error = _open_error("events", IsADirectoryError)
    assert error.strerror == (
        "events: not a bag: it is a folder of Parquet files: convert it with "
        "sackli.arrow.write_table('events', 'events.bagz'); from a shell: try sackli convert "
        "events events.bagz")


# --- shard counts ----------------------------------------------------------------------


def test_a_shard_count_that_does_not_exist_names_the_counts_that_do(here) -> None:
    _write_set("imgs@4.bagz", [b"%d" % i for i in range(8)])
    error = _open_error("imgs@8.bagz", FileNotFoundError)
    assert (error.errno, error.filename) == (errno.ENOENT, "imgs-00000-of-00008.bagz")
    assert error.strerror == (
        "open: No such file or directory; imgs@8.bagz has no shard 0 of 8, but shard sets of "
        "other counts exist: imgs@4.bagz")
    assert len(sackli.Reader("imgs@4.bagz")) == 8


def test_every_other_count_is_named_and_an_incomplete_set_says_so(here) -> None:
    _write_set("imgs@2.bagz", [b"a", b"b"])
    _write_other_set("imgs", 4, ".bagz")
    os.remove("imgs-00003-of-00004.bagz")
    error = _open_error(os.path.join(str(here), "imgs@8.bagz"), FileNotFoundError)
    assert str(error).count("shard sets of other counts exist") == 1
    assert f"{here}/imgs@2.bagz, {here}/imgs@4.bagz (3 of 4 shards)" in str(error)


def test_the_entry_of_a_list_whose_shards_are_missing_is_named(here) -> None:
    _write_set("a@2.bag", [b"a", b"b"])
    _write_set("b@3.bag", [b"1", b"2", b"3"])
    error = _open_error("a@2.bag,b@5.bag", FileNotFoundError)
    assert error.strerror.endswith("b@5.bag has no shard 0 of 5, but shard sets of other "
                                   "counts exist: b@3.bag")


def test_a_set_missing_one_shard_names_the_other_counts_too(here) -> None:
    _write_set("imgs@4.bag", [b"%d" % i for i in range(4)])
    _write_other_set("imgs", 3, ".bag")
    os.remove("imgs-00002-of-00003.bag")
    error = _open_error("imgs@3.bag", FileNotFoundError)
    assert error.filename == "imgs-00002-of-00003.bag"
    assert error.strerror.endswith("imgs@3.bag has no shard 2 of 3, but shard sets of other "
                                   "counts exist: imgs@4.bag")


def test_a_missing_file_without_other_sets_keeps_its_message(here) -> None:
    error = _open_error("nothing@3.bag", FileNotFoundError)
    assert error.strerror == "open: No such file or directory"
    error = _open_error("missing.bag", FileNotFoundError)
    assert (error.strerror, error.filename) == ("open: No such file or directory", "missing.bag")


# --- only on the failure path ----------------------------------------------------------


def test_a_successful_open_computes_no_hint(here, monkeypatch) -> None:
    def no_hint(*args: object) -> BaseException:
        raise AssertionError("a hint was computed for an open that succeeded")

    monkeypatch.setattr(_reader, "with_open_hint", no_hint)
    # A bag whose first record is a whole Parquet file is still a bag.
    pq.write_table(TABLE, "events.parquet")
    _write_bag("holds_parquet.bag", [(here / "events.parquet").read_bytes(), b"x"])
    _write_set("imgs@4.bagz", [b"%d" % i for i in range(4)])
    _write_other_set("imgs", 2, ".bagz")
    assert sackli.Reader("holds_parquet.bag")[1] == b"x"
    assert len(sackli.Reader("imgs@4.bagz")) == 4
    assert len(sackli.Reader("imgs@2.bagz,holds_parquet.bag")) == 4


def test_the_dataset_layout_the_hints_know_is_the_datasets_own() -> None:
    from sackli.datasets import _recognise, _shard_folders

    assert _open_hints.DATASET_SPEC_FILE == _shard_folders.SPEC_FILE
    assert _open_hints.FIRST_DATASET_SHARD == _recognise._FIRST_SHARD
    assert _open_hints.FIRST_DATASET_SHARD == _shard_folders.shard_name(0)
