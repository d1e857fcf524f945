"""How a bag reaches its path: in place (`atomic=False`, as bagz writes, for
readers that follow a growing bag), durably (`durable=True`: fsync before
the rename that publishes, the folder after) and through symbolic links
(the link stays, the file it points to is replaced)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import bagz
import pyarrow as pa
import pytest

import sackli
import sackli.arrow
import syscall_trace

SEPARATE = sackli.LimitsPlacement.SEPARATE
TAIL = sackli.LimitsPlacement.TAIL
RECORDS = [b"record %d;" % i * (i % 4) for i in range(60)]


def hidden(folder: pathlib.Path) -> list[str]:
    """The hidden entries of `folder` (a writer's temporary files)."""
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def bagz_separate(path: pathlib.Path) -> list[bytes]:
    options = bagz.Reader.Options(limits_placement=bagz.LimitsPlacement.SEPARATE)
    return list(bagz.Reader(str(path), options))


# --- atomic=False: in place ---------------------------------------------------


@pytest.mark.parametrize("name", ["live.bag", "live.bagz"])
def test_in_place_flush_makes_the_records_so_far_readable_at_the_path(tmp_path, name):
    path = tmp_path / name
    with sackli.Writer(path, atomic=False, limits_placement=SEPARATE) as writer:
        assert writer.partial_path == str(path)
        writer.write_many(RECORDS[:25])
        writer.flush()
        # A reader that follows the bag opens it again after each flush.
        with sackli.Reader(path, limits_placement=SEPARATE) as live:
            assert list(live) == RECORDS[:25]
        assert bagz_separate(path) == RECORDS[:25]
        writer.write_many(RECORDS[25:])
        writer.flush()
        with sackli.Reader(path, limits_placement=SEPARATE) as live:
            assert list(live) == RECORDS
        assert hidden(tmp_path) == []  # no temporary folder
    assert sorted(os.listdir(tmp_path)) == sorted([name, "limits." + name])
    assert bagz_separate(path) == RECORDS


@pytest.mark.parametrize("placement", [TAIL, SEPARATE])
@pytest.mark.parametrize("name", ["same.bag", "same.bagz"])
def test_in_place_writes_the_bytes_bagz_writes(tmp_path, placement, name):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    # checksum=False: bagz writes zstd frames without their checksum.
    with sackli.Writer(ours / name, atomic=False, limits_placement=placement,
                       checksum=False) as writer:
        writer.write_many(RECORDS)
    options = bagz.Writer.Options(limits_placement=bagz.LimitsPlacement[placement.name])
    with bagz.Writer(str(theirs / name), options) as writer:
        for record in RECORDS:
            writer.write(record)
    assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
    for file in os.listdir(theirs):
        assert (ours / file).read_bytes() == (theirs / file).read_bytes(), file


def test_in_place_replaces_an_existing_bag_and_its_old_limits(tmp_path):
    path = tmp_path / "again.bag"
    with sackli.Writer(path, limits_placement=SEPARATE) as writer:
        writer.write_many([b"old"] * 100)
    with sackli.Writer(path, atomic=False) as writer:  # TAIL now
        writer.write_many(RECORDS[:3])
    assert os.listdir(tmp_path) == ["again.bag"]
    assert list(sackli.Reader(path)) == RECORDS[:3]


_CRASH = """
import os, sys, sackli
writer = sackli.Writer(sys.argv[1], atomic=False, limits_placement=sackli.LimitsPlacement[sys.argv[2]])
writer.write_many([b"record %d;" % i * (i % 4) for i in range(60)][:40])
writer.flush()
writer.write(b"after the last flush")
os._exit(9)  # a crash: no close, no cleanup
"""


@pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])
def test_a_crash_in_place_leaves_a_bag_that_recover_completes(tmp_path, placement):
    path = tmp_path / "crash.bagz"
    child = subprocess.run([sys.executable, "-c", _CRASH, str(path), placement])
    assert child.returncode == 9
    with sackli.Reader(path, limits_placement=SEPARATE) as live:
        assert list(live) == RECORDS[:40]
    report = sackli.recover(path)
    assert report.records == 40
    assert list(sackli.Reader(path)) == RECORDS[:40]
    assert os.listdir(tmp_path) == ["crash.bagz"]


def test_a_failed_with_block_in_place_keeps_what_it_wrote_for_recover(tmp_path):
    path = tmp_path / "failed.bag"
    with pytest.raises(RuntimeError, match="stop"):
        with sackli.Writer(path, atomic=False) as writer:
            writer.write_many(RECORDS[:10])
            raise RuntimeError("stop")
    # The target already held the records: nothing is deleted.
    assert sorted(os.listdir(tmp_path)) == ["failed.bag", "limits.failed.bag"]
    assert sackli.recover(path).records == 10
    assert list(sackli.Reader(path)) == RECORDS[:10]


def test_writer_options_carry_atomic_and_durable(tmp_path):
    options = sackli.Writer.Options(atomic=False, durable=True)
    with sackli.Writer(tmp_path / "o.bag", options) as writer:
        assert writer.options.atomic is False and writer.options.durable is True
        assert writer.partial_path == str(tmp_path / "o.bag")
    assert sackli.Writer.Options().atomic is True
    assert sackli.Writer.Options().durable is False
    for field in ("atomic", "durable"):
        with pytest.raises(TypeError, match=f"{field} must be True or False"):
            sackli.Writer.Options(**{field: "yes"})


@pytest.mark.parametrize("url", ["gs://bucket/a.bag", "s3://bucket/a.bagz",
                                 "s3://bucket/set@2.bag", "gs://bucket/set@*.bag"])
def test_in_place_on_a_bucket_is_a_value_error_that_says_why(url):
    with pytest.raises(ValueError, match="atomic=False.*upload completes"):
        if "@" in url:
            sackli.ShardedWriter(url, atomic=False, **(
                {"max_shard_bytes": 1000} if "@*" in url else {}))
        else:
            sackli.Writer(url, atomic=False)


def test_sharded_writer_in_place_writes_each_shard_at_its_name(tmp_path):
    spec = tmp_path / "set@3.bag"
    with sackli.ShardedWriter(spec, atomic=False, num_records=len(RECORDS),
                              limits_placement=SEPARATE) as writer:
        writer.write_many(RECORDS[:21])  # the first shard holds 20
        # Shard 0 is finished; shard 1 is being written at its own name.
        assert os.path.exists(tmp_path / "set-00000-of-00003.bag")
        assert os.path.exists(tmp_path / "set-00001-of-00003.bag")
        with sackli.Reader(tmp_path / "set-00000-of-00003.bag",
                           limits_placement=SEPARATE) as first:
            assert list(first) == RECORDS[:20]
        # Hidden: only the set's journal (for sackli.recover), no records.
        (journal_folder,) = hidden(tmp_path)
        assert journal_folder.startswith(".set@3.bag.sackli-partial-")
        assert os.listdir(tmp_path / journal_folder) == ["sackli-write.json"]
        writer.write_many(RECORDS[21:])
    assert list(sackli.Reader(str(spec), limits_placement=SEPARATE)) == RECORDS
    assert hidden(tmp_path) == []


def test_sharded_writer_in_place_by_size_names_its_pending_shards_at_close(tmp_path):
    spec = str(tmp_path / "grow@*.bag")
    with sackli.ShardedWriter(spec, atomic=False, max_shard_bytes=200) as writer:
        writer.write_many(RECORDS)
        assert any("-of-pending" in name for name in os.listdir(tmp_path))
    assert not any("pending" in name for name in os.listdir(tmp_path))
    assert len(writer.paths) > 1
    assert list(sackli.Reader(spec)) == RECORDS


def test_sharded_writer_in_place_without_a_count_spools_then_writes_in_place(tmp_path):
    spec = str(tmp_path / "spooled@2.bagz")
    with sackli.ShardedWriter(spec, atomic=False) as writer:
        writer.write_many(RECORDS)
    assert list(sackli.Reader(spec)) == RECORDS
    assert sorted(os.listdir(tmp_path)) == ["spooled-00000-of-00002.bagz",
                                            "spooled-00001-of-00002.bagz"]


# --- durable=True -------------------------------------------------------------


@pytest.fixture(scope="module")
def tracer(tmp_path_factory):
    return syscall_trace.build(tmp_path_factory.mktemp("syscall_trace"))


def traced(tracer, tmp_path: pathlib.Path, code: str) -> list[syscall_trace.Call]:
    calls = syscall_trace.run(tracer, "import sackli\n" + code, tmp_path / "calls.log")
    # Only the calls on the files under test (not the log, not the spool).
    return [c for c in calls if str(tmp_path / "out") in c.path]


def folder_synced_after_last_rename(calls, folder: pathlib.Path) -> bool:
    renames = [i for i, c in enumerate(calls) if c.name == "rename"]
    syncs = [i for i, c in enumerate(calls) if c.name == "fsync" and c.path == str(folder)]
    return bool(renames) and bool(syncs) and syncs[-1] > renames[-1]


@pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])
def test_durable_writer_syncs_every_file_before_the_rename_and_the_folder_after(
        tracer, tmp_path, placement):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
with sackli.Writer({str(out / 'd.bagz')!r}, durable=True,
                   limits_placement=sackli.LimitsPlacement.{placement}) as w:
    w.write_many([b"x" * 100] * 50)
""")
    renames = [c for c in calls if c.name == "rename"]
    published = {c.to for c in renames}
    expected = {str(out / "d.bagz")} | ({str(out / "limits.d.bagz")} if placement == "SEPARATE" else set())
    assert published == expected
    for rename in renames:
        synced_before = [c for c in calls[:calls.index(rename)]
                         if c.name == "fsync" and c.path == rename.path]
        assert synced_before, f"{rename.path} was renamed before it was synced: {calls}"
    assert folder_synced_after_last_rename(calls, out), calls
    assert list(sackli.Reader(out / "d.bagz", limits_placement=placement)) == [b"x" * 100] * 50


def test_without_durable_nothing_is_synced(tracer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
with sackli.Writer({str(out / 'n.bagz')!r}) as w:
    w.write_many([b"x"] * 50)
with sackli.ShardedWriter({str(out / 'n@2.bag')!r}, num_records=4) as w:
    w.write_many([b"x"] * 4)
""")
    assert [c for c in calls if c.name == "fsync"] == []
    assert len([c for c in calls if c.name == "rename"]) == 3


@pytest.mark.parametrize("count", ["num_records=30", "", "max_shard_bytes=100"])
def test_durable_shard_set_syncs_every_shard_before_any_rename_and_the_folder_after_the_last(
        tracer, tmp_path, count):
    out = tmp_path / "out"
    out.mkdir()
    spec = str(out / ("s@*.bag" if "max_shard" in count else "s@3.bag"))
    calls = traced(tracer, tmp_path, f"""
with sackli.ShardedWriter({spec!r}, durable=True, {count}) as w:
    w.write_many([b"y" * 20] * 30)
""")
    first_rename = next(i for i, c in enumerate(calls) if c.name == "rename")
    renamed = [c.path for c in calls if c.name == "rename"]
    synced_early = {c.path for c in calls[:first_rename] if c.name == "fsync"}
    assert len(renamed) >= 3 and set(renamed) <= synced_early, calls
    assert folder_synced_after_last_rename(calls, out), calls
    # The folder is synced once, after the last rename.
    assert [c.path for c in calls if c.name == "fsync" and c.path == str(out)] == [str(out)]


def test_durable_in_place_syncs_the_file_and_its_folder(tracer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
with sackli.Writer({str(out / 'p.bag')!r}, durable=True, atomic=False) as w:
    w.write_many([b"z"] * 10)
""")
    assert [c for c in calls if c.name == "rename"] == []
    assert [c.path for c in calls if c.name == "fsync"] == [str(out / "p.bag"), str(out)]


def test_durable_write_table_syncs_its_shards_and_schema(tracer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
import pyarrow as pa, sackli.arrow
table = pa.table({{"x": list(range(100)), "s": ["v%d" % i for i in range(100)]}})
sackli.arrow.write_table(table, {str(out / 't@2.bagz')!r}, durable=True)
""")
    renamed = [c.to for c in calls if c.name == "rename"]
    assert str(out / "t-of-00002.bagz.arrow_schema") in renamed
    assert str(out / "t-00001-of-00002.bagz") in renamed
    for rename in (c for c in calls if c.name == "rename"):
        assert any(c.name == "fsync" and c.path == rename.path
                   for c in calls[:calls.index(rename)]), rename
    assert folder_synced_after_last_rename(calls, out), calls
    assert sackli.arrow.read_table(str(out / "t@2.bagz")).num_rows == 100


# --- symbolic links -----------------------------------------------------------


@pytest.fixture
def linked(tmp_path):
    """`links/current.bag` -> `../store/v1.bag` (an existing bag)."""
    (tmp_path / "store").mkdir()
    (tmp_path / "links").mkdir()
    with sackli.Writer(tmp_path / "store" / "v1.bag") as writer:
        writer.write(b"old")
    link = tmp_path / "links" / "current.bag"
    link.symlink_to(pathlib.Path("..") / "store" / "v1.bag")
    return link


def test_writing_through_a_link_keeps_it_and_replaces_the_file_it_points_to(linked, tmp_path):
    target = tmp_path / "store" / "v1.bag"
    with sackli.Writer(linked) as writer:
        writer.write_many(RECORDS)
        # The temporary files are beside the file that will be replaced.
        assert os.path.samefile(os.path.dirname(os.path.dirname(writer.partial_path)),
                                target.parent)
        assert hidden(tmp_path / "store") != [] and hidden(tmp_path / "links") == []
    assert linked.is_symlink()
    assert os.readlink(linked) == os.path.join("..", "store", "v1.bag")
    assert list(sackli.Reader(target)) == RECORDS
    assert list(sackli.Reader(linked)) == RECORDS
    assert hidden(tmp_path / "store") == []


def test_writing_through_a_link_with_separate_limits_keeps_them_beside_the_link(linked, tmp_path):
    with sackli.Writer(linked, limits_placement=SEPARATE) as writer:
        writer.write_many(RECORDS)
    assert linked.is_symlink()
    # Readers of the link look for limits.current.bag beside it, as bagz's do.
    assert list(sackli.Reader(linked, limits_placement=SEPARATE)) == RECORDS
    assert bagz_separate(linked) == RECORDS


def test_writing_through_a_dangling_link_creates_the_file(tmp_path):
    link = tmp_path / "ahead.bag"
    link.symlink_to("later.bag")
    with sackli.Writer(link) as writer:
        writer.write(b"now")
    assert link.is_symlink()
    assert list(sackli.Reader(tmp_path / "later.bag")) == [b"now"]


def test_a_chain_of_links_is_followed_to_its_end(tmp_path, linked):
    first = tmp_path / "first.bag"
    first.symlink_to(linked)
    with sackli.Writer(first) as writer:
        writer.write(b"chained")
    assert first.is_symlink() and linked.is_symlink()
    assert list(sackli.Reader(tmp_path / "store" / "v1.bag")) == [b"chained"]


def test_a_loop_of_links_is_an_error_naming_the_path(tmp_path):
    loop = tmp_path / "loop.bag"
    loop.symlink_to("loop.bag")
    with pytest.raises(OSError, match="loop.bag"):
        sackli.Writer(loop)


def test_sharded_writer_and_in_place_write_through_links(linked, tmp_path):
    with sackli.ShardedWriter(linked) as writer:
        writer.write_many(RECORDS[:5])
    assert linked.is_symlink() and list(sackli.Reader(linked)) == RECORDS[:5]
    with sackli.Writer(linked, atomic=False) as writer:
        writer.write_many(RECORDS[:7])
    assert linked.is_symlink() and list(sackli.Reader(linked)) == RECORDS[:7]


_INTERRUPTED = """
import os, sys, sackli
writer = sackli.Writer(sys.argv[1])
writer.write_many([b"r%d" % i for i in range(30)])
writer.flush()
os._exit(9)
"""


def test_recover_through_a_link_completes_the_file_it_points_to(linked, tmp_path):
    child = subprocess.run([sys.executable, "-c", _INTERRUPTED, str(linked)])
    assert child.returncode == 9
    assert sackli.recover(linked).records == 30
    assert linked.is_symlink()
    assert list(sackli.Reader(linked)) == [b"r%d" % i for i in range(30)]
    assert hidden(tmp_path / "store") == []


def test_a_schema_sidecar_is_written_through_its_link(tmp_path):
    (tmp_path / "real").mkdir()
    table = pa.table({"x": [1, 2, 3]})
    sidecar = tmp_path / "t.bagz.arrow_schema"
    sidecar.symlink_to(tmp_path / "real" / "schema")
    sackli.arrow.write_table(table, tmp_path / "t.bagz")
    assert sidecar.is_symlink()
    assert (tmp_path / "real" / "schema").stat().st_size > 0
    assert sackli.arrow.read_table(str(tmp_path / "t.bagz")).to_pylist() == table.to_pylist()


def _renames_synced_first(calls) -> bool:
    """Every renamed file or folder was synced before its rename."""
    return all(any(c.name == "fsync" and c.path == rename.path for c in calls[:i])
               for i, rename in enumerate(calls) if rename.name == "rename")


def test_durable_dataset_writer_syncs_every_file_and_folder_before_the_shard_appears(
        tracer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
import sackli.datasets as datasets
with datasets.ShardedDatasetWriter({str(out / 'ds')!r}, {{"n": "int(8)", "s": "utf8"}},
                                   shard_length=3, durable=True) as writer:
    for i in range(5):
        writer.append({{"n": i, "s": "v%d" % i}})
""")
    shards = [c.to for c in calls if c.name == "rename" and c.to.startswith(str(out / "ds") + "/")
              and os.path.dirname(c.to) == str(out / "ds")]
    assert shards == [str(out / "ds" / "000000"), str(out / "ds" / "000001")], calls
    for shard in shards:
        rename = next(i for i, c in enumerate(calls) if c.name == "rename" and c.to == shard)
        partial = calls[rename].path
        synced = {c.path for c in calls[:rename] if c.name == "fsync"}
        placed = {c.to for c in calls[:rename] if c.name == "rename"}
        # Every file of the shard reached the disk (synced, then renamed into
        # the shard's folder: _renames_synced_first), and so did the folder.
        for name in ("refs.bag", "n.bag", "s.bag", "spec.json"):
            assert os.path.join(partial, name) in placed, (name, calls)
        assert partial in synced
        assert any(c.name == "fsync" and c.path == str(out / "ds") for c in calls[rename:])
    assert _renames_synced_first(calls), calls
    import sackli.datasets as datasets
    assert len(datasets.ShardedDatasetReader(str(out / "ds"))) == 5


def test_without_durable_the_dataset_writer_syncs_nothing(tracer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
import sackli.datasets as datasets
with datasets.DatasetWriter({str(out / 'ds')!r}, {{"n": "int(8)"}}) as writer:
    writer.append({{"n": 1}})
""")
    assert [c for c in calls if c.name == "fsync"] == []


@pytest.mark.parametrize("durable", [True, False])
def test_durable_map_write_syncs_the_map_before_its_rename(tracer, tmp_path, durable):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
import sackli.maps
sackli.maps.write({str(out / 'm.mb')!r}, [(i, b"v%d" % i) for i in range(100)], "gzip",
                  durable={durable})
""")
    renames = [c for c in calls if c.name == "rename"]
    assert [c.to for c in renames] == [str(out / "m.mb")]
    if durable:
        assert _renames_synced_first(calls), calls
        assert folder_synced_after_last_rename(calls, out), calls
    else:
        assert [c for c in calls if c.name == "fsync"] == []
    import sackli.maps
    assert sackli.maps.MapBuffer(out / "m.mb")[7] == b"v7"


def test_a_map_is_written_through_its_link(tmp_path):
    import sackli.maps
    (tmp_path / "real").mkdir()
    link = tmp_path / "m.mb"
    link.symlink_to(tmp_path / "real" / "m.mb")
    sackli.maps.write(link, [(1, b"one")])
    assert link.is_symlink()
    assert sackli.maps.MapBuffer(tmp_path / "real" / "m.mb")[1] == b"one"


def test_durable_write_table_to_a_dataset(tracer, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    calls = traced(tracer, tmp_path, f"""
import pyarrow as pa, sackli.arrow
sackli.arrow.write_table(pa.table({{"x": [1, 2, 3]}}), {str(out / 'ds')!r}, spec="auto",
                         durable=True)
""")
    assert _renames_synced_first(calls), calls
    assert any(c.name == "fsync" and c.path == str(out / "ds") for c in calls)


@pytest.mark.parametrize("field", [{"atomic": False}, {"durable": True}])
def test_beam_sinks_refuse_write_modes_that_beam_cannot_keep(tmp_path, field):
    from sackli.beam import WriteToSackli
    with pytest.raises(ValueError, match=f"{next(iter(field))}=.*temporary name"):
        WriteToSackli(str(tmp_path / "out@2.bag"), options=sackli.Writer.Options(**field))
