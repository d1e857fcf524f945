"""Remote reads that check what they got, and remote writes that never
leave a mixture a sackli reader would read silently (sackli/_consistency.py,
the storage layer's Content-Range and identity checks).

Every test goes through the faulting proxy (tests/remote_servers.py) to the
real servers; "killed" writers are subprocesses killed with SIGKILL while the
proxy holds one of their requests.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.parse

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from remote_helpers import (  # noqa: F401  (fixtures)
    BUCKET, SEPARATE, make_records, remote, servers, write_bag,
)

# Records of 40 KiB: 240 of them make a bag over one 8 MiB upload part, so
# its upload is multipart (S3) or resumable (GCS).
BIG_RECORD = 40 * 1024


def big_records(n: int, seed: int) -> list[bytes]:
    return [bytes([seed % 251]) * 8 + os.urandom(BIG_RECORD - 8) for _ in range(n)]


def final_key_match(remote, name: str) -> str:
    """A proxy `match` for requests that write the object `name` itself
    (an S3 PUT or copy, a GCS rewrite onto it), not its hidden copy."""
    key = remote.folder + name
    if remote.scheme == "s3":
        return f"/{BUCKET}/{key}"
    return f"rewriteTo/b/{BUCKET}/o/{urllib.parse.quote(key, safe='')}"


# --- 1. Ranged GETs are checked -----------------------------------------------------


@pytest.mark.parametrize("fault", ["shift", "double"])
def test_a_ranged_answer_for_another_range_is_never_returned(remote, fault):
    """A 206 answer of the right length for another range (a replayed
    answer, a desynchronised connection) is retried, never returned."""
    records = [bytes([i]) * 100 for i in range(200)]
    url = remote.url("shift.bag")
    write_bag(url, records)
    reader = sackli.Reader(url, max_parallelism=1)
    for index in (7, 150, 3):
        getattr(remote.proxy, f"{fault}_next")(1, kinds=["GET"])
        assert reader[index] == records[index]
        assert reader.read_indices([index + 1, index + 30]) == [records[index + 1], records[index + 30]]
    assert remote.proxy.faults_applied[fault] >= 1


def test_an_object_replaced_under_a_reader_is_an_error_not_other_bytes(remote):
    url = remote.url("replaced.bag")
    write_bag(url, [b"a" * 50] * 10)
    reader = sackli.Reader(url)
    assert reader[0] == b"a" * 50
    write_bag(url, [b"b" * 50] * 10)  # same size, other bytes
    with pytest.raises(OSError, match="changed since it was opened") as error:
        reader[1]
    assert error.value.errno == errno.ESTALE
    assert sackli.Reader(url)[1] == b"b" * 50  # a new reader reads the new bag


# --- 2. SEPARATE placement: records first, limits naming their version --------------


def _write_failing_at_close(remote, url: str, records: list[bytes]) -> None:
    """Writes a SEPARATE bag whose records' upload fails at close: its last
    part (S3) or chunk (GCS) is refused, after the earlier ones went out."""
    writer = sackli.Writer(url, limits_placement=SEPARATE)
    writer.write_many(records)
    writer.flush()
    remote.proxy.fail_next(100, kinds=["PUT"], match="partNumber" if remote.scheme == "s3" else None)
    with pytest.raises(OSError):
        writer.close()
    remote.proxy.reset_faults()


def test_a_failed_separate_write_leaves_the_old_bag_as_it_was(remote, monkeypatch):
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "2")
    url = remote.url("sep.bag")
    old = make_records(100, seed=3)
    write_bag(url, old, limits_placement=SEPARATE)
    _write_failing_at_close(remote, url, big_records(240, seed=4))
    assert sackli.Reader(url, limits_placement=SEPARATE).read() == old
    # A fresh name is left with nothing, no stray limits object either.
    _write_failing_at_close(remote, remote.url("fresh.bag"), big_records(240, seed=5))
    assert sorted(remote.objects()) == ["limits.sep.bag", "sep.bag"]


def test_limits_that_failed_after_their_records_are_detected(remote, monkeypatch):
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "2")
    url = remote.url("half.bag")
    write_bag(url, [b"x" * 10] * 50, limits_placement=SEPARATE)
    # The records commit; every upload of the limits object fails.
    remote.proxy.fail_next(100, match="limits." if remote.scheme == "s3" else "uploadType=multipart")
    new = big_records(240, seed=6)
    with pytest.raises(OSError):
        write_bag(url, new, limits_placement=SEPARATE)
    remote.proxy.reset_faults()
    assert remote.get("half.bag")[:BIG_RECORD] == new[0]  # the new records are there...
    with pytest.raises(sackli.CorruptionError, match="written for another version"):
        sackli.Reader(url, limits_placement=SEPARATE)  # ...and never read with old limits
    write_bag(url, new, limits_placement=SEPARATE)  # writing again mends it
    assert sackli.Reader(url, limits_placement=SEPARATE)[239] == new[239]


def test_a_limits_upload_whose_answer_was_lost_is_reported_as_it_ended(remote, monkeypatch):
    """The limits object was stored, its answer lost and not retried: the
    object shows it is this write's, so close() succeeds."""
    url = remote.url("lost.bag")
    records = big_records(240, seed=11)
    writer = sackli.Writer(url, limits_placement=SEPARATE)
    writer.write_many(records)
    writer.flush()
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "1")
    remote.proxy.lose_next(1, match="limits." if remote.scheme == "s3" else "uploadType=multipart")
    writer.close()
    assert remote.proxy.faults_applied["lose"] == 1
    assert sackli.Reader(url, limits_placement=SEPARATE).read_indices([0, 239]) == [
        records[0], records[239]]


# --- 3 and 4. Shard sets and row sets: a manifest brackets the publish --------------


def _start_writer(code: str) -> subprocess.Popen:
    """Runs `code` (with `sackli` and `pyarrow as pa` imported) in a
    subprocess that talks to the same proxies (the environment is
    inherited) and imports the sackli under test."""
    package_parent = str(pathlib.Path(sackli.__file__).resolve().parent.parent)
    # Attempts of 60 s: the stalled request is not given up and retried
    # before the test kills the writer, however loaded the machine.
    env = {**os.environ, "PYTHONPATH": package_parent, "SACKLI_REMOTE_DEADLINE": "600"}
    prelude = "import sackli, sackli.arrow, pyarrow as pa\n"
    return subprocess.Popen([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _kill_when_stalled(remote, writer: subprocess.Popen, timeout: float = 60) -> None:
    """Waits until the proxy holds the writer's stalled request, then kills
    the writer (SIGKILL: no cleanup runs)."""
    deadline = time.monotonic() + timeout
    while remote.proxy.faults_applied["stall"] == 0:
        if writer.poll() is not None:
            raise AssertionError(f"the writer ended first:\n{writer.stdout.read().decode()}")
        if time.monotonic() > deadline:
            writer.kill()
            raise AssertionError("the writer never reached the stalled request")
        time.sleep(0.05)
    time.sleep(0.2)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    remote.proxy.end_stalls()
    remote.proxy.reset_faults()


def test_a_set_whose_publish_was_interrupted_is_never_read_as_a_mixture(remote):
    old = make_records(90, seed=7)
    with sackli.ShardedWriter(remote.url("mix@3.bag")) as writer:
        writer.write_many(old)
    # The copy of the new shard 1 onto its name hangs; the writer is killed
    # there: shard 0 is new, shards 1 and 2 old.
    remote.proxy.stall_next(1, seconds=300, match=final_key_match(remote, "mix-00001-of-00003.bag"))
    writer = _start_writer(f"""
        with sackli.ShardedWriter({remote.url("mix@3.bag")!r}) as writer:
            writer.write_many([b"new %d" % i for i in range(90)])
    """)
    deadline = time.monotonic() + 60
    while remote.proxy.faults_applied["stall"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    # A reader during the publish refuses the set...
    with pytest.raises(sackli.CorruptionError, match="being published, or was interrupted"):
        sackli.Reader(remote.url("mix@3.bag"))
    _kill_when_stalled(remote, writer)
    assert remote.get("mix-00000-of-00003.bag") != b""  # the mixture is there...
    for spec in ("mix@3.bag", "mix@*.bag"):  # ...and no sackli reader reads it
        with pytest.raises(sackli.CorruptionError, match="mix@3.bag.*interrupted"):
            sackli.Reader(remote.url(spec))
    # Writing the set again mends it.
    with sackli.ShardedWriter(remote.url("mix@3.bag")) as writer:
        writer.write_many(old)
    assert sackli.Reader(remote.url("mix@*.bag")).read() == old


def test_a_set_mixing_two_writes_is_an_error(remote):
    """Objects of the set replaced behind the writer's back (another tool,
    a half-finished copy) no longer match the manifest."""
    records = make_records(60, seed=8)
    with sackli.ShardedWriter(remote.url("swap@2.bag")) as writer:
        writer.write_many(records)
    write_bag(remote.url("swap-00001-of-00002.bag"), records[30:][::-1])
    with pytest.raises(sackli.CorruptionError, match="mixes objects of different writes"):
        sackli.Reader(remote.url("swap@2.bag"))
    # A shard read alone is not checked against its set.
    assert sackli.Reader(remote.url("swap-00001-of-00002.bag")).read() == records[30:][::-1]


def test_a_row_set_never_appears_without_its_schema(remote):
    table = pa.table({"x": list(range(40)), "y": [str(i) for i in range(40)]})
    url = remote.url("rows@2.bagz")
    # S3: the schema upload hangs (the old order wrote it after the shards);
    # GCS: the copy of the last shard hangs. The writer is killed there.
    match = ("arrow_schema" if remote.scheme == "s3"
             else final_key_match(remote, "rows-00001-of-00002.bagz"))
    remote.proxy.stall_next(1, seconds=300, match=match)
    writer = _start_writer(f"""
        sackli.arrow.write_table(pa.table({{"x": list(range(40)), "y": [str(i) for i in range(40)]}}),
                                 {url!r})
    """)
    _kill_when_stalled(remote, writer)
    with pytest.raises((sackli.CorruptionError, FileNotFoundError)):
        sackli.arrow.read_table(url)
    sackli.arrow.write_table(table, url)
    assert sackli.arrow.read_table(url).equals(table)


def test_a_row_set_write_that_failed_before_its_publish_leaves_the_old_one(remote, monkeypatch):
    old = pa.table({"x": [1, 2, 3]})
    url = remote.url("back@2.bagz")
    sackli.arrow.write_table(old, url)
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "1")
    # Reading the old manifest, just before it would say "publishing", fails.
    remote.proxy.fail_next(1, status=500, kinds=["GET"], match="back-of-00002.bagz.sackli_set")
    with pytest.raises(OSError) as error:
        sackli.arrow.write_table(pa.table({"z": ["a", "b"]}), url)
    assert "nothing was published" in "".join(getattr(error.value, "__notes__", []))
    assert sackli.arrow.read_table(url).equals(old)
    assert not [name for name in remote.objects() if name.startswith(".")]


def test_a_row_set_write_that_failed_once_decided_is_finished_by_recover(remote, monkeypatch):
    url = remote.url("fwd@2.bagz")
    sackli.arrow.write_table(pa.table({"x": [1, 2, 3]}), url)
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "1")
    # The copy of the first new shard fails: the manifest says "publishing".
    remote.proxy.fail_next(1, status=500, match=final_key_match(remote, "fwd-00000-of-00002.bagz"))
    new = pa.table({"z": ["a", "b"]})
    with pytest.raises(OSError, match=r"published, but not finished.*run `sackli recover "
                       + re.escape(url)):
        sackli.arrow.write_table(new, url)
    with pytest.raises(sackli.CorruptionError, match=re.escape(f"sackli recover {url}")):
        sackli.arrow.read_table(url)
    assert sackli.recover(url) == sackli.RecoveryReport(2, 0, 0, 0)
    assert sackli.arrow.read_table(url).equals(new)
    assert not [name for name in remote.objects() if name.startswith(".")]


def test_a_stale_answer_is_never_taken_for_an_upload_answer(remote):
    """A GET answer sent twice (an HTTP desync) is read by the next request
    on its connection: here the upload of the manifest "publishing", whose
    own answer it seems to be. Regression (found by tests/fault_campaign.py,
    then with the old schema read just before the new one was uploaded):
    the upload counted as done though the server stored something else."""
    url = remote.url("desync@2.bagz")
    sackli.arrow.write_table(pa.table({"x": [1, 2, 3]}), url)
    new = pa.table({"y": ["a", "b"], "z": [1.5, 2.5]})
    # The old manifest is read (to be put back on failure) just before the
    # new one is uploaded.
    remote.proxy.double_next(1, kinds=["GET"], match="sackli_set")
    try:
        sackli.arrow.write_table(new, url)
    except OSError:
        pass  # a clean failure is allowed; a wrong success is not
    else:
        remote.proxy.reset_faults()
        assert sackli.arrow.read_table(url).equals(new)
        return
    remote.proxy.reset_faults()
    try:
        sackli.recover(url)  # whichever way it was decided, the set then reads whole
    except FileNotFoundError:
        pass  # rolled back by close() itself
    assert sackli.arrow.read_table(url) in (new, pa.table({"x": [1, 2, 3]}))


# --- 6. A copy whose answer was lost ------------------------------------------------


def test_a_copy_whose_answer_was_lost_is_finished_by_recover(remote, monkeypatch):
    records = make_records(90, seed=9)
    writer = sackli.ShardedWriter(remote.url("lc@3.bag"))
    writer.write_many(records)
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "1")
    # The server copies shard 1 onto its name; its answer never arrives.
    remote.proxy.lose_next(1, match=final_key_match(remote, "lc-00001-of-00003.bag"))
    with pytest.raises(OSError, match="run `sackli recover"):
        writer.close()
    assert remote.proxy.faults_applied["lose"] == 1
    monkeypatch.delenv("SACKLI_REMOTE_ATTEMPTS")
    assert sackli.recover(remote.url("lc@3.bag")).records == 90
    assert sackli.Reader(remote.url("lc@*.bag")).read() == records
    assert not [name for name in remote.objects() if name.startswith(".")]


def test_the_manifest_names_every_object_of_the_set(remote):
    with sackli.ShardedWriter(remote.url("named@2.bag"), limits_placement=SEPARATE) as writer:
        writer.write_many(make_records(20, seed=10))
    manifest = json.loads(remote.get("named-of-00002.bag.sackli_set"))
    assert manifest["state"] == "complete"
    assert sorted(manifest["objects"]) == sorted(
        n for n in remote.objects() if not n.endswith(".sackli_set"))
