"""`sackli recover` (sackli/cli/_recover.py)."""

from __future__ import annotations

import subprocess
import sys

import sackli
from cli_helpers import (  # registered by conftest.py
    sackli_cli, ok, fails,
)


# --- recover ------------------------------------------------------------------


def _interrupted(folder, records: int, torn_bytes: bytes) -> None:
    """Kills a writer before close(): it leaves the records and limits.<name>,
    plus `torn_bytes` of a record whose limit was never written."""
    code = f"""
import os, sackli
writer = sackli.Writer("log.bagz")
writer.write_many(b"entry %d" % i for i in range({records}))
writer.flush()
with open(writer.partial_path, "ab") as file:
    file.write({torn_bytes!r})
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], cwd=folder, check=True, timeout=60)


def test_recover_an_interrupted_write(tmp_path) -> None:
    _interrupted(tmp_path, 50, torn_bytes=b"half a frame")
    message = fails("count", "log.bagz", cwd=tmp_path)
    assert message.startswith(
        "sackli: error: log.bagz: no such file, but an unfinished write of log.bagz exists")
    assert "complete it with sackli recover PATH" in message
    verify = sackli_cli("verify", "log.bagz", cwd=tmp_path)
    assert verify.returncode == 1
    assert ok("recover", "log.bagz", cwd=tmp_path) == (
        b"log.bagz: recovered 50 record(s); dropped 0 invalid limit(s) and 12 trailing byte(s)\n")
    assert ok("verify", "log.bagz", cwd=tmp_path) == b"verify: OK, 50 records in 1 shard(s); every record checked against its zstd checksum\n"
    assert ok("get", "log.bagz", "49", cwd=tmp_path) == b"entry 49\n"
    assert not (tmp_path / "limits.log.bagz").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["log.bagz"]


def test_recover_a_shard_spec(tmp_path) -> None:
    code = """
import os, sackli
writer = sackli.ShardedWriter("set@3.bag", num_records=30)
writer.write_many(b"r%d" % i for i in range(25))
writer._set._gathered.flush()  # hand the gathered records to the shard writers
writer._set._shard.writer.flush()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=60)
    # Two shards were finished but not yet renamed, the third was being
    # written: the set is completed as one, from its journal.
    assert ok("recover", "set@3.bag", cwd=tmp_path) == b"set@3.bag: recovered 25 record(s)\n"
    assert sackli.Reader(tmp_path / "set@3.bag").read() == [b"r%d" % i for i in range(25)]
    assert sackli.Reader(tmp_path / "set@3.bag").shard_sizes == [10, 10, 5]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert fails("recover", "other@2.bag", cwd=tmp_path) == (
        "sackli: error: other@2.bag: nothing to recover: no unfinished write "
        "(.other@2.bag.sackli-partial-*) beside it (the write completed, or it was "
        "never started)")


def test_interrupted_in_place_write_names_the_cli_flags(tmp_path) -> None:
    with sackli.Writer(tmp_path / "sep.bag", limits_placement="SEPARATE") as writer:
        writer.write(b"x")
    message = fails("count", "sep.bag", cwd=tmp_path)
    assert "Read it with --limits-placement SEPARATE" in message
    assert "sackli recover PATH" in message and "sackli.recover" not in message
    assert ok("count", "sep.bag", "--limits-placement", "SEPARATE", cwd=tmp_path) == b"1\n"
