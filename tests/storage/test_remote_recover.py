"""`sackli recover` on buckets (sackli/_bucket_journal.py,
sackli/_bucket_recover.py): a shard-set or row-set write killed with
SIGKILL at each stage of its publish rolls forward (its manifest said
"publishing") or back (it did not), and leaves no hidden object.

The writer is a child process that kills itself with SIGKILL just before a
chosen step (the first upload, a middle one, the schema, the manifest,
each copy, the final manifest, the clean-up): no clean-up of its runs,
as after a crash or the OOM killer. Every request goes through the
faulting proxy to moto's S3 and fake-gcs-server (and one test through the
proxy's stall to gcp-storage-emulator).
"""

from __future__ import annotations

import json
import time
import urllib.parse
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import NamedTuple

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from sackli.cli import main
from killed_writers import FORWARD, killed_writer
from remote_helpers import (  # noqa: F401  (fixtures)
    BUCKET, emulated_gcs, gcs_emulator, make_records, remote, servers,
)


class _Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def recover_cli(capsys):
    """`sackli recover URL` (the CLI's main, in this process)."""
    def run(url: str) -> _Ran:
        capsys.readouterr()
        status = main(["recover", url])
        out, err = capsys.readouterr()
        return _Ran(status, out, err)
    return run


def _hidden(remote) -> list[str]:
    return [name for name in remote.objects() if name.startswith(".")]


def _read(url: str) -> list[bytes] | None:
    try:
        return sackli.Reader(url).read()
    except FileNotFoundError:
        return None


@pytest.mark.parametrize("kill_point", ["first upload", "manifest", "copy 3", "final manifest"])
def test_a_set_replaced_in_place_rolls_back_or_forward(remote, kill_point, recover_cli):
    url = remote.url("set@4.bag")
    old, new = make_records(40, seed=1), make_records(40, seed=2)
    with sackli.ShardedWriter(url) as writer:
        writer.write_many(old)
    killed_writer(kill_point, f"""
        with sackli.ShardedWriter({url!r}, num_records=40) as writer:
            writer.write_many({new!r})
    """)
    forward = kill_point in FORWARD
    if kill_point == "copy 3":  # a mixture: refused, naming the command that mends it
        with pytest.raises(sackli.CorruptionError, match=f"`sackli recover {url}`"):
            sackli.Reader(url)
    done = recover_cli(url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{url}: {'rolled forward' if forward else 'rolled back'}")
    assert sackli.Reader(remote.url("set@*.bag")).read() == (new if forward else old)
    assert _hidden(remote) == []
    manifest = json.loads(remote.get("set-of-00004.bag.sackli_set"))
    assert manifest["state"] == "complete"
    done = recover_cli(url)  # nothing left to do
    assert done.returncode != 0 and "nothing to recover" in done.stderr


@pytest.mark.parametrize("kill_point", ["middle upload", "copy 1", "clean-up"])
def test_a_sized_set_over_an_older_count_rolls_back_or_forward(remote, kill_point):
    """`name@*` with overwrite: forward, the older set@4 goes; back, it stays."""
    old, new = make_records(40, seed=3), make_records(60, seed=4, max_size=600)
    with sackli.ShardedWriter(remote.url("sized@4.bag")) as writer:
        writer.write_many(old)
    spec = remote.url("sized@*.bag")
    killed_writer(kill_point, f"""
        with sackli.ShardedWriter({spec!r}, max_shard_bytes=4000, overwrite=True) as writer:
            writer.write_many({new!r})
    """)
    report = sackli.recover(spec)
    forward = kill_point in FORWARD
    assert report == sackli.RecoveryReport(60 if forward else 0, 0, 0, 0 if forward else 1)
    assert sackli.Reader(spec).read() == (new if forward else old)
    assert (_read(remote.url("sized@4.bag")) is None) == forward
    assert _hidden(remote) == []


@pytest.mark.parametrize("kill_point, older", [("schema", True), ("schema", False),
                                               ("copy 1", True)])
def test_a_row_set_with_its_schema_rolls_back_or_forward(remote, kill_point, older):
    url = remote.url("rows@2.bagz")
    old = pa.table({"x": list(range(30))})
    if older:
        sackli.arrow.write_table(old, url)
    killed_writer(kill_point, f"""
        sackli.arrow.write_table(pa.table({{"y": [str(i) for i in range(40)]}}), {url!r})
    """)
    sackli.recover(url)
    if kill_point in FORWARD:
        assert sackli.arrow.read_table(url).equals(pa.table({"y": [str(i) for i in range(40)]}))
    elif older:
        assert sackli.arrow.read_table(url).equals(old)
    else:
        assert remote.objects() == {}  # nothing: a new name stays free
    assert _hidden(remote) == []


def test_a_staged_object_changed_since_it_was_staged_is_neither(remote, recover_cli):
    url = remote.url("chg@2.bag")
    killed_writer("copy 1", f"""
        with sackli.ShardedWriter({url!r}, num_records=20) as writer:
            writer.write_many([b"new"] * 20)
    """)
    staged = next(name for name in _hidden(remote) if name.endswith("chg-00001-of-00002.bag"))
    remote.put(staged, b"someone else's bytes")
    before = remote.objects()
    done = recover_cli(url)
    assert done.returncode == 1
    assert f"{url}: neither" in done.stderr and "changed since it was staged" in done.stderr
    assert remote.objects() == before  # nothing changed
    with pytest.raises(OSError, match="changed since it was staged"):
        sackli.recover(url)


def test_every_interrupted_write_under_a_prefix(remote, recover_cli):
    for name, point in (("a@2.bag", "manifest"), ("b@2.bag", "copy 1")):
        killed_writer(point, f"""
            with sackli.ShardedWriter({remote.url(name)!r}, num_records=10) as writer:
                writer.write_many([b"r"] * 10)
        """)
    done = recover_cli(remote.url())
    assert done.returncode == 0, done.stderr
    assert sorted(line.split(" (")[0] for line in done.stdout.splitlines()) == [
        f"{remote.url('a@2.bag')}: rolled back", f"{remote.url('b@2.bag')}: rolled forward"]
    assert _read(remote.url("a@2.bag")) is None
    assert sackli.Reader(remote.url("b@2.bag")).read() == [b"r"] * 10
    assert _hidden(remote) == []
    assert recover_cli(remote.url()).stdout == f"{remote.url()}: no unfinished writes\n"


# S3 alone: a GCS upload names its object in its body, which the proxy's
# `match` does not see (the abort this checks is the same code on both).
@pytest.mark.parametrize("remote", ["s3"], indirect=True)
def test_a_manifest_that_cannot_be_put_back_keeps_the_staging(remote, recover_cli):
    """The upload of the manifest "publishing" fails, and so does putting
    the old one back: the staging stays (the manifest could name it), the
    error names `sackli recover`, which then undoes the write."""
    url = remote.url("kept@2.bag")
    old = make_records(20, seed=7)
    with sackli.ShardedWriter(url) as writer:
        writer.write_many(old)
    remote.proxy.fail_next(2, status=403, kinds=["PUT"], match="sackli_set")
    writer = sackli.ShardedWriter(url, num_records=20)
    writer.write_many(make_records(20, seed=8))
    with pytest.raises(OSError) as raised:
        writer.close()
    remote.proxy.reset_faults()
    assert f"run `sackli recover {url}`" in " ".join(getattr(raised.value, "__notes__", []))
    assert _hidden(remote)  # the staging, journal included
    done = recover_cli(url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{url}: rolled back")
    assert sackli.Reader(url).read() == old
    assert _hidden(remote) == []


@pytest.mark.parametrize("spec", ["orphan@2.bag", "orphan@*.bag", ""])
def test_a_manifest_left_publishing_by_an_undone_write_is_removed(remote, recover_cli, spec):
    """What an earlier sackli left when an abort removed the staging but
    could not put the manifest back: "publishing", naming a journal that
    is gone. Nothing of that write reached the set's names (copies begin
    after the decision, and a decided write keeps its journal), so
    `sackli recover` removes the manifest and the older set reads again.
    A "publishing" manifest of a write without staging is left alone (its
    shards may be mixed)."""
    from sackli._bucket_journal import staging_prefix
    from sackli._consistency import SetManifest

    url = remote.url("orphan@2.bag")
    old = make_records(20, seed=9)
    with sackli.ShardedWriter(url) as writer:
        writer.write_many(old)
    shards = [remote.url(f"orphan-0000{i}-of-00002.bag") for i in range(2)]
    SetManifest(shards, "pid 1 gone").begin(staging_prefix(url) + "sackli-write.json")
    other = remote.url("unstaged@2.bag")
    with sackli.ShardedWriter(other) as writer:
        writer.write_many(old)
    unstaged = [remote.url(f"unstaged-0000{i}-of-00002.bag") for i in range(2)]
    SetManifest(unstaged, "pid 2 gone").begin()
    with pytest.raises(sackli.CorruptionError, match=f"`sackli recover {url}`"):
        sackli.Reader(url)
    done = recover_cli(remote.url(spec))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"{url}: rolled back (its write was undone, but its manifest "
        f"{remote.url('orphan-of-00002.bag.sackli_set')} still said 'publishing'; removed it: "
        "the set reads as before the write)"]
    assert sackli.Reader(url).read() == old
    with pytest.raises(sackli.CorruptionError, match="write the set again"):
        sackli.Reader(other)


def test_a_url_with_no_interrupted_write(remote):
    with pytest.raises(FileNotFoundError, match="nothing to recover: no journal"):
        sackli.recover(remote.url("none@2.bag"))


def test_a_copy_killed_on_the_wire_rolls_forward_on_gcp_storage_emulator(emulated_gcs):
    """The issue's case on a second GCS server, killed by the proxy's stall
    (not by a hook): the copy onto shard 2 of 4 hangs, the writer dies."""
    remote = emulated_gcs
    url = remote.url("wire@4.bag")
    with sackli.ShardedWriter(url) as writer:
        writer.write_many(make_records(40, seed=5))
    key = urllib.parse.quote(remote.folder + "wire-00002-of-00004.bag", safe="")
    remote.proxy.stall_next(1, seconds=300, match=f"rewriteTo/b/{BUCKET}/o/{key}")
    new = make_records(40, seed=6)
    package_parent = str(pathlib.Path(sackli.__file__).resolve().parent.parent)
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sackli
            with sackli.ShardedWriter({url!r}, num_records=40) as writer:
                writer.write_many({new!r})
        """)], env={**os.environ, "PYTHONPATH": package_parent, "SACKLI_REMOTE_DEADLINE": "600"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while remote.proxy.faults_applied["stall"] == 0 and time.monotonic() < deadline:
            assert writer.poll() is None
            time.sleep(0.05)
    finally:
        writer.kill()
        writer.wait()
        remote.proxy.end_stalls()
        remote.proxy.reset_faults()
    with pytest.raises(sackli.CorruptionError, match=f"`sackli recover {url}`"):
        sackli.Reader(url)
    assert sackli.recover(url).records == 40
    assert sackli.Reader(url).read() == new
    assert _hidden(remote) == []
