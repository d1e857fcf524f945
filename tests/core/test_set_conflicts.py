"""No silent ambiguity in shard sets (issue 31, section 2).

- Writing `dup@2.bag` beside an existing `dup@3.bag` set is refused with
  FileExistsError naming the other set, before anything is written;
  `overwrite=True` (`--force` on the command line) publishes the new set,
  THEN deletes the old one (its shards, `limits.` files, a row set's schema
  file and, on a bucket, its manifest). Same-count rewrites and plain
  `x.bag` files beside a set are not conflicts.
- Writers refuse shard counts outside 1..99999 (`x@0.bag`, `x@100000.bag`)
  with ValueError (exit status 2 on the command line); readers keep reading
  a literal `x@0.bag`; Beam's `@0` means one unsharded file, as in bagz.

Local folders and gs:// / s3:// (the real test servers of remote_helpers).
"""

from __future__ import annotations

import pathlib

import pytest

import sackli
from cli_helpers import fails, ok, sackli_cli
from remote_helpers import make_records, remote, servers  # noqa: F401

RECORDS = [b"record %03d" % i for i in range(30)]


def shard_names(base: str, count: int, suffix: str) -> list[str]:
    return [f"{base}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def listing(folder: pathlib.Path) -> list[str]:
    """Every name in `folder`, hidden ones included."""
    return sorted(p.name for p in folder.iterdir())


def write_set(spec, records=RECORDS, **options) -> list[str]:
    with sackli.ShardedWriter(spec, **options) as writer:
        writer.write_many(records)
    return writer.paths


def read_all(spec, **options) -> list[bytes]:
    with sackli.Reader(spec, **options) as reader:
        return list(reader)


# --- Local: refused without overwrite ---------------------------------------


@pytest.mark.parametrize("num_records", [None, len(RECORDS)], ids=["spooled", "counted"])
def test_another_count_is_refused_before_anything_is_written(tmp_path, num_records):
    write_set(tmp_path / "dup@3.bag")
    before = listing(tmp_path)
    with pytest.raises(FileExistsError) as caught:
        sackli.ShardedWriter(tmp_path / "dup@2.bag", num_records=num_records)
    message = str(caught.value)
    assert "dup@3.bag" in message and "dup-00000-of-00003.bag" in message
    assert "overwrite=True" in message
    assert listing(tmp_path) == before
    assert read_all(tmp_path / "dup@*.bag") == RECORDS  # still one set


def test_every_other_set_is_named(tmp_path):
    write_set(tmp_path / "dup@3.bag")
    (tmp_path / "dup-00000-of-00005.bag").write_bytes(b"")  # even one stray shard counts
    with pytest.raises(FileExistsError, match=r"dup@3\.bag.*dup@5\.bag"):
        sackli.ShardedWriter(tmp_path / "dup@2.bag")


def test_by_size_is_refused_at_close_before_any_shard_is_published(tmp_path):
    write_set(tmp_path / "dup@2.bag")
    before = listing(tmp_path)
    writer = sackli.ShardedWriter(tmp_path / "dup@*.bag", max_shard_bytes=100)
    writer.write_many(RECORDS)  # about 8 shards
    with pytest.raises(FileExistsError, match=r"dup@2\.bag"):
        writer.close()
    assert listing(tmp_path) == before


def test_by_size_with_the_same_count_is_not_a_conflict(tmp_path):
    first = write_set(tmp_path / "same@*.bag", max_shard_bytes=100)
    assert write_set(tmp_path / "same@*.bag", RECORDS[::-1], max_shard_bytes=100) == first
    assert read_all(tmp_path / "same@*.bag") == RECORDS[::-1]


def test_same_count_rewrite_is_not_a_conflict(tmp_path):
    write_set(tmp_path / "dup@3.bag")
    write_set(tmp_path / "dup@3.bag", RECORDS[:5])
    assert listing(tmp_path) == shard_names("dup", 3, ".bag")
    assert read_all(tmp_path / "dup@*.bag") == RECORDS[:5]


def test_a_plain_bag_and_other_suffixes_are_not_conflicts(tmp_path):
    write_set(tmp_path / "x.bag")
    write_set(tmp_path / "x@2.bagz")
    write_set(tmp_path / "x@2.bag")
    write_set(tmp_path / "x.bag", RECORDS[:3])
    write_set(tmp_path / "x-y@4.bag")  # another base that starts alike
    assert read_all(tmp_path / "x@*.bag") == RECORDS
    assert read_all(tmp_path / "x.bag") == RECORDS[:3]


# --- Local: overwrite=True ---------------------------------------------------


@pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])
def test_overwrite_publishes_the_new_set_then_deletes_the_old(tmp_path, monkeypatch, placement):
    import sackli._set_conflicts as conflicts

    options = {"limits_placement": getattr(sackli.LimitsPlacement, placement)}
    write_set(tmp_path / "dup@3.bag", **options)
    seen = []
    remove = conflicts.delete_objects

    def spy(paths):
        paths = list(paths)
        seen.append((paths, listing(tmp_path)))  # what exists when the old files go
        remove(paths)

    monkeypatch.setattr(conflicts, "delete_objects", spy)
    new = write_set(tmp_path / "dup@2.bag", RECORDS[:7], overwrite=True, **options)
    assert seen, "the old set was not removed"
    for _, present in seen:
        assert set(shard_names("dup", 2, ".bag")) <= set(present)  # new set first
    limits = [] if placement == "TAIL" else [f"limits.{n}" for n in shard_names("dup", 2, ".bag")]
    assert listing(tmp_path) == sorted(shard_names("dup", 2, ".bag") + limits)
    assert new == [str(tmp_path / n) for n in shard_names("dup", 2, ".bag")]
    assert read_all(tmp_path / "dup@*.bag", **options) == RECORDS[:7]


def test_overwrite_removes_the_files_about_the_old_set(tmp_path):
    """The schema and record-format files named after the old set go with
    it; the shared `dup.bag.arrow_schema` (a plain dup.bag's) stays."""
    write_set(tmp_path / "dup@3.bag")
    for name in ("dup-of-00003.bag.arrow_schema", "dup-of-00003.bag.record_format",
                 "dup.bag.arrow_schema"):
        (tmp_path / name).write_bytes(b"about")
    write_set(tmp_path / "dup@2.bag", overwrite=True)
    assert listing(tmp_path) == sorted(shard_names("dup", 2, ".bag") + ["dup.bag.arrow_schema"])


def test_overwrite_by_size_replaces_the_old_set(tmp_path):
    write_set(tmp_path / "dup@2.bag")
    paths = write_set(tmp_path / "dup@*.bag", max_shard_bytes=100, overwrite=True)
    assert len(paths) > 2
    assert listing(tmp_path) == shard_names("dup", len(paths), ".bag")
    assert read_all(tmp_path / "dup@*.bag") == RECORDS


def test_a_failed_overwrite_keeps_the_old_set(tmp_path):
    write_set(tmp_path / "dup@3.bag")
    before = {name: (tmp_path / name).read_bytes() for name in listing(tmp_path)}
    with pytest.raises(RuntimeError, match="stop"):
        with sackli.ShardedWriter(tmp_path / "dup@2.bag", overwrite=True) as writer:
            writer.write_many(RECORDS)
            raise RuntimeError("stop")
    assert {name: (tmp_path / name).read_bytes() for name in listing(tmp_path)} == before


def test_overwrite_must_be_a_bool(tmp_path):
    with pytest.raises(TypeError, match="overwrite"):
        sackli.ShardedWriter(tmp_path / "x@2.bag", overwrite="yes")


# --- Arrow: write_table --------------------------------------------------------


def _table(n: int):
    import pyarrow as pa
    return pa.table({"id": list(range(n)), "name": [f"n{i}" for i in range(n)]})


def test_write_table_refuses_another_count(tmp_path):
    sackli_arrow = pytest.importorskip("sackli.arrow")
    sackli_arrow.write_table(_table(10), tmp_path / "rows@3.bagz")
    before = listing(tmp_path)
    with pytest.raises(FileExistsError, match=r"rows@3\.bagz"):
        sackli_arrow.write_table(_table(4), tmp_path / "rows@2.bagz")
    assert listing(tmp_path) == before


def test_write_table_overwrite_removes_the_old_set_and_its_schema(tmp_path):
    sackli_arrow = pytest.importorskip("sackli.arrow")
    sackli_arrow.write_table(_table(10), tmp_path / "rows@3.bagz")
    assert "rows-of-00003.bagz.arrow_schema" in listing(tmp_path)
    sackli_arrow.write_table(_table(4), tmp_path / "rows@2.bagz", overwrite=True)
    assert listing(tmp_path) == sorted(
        shard_names("rows", 2, ".bagz") + ["rows-of-00002.bagz.arrow_schema"])
    assert sackli_arrow.read_table(str(tmp_path / "rows@*.bagz")).equals(_table(4))


def test_write_table_overwrite_is_for_bags_only(tmp_path):
    sackli_arrow = pytest.importorskip("sackli.arrow")
    with pytest.raises(ValueError, match="overwrite"):
        sackli_arrow.write_table(_table(2), tmp_path / "ds", spec="auto", overwrite=True)


# --- Command line ----------------------------------------------------------------


def test_convert_refuses_another_count_and_force_replaces_it(tmp_path):
    write_set(tmp_path / "in.bag")
    ok("convert", "in.bag", "dup@3.bag", cwd=tmp_path)
    before = listing(tmp_path)
    line = fails("convert", "in.bag", "dup@2.bag", cwd=tmp_path)
    assert "dup@3.bag" in line and "dup-00000-of-00003.bag" in line and "--force" in line
    assert "overwrite=True" not in line
    assert listing(tmp_path) == before
    ok("convert", "in.bag", "dup@2.bag", "--force", cwd=tmp_path)
    assert listing(tmp_path) == sorted(["in.bag"] + shard_names("dup", 2, ".bag"))
    assert read_all(tmp_path / "dup@*.bag") == RECORDS


def test_convert_other_formats_refuse_another_count(tmp_path):
    write_set(tmp_path / "in.bag")
    ok("convert", "in.bag", "t@3.tfrecord", cwd=tmp_path)
    assert "t@3.tfrecord" in fails("convert", "in.bag", "t@2.tfrecord", cwd=tmp_path)
    ok("convert", "in.bag", "t@2.tfrecord", "--force", cwd=tmp_path)
    assert listing(tmp_path) == sorted(["in.bag"] + shard_names("t", 2, ".tfrecord"))


def test_convert_parquet_refuses_another_count_and_force_replaces_it(tmp_path):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(_table(10), tmp_path / "t.parquet")
    ok("convert", "t.parquet", "rows@3.bagz", cwd=tmp_path)
    line = fails("convert", "t.parquet", "rows@2.bagz", cwd=tmp_path)
    assert "rows@3.bagz" in line and "--force" in line
    ok("convert", "t.parquet", "rows@2.bagz", "--force", cwd=tmp_path)
    assert listing(tmp_path) == sorted(
        ["t.parquet", "rows-of-00002.bagz.arrow_schema"] + shard_names("rows", 2, ".bagz"))


# --- Shard counts outside 1..99999 -----------------------------------------------

BAD_COUNTS = ["x@0.bagz", "x@00.bagz", "x@100000.bagz", "x.bagz@0"]


@pytest.mark.parametrize("name", BAD_COUNTS)
def test_sharded_writer_refuses_counts_outside_the_range(tmp_path, name):
    with pytest.raises(ValueError, match="1 to 99999"):
        sackli.ShardedWriter(tmp_path / name)
    assert listing(tmp_path) == []


def test_the_message_names_the_one_file_for_at_zero(tmp_path):
    with pytest.raises(ValueError, match=r"for one unsharded file, write .*/x\.bagz$"):
        sackli.ShardedWriter(tmp_path / "x@0.bagz")


@pytest.mark.parametrize("name", BAD_COUNTS)
def test_write_table_refuses_counts_outside_the_range(tmp_path, name):
    sackli_arrow = pytest.importorskip("sackli.arrow")
    with pytest.raises(ValueError, match="1 to 99999"):
        sackli_arrow.write_table(_table(3), tmp_path / name)
    assert listing(tmp_path) == []


@pytest.mark.parametrize("name", ["x@0.bagz", "x@100000.bag"])
def test_convert_refuses_counts_outside_the_range_as_a_usage_error(tmp_path, name):
    from sackli.cli import _errors

    write_set(tmp_path / "in.bag")
    # Raised as a usage error (exit status 2, the subcommand's usage prefix).
    with pytest.raises(_errors.UsageError, match="1 to 99999"):
        _convert_in_process(tmp_path, name)
    assert listing(tmp_path) == ["in.bag"]


def _convert_in_process(tmp_path: pathlib.Path, name: str) -> int:
    """Runs the convert subcommand itself (not through main's error
    handling), so that the exception it raises is seen."""
    from sackli.cli._commands import build_parser

    args = build_parser("sackli").parse_args(
        ["convert", str(tmp_path / "in.bag"), str(tmp_path / name)])
    return args.command(args)


@pytest.mark.parametrize("name", ["x@0.bagz", "x@100000.bag"])
def test_convert_exits_2_for_counts_outside_the_range(tmp_path, name):
    write_set(tmp_path / "in.bag")
    result = sackli_cli("convert", "in.bag", name, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "1 to 99999" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()
    assert listing(tmp_path) == ["in.bag"]


def test_readers_still_read_a_literal_at_zero_file(tmp_path):
    """`x@0.bag` is a literal file name for readers (as in bagz): one an
    older sackli wrote stays readable."""
    with sackli.Writer(tmp_path / "x@0.bag") as writer:
        writer.write_many(RECORDS[:2])
    assert read_all(str(tmp_path / "x@0.bag")) == RECORDS[:2]


# --- Beam: @0 is one unsharded file, as in bagz ----------------------------------


@pytest.mark.parametrize("name", ["out@0.bagz", "out.bagz@0", "out@00.bagz", "out.bagz@00"])
def test_beam_at_zero_is_one_unsharded_file(name):
    pytest.importorskip("apache_beam")
    from sackli.beam._write_path import parse_write_path

    where = parse_write_path(f"dir/{name}")
    assert where.unsharded and where.pattern() == "dir/out.bagz"


def test_beam_refuses_counts_above_the_range():
    pytest.importorskip("apache_beam")
    from sackli.beam._write_path import parse_write_path

    with pytest.raises(ValueError, match="99999"):
        parse_write_path("dir/out@100000.bagz")


# --- gs:// and s3:// ---------------------------------------------------------------


def test_remote_another_count_is_refused_before_anything_is_written(remote):
    records = make_records(40, seed=31)
    write_set(remote.url("dup@3.bag"), records)
    before = {name: remote.get(name) for name in remote.objects()}
    with pytest.raises(FileExistsError) as caught:
        sackli.ShardedWriter(remote.url("dup@2.bag"))
    assert remote.url("dup@3.bag") in str(caught.value)
    assert {name: remote.get(name) for name in remote.objects()} == before
    assert read_all(remote.url("dup@*.bag")) == records


def test_remote_by_size_is_refused_at_close_leaving_nothing(remote):
    write_set(remote.url("dup@2.bag"), make_records(40, seed=35))
    before = {name: remote.get(name) for name in remote.objects()}
    writer = sackli.ShardedWriter(remote.url("dup@*.bag"), max_shard_bytes=2000)
    writer.write_many(make_records(60, seed=36))
    with pytest.raises(FileExistsError, match=r"dup@2\.bag"):
        writer.close()
    # No new shard, no hidden partial object, the old manifest as it was.
    assert {name: remote.get(name) for name in remote.objects()} == before


def test_remote_overwrite_replaces_the_set_its_limits_and_manifest(remote):
    separate = {"limits_placement": sackli.LimitsPlacement.SEPARATE}
    write_set(remote.url("dup@3.bag"), make_records(40, seed=32), **separate)
    assert "dup-of-00003.bag.sackli_set" in remote.objects()
    records = make_records(20, seed=33)
    write_set(remote.url("dup@2.bag"), records, overwrite=True, **separate)
    names = shard_names("dup", 2, ".bag")
    assert sorted(remote.objects()) == sorted(
        names + [f"limits.{n}" for n in names] + ["dup-of-00002.bag.sackli_set"])
    assert read_all(remote.url("dup@*.bag"), **separate) == records


def test_remote_write_table_overwrite_removes_the_old_schema(remote):
    sackli_arrow = pytest.importorskip("sackli.arrow")
    sackli_arrow.write_table(_table(10), remote.url("rows@3.bagz"))
    with pytest.raises(FileExistsError, match="rows@3"):
        sackli_arrow.write_table(_table(4), remote.url("rows@2.bagz"))
    sackli_arrow.write_table(_table(4), remote.url("rows@2.bagz"), overwrite=True)
    assert sorted(remote.objects()) == sorted(
        shard_names("rows", 2, ".bagz")
        + ["rows-of-00002.bagz.arrow_schema", "rows-of-00002.bagz.sackli_set"])
    assert sackli_arrow.read_table(remote.url("rows@*.bagz")).equals(_table(4))


def test_remote_convert_refuses_another_count_and_force_replaces_it(remote, tmp_path):
    records = make_records(40, seed=34)
    write_set(tmp_path / "in.bag", records)
    ok("convert", "in.bag", remote.url("dup@3.bag"), cwd=tmp_path)
    assert "--force" in fails("convert", "in.bag", remote.url("dup@2.bag"), cwd=tmp_path)
    ok("convert", "in.bag", remote.url("dup@2.bag"), "--force", cwd=tmp_path)
    assert sorted(remote.objects()) == sorted(
        shard_names("dup", 2, ".bag") + ["dup-of-00002.bag.sackli_set"])
    assert read_all(remote.url("dup@*.bag")) == records
