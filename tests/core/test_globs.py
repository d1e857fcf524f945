"""Globs in file specs (sackli/_storage/_globs.py, called by `expand_file_spec`):
`Reader('ev*.bag')`, `sackli count 'ev*.bag'`, local and on the real S3 and
GCS test servers (tests/remote_helpers.py), as DuckDB and Beam read them."""

from __future__ import annotations

import json
import os

import pytest

import sackli
from sackli._shard_spec import expand_file_spec
from cli_helpers import fails, ok  # registered by conftest.py
from remote_helpers import servers, remote  # noqa: F401 - fixtures


def write_bag(path, records, **options) -> None:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)


@pytest.fixture
def events(tmp_path, monkeypatch):
    """ev1.bag, ev2.bag, ev10.bag (records naming their file) and decoys no
    glob of bags may match, in the current folder."""
    monkeypatch.chdir(tmp_path)
    for name in ("ev2", "ev10", "ev1"):
        write_bag(f"{name}.bag", [f"{name}:{i}".encode() for i in range(2)])
    write_bag("evs.bag", [b"sep"], limits_placement="SEPARATE")  # and limits.evs.bag
    write_bag(".ev-hidden.bag", [b"hidden"])
    os.mkdir("ev-folder.bag")
    (tmp_path / "ev.bag.arrow_schema").write_bytes(b"not a bag")
    return tmp_path


# --- Which files a glob names -------------------------------------------------------


def test_a_star_reads_every_matching_file_in_sorted_order(events) -> None:
    reader = sackli.Reader("ev[0-9]*.bag")
    assert reader.paths == ("ev1.bag", "ev10.bag", "ev2.bag")  # sorted as strings
    assert reader.read() == [b"ev1:0", b"ev1:1", b"ev10:0", b"ev10:1", b"ev2:0", b"ev2:1"]


def test_question_mark_and_brackets_match_one_character(events) -> None:
    assert expand_file_spec("ev?.bag") == ["ev1.bag", "ev2.bag", "evs.bag"]
    assert expand_file_spec("ev[!2].bag") == ["ev1.bag", "evs.bag"]


def test_hidden_limits_folders_and_sidecars_are_never_matched(events) -> None:
    # limits.evs.bag is the limits of evs.bag, .ev-hidden.bag a hidden file,
    # ev-folder.bag a folder, ev.bag.arrow_schema a sidecar: none is a bag.
    assert expand_file_spec("*") == ["ev1.bag", "ev10.bag", "ev2.bag", "evs.bag"]
    assert expand_file_spec("*.bag") == ["ev1.bag", "ev10.bag", "ev2.bag", "evs.bag"]
    assert sackli.Reader("evs*", limits_placement="SEPARATE").read() == [b"sep"]


def test_a_pattern_that_says_so_matches_hidden_and_limits_files(events) -> None:
    assert expand_file_spec(".ev*") == [".ev-hidden.bag"]
    assert expand_file_spec("limits.*") == ["limits.evs.bag"]


def test_a_glob_matching_nothing_names_the_pattern(events) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\*\.bag: no file matches"):
        sackli.Reader("nope*.bag")
    with pytest.raises(FileNotFoundError, match=r"missing/\*\.bag"):
        sackli.Reader("missing/*.bag")


def test_globs_in_a_comma_list_expand_in_place(events) -> None:
    assert expand_file_spec("evs.bag,ev[0-9].bag,ev10.bag") == [
        "evs.bag", "ev1.bag", "ev2.bag", "ev10.bag"]


def test_globs_in_folder_names_do_not_cross_slashes(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for folder in ("day1", "day2", "day2/deeper"):
        os.makedirs(folder, exist_ok=True)
        write_bag(f"{folder}/x.bag", [folder.encode()])
    assert sackli.Reader("day*/x.bag").read() == [b"day1", b"day2"]
    assert expand_file_spec("*/x.bag") == ["day1/x.bag", "day2/x.bag"]
    assert expand_file_spec(f"{tmp_path}/day?/*.bag") == [
        f"{tmp_path}/day1/x.bag", f"{tmp_path}/day2/x.bag"]
    assert expand_file_spec("posix:day1/*.bag") == ["day1/x.bag"]


def test_name_at_star_is_still_a_shard_set_and_its_shards_glob_too(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with sackli.ShardedWriter("t@2.bag") as writer:
        writer.write_many([b"a", b"b", b"c"])
    assert sackli.Reader("t@*.bag").read() == [b"a", b"b", b"c"]
    assert expand_file_spec("t-*.bag") == ["t-00000-of-00002.bag", "t-00001-of-00002.bag"]
    with pytest.raises(ValueError, match=r"glob"):
        expand_file_spec("t*@*.bag")


def test_brackets_quote_a_literal_glob_character_and_a_lone_bracket_is_literal(
        tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.rename(_written(tmp_path / "a.bag", b"star"), "a*.bag")
    os.rename(_written(tmp_path / "b.bag", b"bracket"), "b[.bag")
    assert sackli.Reader("a[*].bag").read() == [b"star"]
    assert sackli.Reader("b[.bag").read() == [b"bracket"]
    os.rename(_written(tmp_path / "c.bag", b"run"), "c[1].bag")
    with pytest.raises(FileNotFoundError, match=r"no file matches; to name the file of that"):
        sackli.Reader("c[1].bag")
    assert sackli.Reader("c[[]1].bag").read() == [b"run"]


def _written(path, record: bytes):
    write_bag(path, [record])
    return path


# --- Writers refuse globs -------------------------------------------------------------


@pytest.mark.parametrize("spec", ["o*.bag", "d*/o.bag"])
def test_writers_refuse_a_glob(tmp_path, monkeypatch, spec) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"glob"):
        sackli.Writer(spec)
    with pytest.raises(ValueError, match=r"glob"):
        sackli.ShardedWriter(spec)
    assert os.listdir(tmp_path) == []


def test_writers_take_question_marks_and_brackets_literally(tmp_path, monkeypatch) -> None:
    # Legal in file and object names; a file so named reads back by its
    # name (a pattern matching itself) or with its bracket quoted.
    monkeypatch.chdir(tmp_path)
    for name in ("o?.bagz", "o[12].bag"):
        with sackli.Writer(name) as writer:
            writer.write(name)
    assert sorted(os.listdir(tmp_path)) == ["o?.bagz", "o[12].bag"]
    assert sackli.Reader("o?.bagz").read() == [b"o?.bagz"]
    assert sackli.Reader("o[[]12].bag").read() == [b"o[12].bag"]


def test_sharded_writer_refuses_a_glob_in_a_shard_spec(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"glob"):
        sackli.ShardedWriter("o*@2.bag")


# --- The command line -------------------------------------------------------------------


def test_cli_reading_commands_take_globs(events) -> None:
    assert ok("count", "ev[0-9]*.bag", cwd=events) == b"6\n"
    assert ok("cat", "ev[12].bag", cwd=events) == b"ev1:0\nev1:1\nev2:0\nev2:1\n"
    assert ok("head", "-n", "1", "ev1*.bag", cwd=events) == b"ev1:0\n"
    ok("verify", "ev*[0-9].bag", cwd=events)
    shards = json.loads(ok("info", "ev[0-9]*.bag", "--json", cwd=events))["shards"]
    assert [shard["path"] for shard in shards] == ["ev1.bag", "ev10.bag", "ev2.bag"]


def test_cli_convert_reads_a_glob_of_bags_and_of_jsonl(events) -> None:
    ok("convert", "ev[12].bag", "out.bagz", cwd=events)
    assert sackli.Reader(events / "out.bagz").read() == [b"ev1:0", b"ev1:1", b"ev2:0", b"ev2:1"]
    (events / "a.jsonl").write_text('"a"\n')
    (events / "b.jsonl").write_text('"b"\n')
    ok("convert", "*.jsonl", "lines.bag", cwd=events)
    assert sackli.Reader(events / "lines.bag").read() == [b"a", b"b"]


def test_cli_glob_matching_nothing_is_one_line_naming_it(events) -> None:
    assert fails("count", "nope*.bag", cwd=events) == "sackli: error: nope*.bag: no file matches"


def test_cli_convert_refuses_a_glob_destination(events) -> None:
    line = fails("convert", "ev1.bag", "o*.bag", cwd=events, status=2)
    assert "o*.bag" in line and "glob" in line
    assert not list(events.glob("o*"))


# --- Arrow readers go through the same expansion -------------------------------------------


def test_arrow_reads_a_glob_with_its_schema(tmp_path, monkeypatch) -> None:
    pa = pytest.importorskip("pyarrow")
    import sackli.arrow

    monkeypatch.chdir(tmp_path)
    table = pa.table({"x": [1, 2, 3]})
    sackli.arrow.write_table(table, "rows.bagz")
    assert sackli.arrow.read_table("row*.bagz").to_pydict() == {"x": [1, 2, 3]}
    assert b"x: int64" in ok("schema", "row*.bagz", cwd=tmp_path)


# --- Remote: gs:// and s3:// --------------------------------------------------------------


def test_remote_globs_list_the_bucket_in_sorted_order(remote) -> None:
    for name in ("ev2", "ev10", "ev1", "sub/ev3"):
        write_bag(remote.url(f"{name}.bag"), [name.encode()])
    write_bag(remote.url("evs.bag"), [b"sep"], limits_placement="SEPARATE")
    remote.put(".ev-hidden.bag", b"hidden")
    reader = sackli.Reader(remote.url("ev[0-9]*.bag"))
    assert reader.paths == tuple(remote.url(f"{n}.bag") for n in ("ev1", "ev10", "ev2"))
    assert reader.read() == [b"ev1", b"ev10", b"ev2"]
    assert expand_file_spec(remote.url("*")) == [
        remote.url(f"{n}.bag") for n in ("ev1", "ev10", "ev2", "evs")]
    assert expand_file_spec(remote.url("*/ev?.bag")) == [remote.url("sub/ev3.bag")]
    with pytest.raises(FileNotFoundError, match=r"nope\*\.bag: no file matches"):
        sackli.Reader(remote.url("nope*.bag"))


def test_remote_writers_refuse_a_glob(remote) -> None:
    with pytest.raises(ValueError, match=r"glob"):
        sackli.Writer(remote.url("o*.bag"))
    assert remote.objects() == {}
