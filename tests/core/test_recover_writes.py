"""Every interrupted write is found and recovered (issue 31, §1).

Each test kills a real writer process with SIGKILL in the middle of a write
(after enough records for some to have reached the disk), then checks what
a user meets: opening says there is an unfinished write and names the
command; `sackli.recover(spec)` / `sackli recover SPEC` completes it into
a prefix of what was written, in order, dealt into shards as the writer
would have; nothing hidden is left behind.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import sackli
from crash_helpers import child_env, kill_when_ready, sackli_cli
from sackli._shard_set import even_split

RECORD_BYTES = 1000
WRITTEN = 9000  # records handed to the writer before it is killed

# A child that writes WRITTEN distinct, incompressible records (so that
# compressed shards reach the disk as fast as raw ones), says so, and waits
# to be killed. Record i starts with its number.
_CHILD = textwrap.dedent(f"""
    import json, random, sys, time
    import sackli
    how = json.loads(sys.argv[1])
    rnd = random.Random(7)
    records = (b"%08d" % i + rnd.randbytes({RECORD_BYTES} - 8) for i in range({WRITTEN}))
    if how["writer"] == "Writer":
        writer = sackli.Writer(how["spec"], **how.get("options", {{}}))
    else:
        writer = sackli.ShardedWriter(how["spec"], **how.get("options", {{}}))
    writer.write_many(records)
    print("ready", flush=True)
    time.sleep(120)
""")


def _kill_mid_write(folder, spec: str, writer: str = "ShardedWriter", **options) -> None:
    """Runs a writer of `spec` in `folder` and kills it (SIGKILL) mid-write."""
    how = json.dumps({"spec": spec, "writer": writer, "options": options})
    kill_when_ready(_CHILD, how, folder)


def _assert_prefix_in_order(reader: sackli.Reader) -> None:
    assert 0 < len(reader) <= WRITTEN
    for index in (0, len(reader) // 2, len(reader) - 1):
        assert reader[index][:8] == b"%08d" % index
    assert [record[:8] for record in reader] == [b"%08d" % i for i in range(len(reader))]


def _visible_only(folder) -> list[str]:
    names = sorted(os.listdir(folder))
    assert not [name for name in names if name.startswith(".")], names
    return names


def _recover(folder, spec: str, how: str) -> int:
    """Recovers `spec` through the API or the command line; records saved."""
    if how == "api":
        return sackli.recover(os.path.join(folder, spec)).records
    done = sackli_cli("recover", spec, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{spec}: recovered ")
    return int(done.stdout.split("recovered ")[1].split()[0])


@pytest.mark.parametrize("how", ["api", "cli"])
def test_a_set_spooled_for_an_unknown_count_is_recovered_dealt_evenly(tmp_path, how):
    _kill_mid_write(tmp_path, "crash@3.bagz")
    with pytest.raises(FileNotFoundError, match=r"unfinished write of \S*crash@3\.bagz.*"
                                                 r"sackli recover"):
        sackli.Reader(str(tmp_path / "crash@3.bagz"))
    count = sackli_cli("count", "crash@3.bagz", cwd=tmp_path)
    assert count.returncode == 1
    assert "unfinished write" in count.stderr and "sackli recover PATH" in count.stderr
    saved = _recover(tmp_path, "crash@3.bagz", how)
    reader = sackli.Reader(str(tmp_path / "crash@3.bagz"))
    assert len(reader) == saved
    _assert_prefix_in_order(reader)
    assert reader.shard_sizes == even_split(saved, 3)  # as close() deals them
    assert _visible_only(tmp_path) == [f"crash-0000{i}-of-00003.bagz" for i in range(3)]


@pytest.mark.parametrize("atomic", [True, False])
def test_a_set_of_known_count_keeps_each_record_in_its_shard(tmp_path, atomic):
    announced = 3 * 4000
    _kill_mid_write(tmp_path, "known@3.bag", num_records=announced, atomic=atomic)
    # Atomic, no shard is at its name yet; in place, the one being written
    # has no limits yet (as in bagz): either way the error names the command.
    with pytest.raises((FileNotFoundError, sackli.CorruptionError),
                       match=r"(unfinished write|interrupted).*sackli\.recover"):
        sackli.Reader(str(tmp_path / "known@*.bag"))
    saved = sackli.recover(str(tmp_path / "known@3.bag")).records
    reader = sackli.Reader(str(tmp_path / "known@3.bag"))
    _assert_prefix_in_order(reader)
    assert len(reader) == saved
    # The writer deals 4000 records to each shard in turn: full shards,
    # then the one it was writing, then empty ones.
    sizes = reader.shard_sizes
    full = saved // 4000
    assert sizes == ([4000] * full + [saved - 4000 * full] + [0] * 3)[:3]
    assert _visible_only(tmp_path) == [f"known-0000{i}-of-00003.bag" for i in range(3)]


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_a_set_cut_by_size_is_recovered_under_final_names(tmp_path, suffix):
    limit = 2 << 20
    _kill_mid_write(tmp_path, f"bysize@*{suffix}", max_shard_bytes=limit)
    with pytest.raises(FileNotFoundError, match=r"unfinished write of \S*bysize@\*"):
        sackli.Reader(str(tmp_path / f"bysize@*{suffix}"))
    done = sackli_cli("recover", f"bysize@*{suffix}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reader = sackli.Reader(str(tmp_path / f"bysize@*{suffix}"))
    _assert_prefix_in_order(reader)
    shards = len(reader.paths)
    assert shards >= 2
    assert _visible_only(tmp_path) == [f"bysize-{i:05d}-of-{shards:05d}{suffix}"
                                       for i in range(shards)]
    for path in reader.paths[:-1]:
        # Kept to the budget, as the writer deals: exactly for raw records,
        # within its running estimate of the compression ratio for zstd.
        assert os.path.getsize(path) <= limit * (1 if suffix == ".bag" else 1.05)


def test_a_single_bag_is_recovered_and_its_limits_reach_the_disk_as_it_goes(tmp_path):
    # 9 MB of records but only 72 kB of limits: the limits follow the
    # records out of their buffers, or nothing could be recovered.
    _kill_mid_write(tmp_path, "one.bag", writer="Writer")
    with pytest.raises(FileNotFoundError, match=r"unfinished write of \S*one\.bag"):
        sackli.Reader(str(tmp_path / "one.bag"))
    saved = _recover(tmp_path, "one.bag", "cli")
    assert saved > WRITTEN // 2
    _assert_prefix_in_order(sackli.Reader(str(tmp_path / "one.bag")))
    assert _visible_only(tmp_path) == ["one.bag"]


def test_recover_dir_completes_every_unfinished_write_in_a_folder(tmp_path):
    _kill_mid_write(tmp_path, "a.bagz", writer="Writer")
    _kill_mid_write(tmp_path, "b@2.bag")
    _kill_mid_write(tmp_path, "c@*.bag", max_shard_bytes=3 << 20)
    done = sackli_cli("recover", ".", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert [line.split(":")[0] for line in lines] == ["./a.bagz", "./b@2.bag", "./c@*.bag"]
    assert all(" recovered " in line for line in lines)
    for spec in ("a.bagz", "b@2.bag", "c@*.bag"):
        _assert_prefix_in_order(sackli.Reader(str(tmp_path / spec)))
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]
    again = sackli_cli("recover", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.strip().endswith("no unfinished writes")


def test_info_and_verify_name_an_unfinished_write_beside_what_they_read(tmp_path):
    with sackli.ShardedWriter(str(tmp_path / "data@2.bag")) as writer:
        writer.write_many([b"old"] * 10)
    _kill_mid_write(tmp_path, "data@2.bag")  # a new write of it, killed
    for command in ("info", "verify"):
        for spec in ("data@2.bag", "data-00000-of-00002.bag", "."):
            done = sackli_cli(command, spec, cwd=tmp_path)
            assert re.search(r"note: (\./)?data@2\.bag: an unfinished write \(a shard set.*"
                             r"sackli recover (\./)?data@2\.bag", done.stderr), \
                (command, spec, done.stderr)
    assert len(sackli.Reader(str(tmp_path / "data@2.bag"))) == 10  # the old set reads on


def test_a_writer_dropped_without_close_publishes_nothing_and_warns(tmp_path):
    path = str(tmp_path / "dropped.bag")

    def write_then_fail() -> None:
        writer = sackli.Writer(path)
        writer.write_many([b"x" * 100] * 50)
        raise RuntimeError("the caller's bug")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError):
            write_then_fail()
        gc.collect()
    assert not os.path.exists(path)  # before: a partial bag that looked complete
    messages = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(messages) == 1
    assert "was not closed: nothing was published" in messages[0]
    assert "sackli recover" in messages[0]
    assert sackli.recover(path).records == 50
    assert len(sackli.Reader(path)) == 50


def test_a_sharded_writer_dropped_without_close_publishes_nothing_and_warns_once(tmp_path):
    spec = str(tmp_path / "dropped@2.bag")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer = sackli.ShardedWriter(spec, num_records=100)
        writer.write_many([b"y" * 10] * 70)
        del writer
        gc.collect()
    resource = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert len(resource) == 1 and "sackli recover" in str(resource[0].message)
    assert not [name for name in os.listdir(tmp_path) if not name.startswith(".")]
    assert sackli.recover(spec).records == 70
    assert sackli.Reader(spec).shard_sizes == [50, 20]


# A child that streams 20 of 30 batches of rows to write_table (a stream
# of unknown length: the rows are spooled), says so, and waits.
_TABLE_CHILD = textwrap.dedent("""
    import random, sys, time
    import pyarrow as pa
    import sackli.arrow
    rnd = random.Random(3)
    schema = pa.schema([("i", pa.int64()), ("blob", pa.binary())])

    def stream():
        for b in range(30):
            if b == 20:
                print("ready", flush=True)
                time.sleep(120)
            yield pa.record_batch({"i": list(range(b * 500, b * 500 + 500)),
                                   "blob": [rnd.randbytes(800) for _ in range(500)]},
                                  schema=schema)

    sackli.arrow.write_table(pa.RecordBatchReader.from_batches(schema, stream()), sys.argv[1])
""")


def test_a_row_set_is_recovered_with_its_schema(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    import sackli.arrow

    kill_when_ready(_TABLE_CHILD, "rows@3.bagz", tmp_path)
    done = sackli_cli("recover", "rows@3.bagz", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = sackli.arrow.read_table(str(tmp_path / "rows@3.bagz"))
    assert 0 < table.num_rows <= 10_000
    assert table.column("i").to_pylist() == list(range(table.num_rows))
    assert table.schema.field("blob").type == pyarrow.binary()
    assert _visible_only(tmp_path) == [*(f"rows-0000{i}-of-00003.bagz" for i in range(3)),
                                       "rows-of-00003.bagz.arrow_schema"]


def test_a_with_block_whose_close_fails_leaves_nothing_behind(tmp_path):
    # A file-size limit makes the write fail for real (EFBIG), here at
    # close(), when the TAIL limits are appended past the limit.
    code = textwrap.dedent("""
        import resource, signal, sackli
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))
        try:
            with sackli.Writer("full.bag") as writer:
                writer.write_many([b"z" * 999] * 100)  # 99,900 bytes: the limits do not fit
        except OSError as error:
            print("failed:", error.strerror)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("failed: "), done.stderr
    assert os.listdir(tmp_path) == []
