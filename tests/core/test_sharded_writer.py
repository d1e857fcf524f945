"""sackli.ShardedWriter: one bag or a shard set, written atomically.

A set appears all at once at close(): before that, and after a crash or a
failed `with` block, no file carries a final name."""

from __future__ import annotations

import glob
import os
import pathlib
import signal

import pytest

import sackli

RECORDS = [b"record %05d " % i * (1 + i % 7) for i in range(5000)]


def names(folder: pathlib.Path) -> list[str]:
    """The visible files of `folder` (partial folders are hidden)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
@pytest.mark.parametrize("num_records", [None, len(RECORDS)], ids=["streamed", "counted"])
def test_fixed_count_round_trip(tmp_path, suffix, num_records):
    spec = str(tmp_path / f"out@4{suffix}")
    with sackli.ShardedWriter(spec, num_records=num_records) as writer:
        assert writer.paths == [str(tmp_path / f"out-0000{i}-of-00004{suffix}") for i in range(4)]
        for record in RECORDS[:10]:
            writer.write(record)
        writer.write_many(RECORDS[10:])
        assert names(tmp_path) == []  # nothing under a final name yet
    assert names(tmp_path) == [f"out-0000{i}-of-00004{suffix}" for i in range(4)]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    reader = sackli.Reader(spec)
    assert reader.read() == RECORDS
    assert reader.shard_sizes == [1250] * 4


@pytest.mark.parametrize("suffix, slack", [(".bag", 1.0), (".bagz", 1.02)])
def test_by_size_round_trip(tmp_path, suffix, slack):
    """Raw shards stay within max_shard_bytes; compressed ones within what
    the compression ratio learnt so far predicts."""
    spec = str(tmp_path / f"sized@*{suffix}")
    writer = sackli.ShardedWriter(spec, max_shard_bytes=20_000)
    writer.write_many(iter(RECORDS))
    paths = writer.close()
    assert len(paths) > 3 and paths == writer.paths
    assert paths == sorted(glob.glob(str(tmp_path / f"sized-*-of-*{suffix}")))
    assert all(os.path.getsize(p) <= 20_000 * slack for p in paths)
    assert sackli.Reader(spec).read() == RECORDS
    assert writer.close() == paths  # idempotent


def test_plain_path_and_options(tmp_path):
    path = tmp_path / "one.bag"
    with sackli.ShardedWriter(path, limits_placement="SEPARATE") as writer:
        writer.write_many(["text", bytearray(b"ba"), memoryview(b"mv")])
    assert names(tmp_path) == ["limits.one.bag", "one.bag"]
    assert sackli.Reader(path, limits_placement="SEPARATE").read() == [b"text", b"ba", b"mv"]


def test_empty_shards(tmp_path):
    spec = str(tmp_path / "few@3.bag")
    with sackli.ShardedWriter(spec) as writer:
        writer.write(b"only")
    assert sackli.Reader(spec).shard_sizes == [1, 0, 0]


def test_a_failed_with_block_leaves_the_old_set(tmp_path):
    spec = str(tmp_path / "kept@2.bag")
    with sackli.ShardedWriter(spec) as writer:
        writer.write_many([b"old"] * 10)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RuntimeError):
        with sackli.ShardedWriter(spec) as writer:
            writer.write_many([b"new"] * 100_000)
            raise RuntimeError("stop")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    with pytest.raises(ValueError, match="closed"):
        writer.write(b"late")


@pytest.mark.parametrize("spec, num_records", [("k@8.bagz", None), ("k@8.bagz", 200_000), ("k@*.bagz", None)])
def test_killed_mid_write_leaves_no_file_under_a_final_name(tmp_path, run_python, spec, num_records):
    """kill -9 in the middle of a set used to leave shards that look like a
    complete set to a glob."""
    extra = ", max_shard_bytes=200_000" if "*" in spec else f", num_records={num_records}"
    result = run_python(f"""
        import os, signal, sackli
        writer = sackli.ShardedWriter({spec!r}{extra})
        for i in range(200_000):
            writer.write(b"%07d" % i * 10)
            if i == 150_000:
                os.kill(os.getpid(), signal.SIGKILL)
    """, timeout=120)
    assert result.returncode == -signal.SIGKILL
    assert names(tmp_path) == []
    assert glob.glob(str(tmp_path / "k-*-of-*.bagz")) == []


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="max_shard_bytes"):
        sackli.ShardedWriter(tmp_path / "x@*.bag")
    with pytest.raises(ValueError, match="max_shard_bytes"):
        sackli.ShardedWriter(tmp_path / "x@4.bag", max_shard_bytes=10)
    with pytest.raises(ValueError, match="> 0"):
        sackli.ShardedWriter(tmp_path / "x@*.bag", max_shard_bytes=0)
    with pytest.raises(ValueError, match="list"):
        sackli.ShardedWriter(f"{tmp_path}/a.bag,{tmp_path}/b.bag")
    with pytest.raises(ValueError, match="'ftp:' paths are not supported"):
        sackli.ShardedWriter("ftp://host/x@4.bag")
    with pytest.raises(FileNotFoundError):
        sackli.ShardedWriter(tmp_path / "missing" / "x@2.bag")
    with pytest.raises(TypeError):
        sackli.ShardedWriter(42)
    with pytest.raises(TypeError):
        sackli.ShardedWriter(tmp_path / "x@2.bag", num_records="3")
    with pytest.raises(TypeError, match="record"):
        sackli.ShardedWriter(tmp_path / "x@2.bag").write(3)
    with pytest.raises(ValueError, match="announced"):
        with sackli.ShardedWriter(tmp_path / "y@2.bag", num_records=3) as writer:
            writer.write_many([b"a"] * 2)
    assert names(tmp_path) == []
