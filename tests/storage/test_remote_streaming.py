"""Remote writes stream (sackli/_storage/_staged.py, _storage/_s3_upload.py,
_gcs_upload.py): the records leave in parts as they are written, so local
disk holds only the limits; the object appears only at close; a failed or
discarded write leaves no object and no unfinished multipart upload. Run
against moto's S3 server and fake-gcs-server behind the fault proxy (and
gcp-storage-emulator where fake-gcs-server falls short)."""

from __future__ import annotations

import os
import random
import tempfile

import pytest

import sackli
from remote_helpers import (  # loaded through conftest.py
    BUCKET, TAIL, SEPARATE, servers, remote, gcs_emulator, emulated_gcs,
)

PLACEMENTS = pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
SUFFIXES = pytest.mark.parametrize("suffix", [".bag", ".bagz"])
PART = 8 << 20  # the upload streams' part / chunk size (_storage/_upload.py)
RECORD = 256 * 1024


def big_records(total: int, seed: int = 0) -> list[bytes]:
    """Incompressible records (zstd cannot shrink them) of `total` bytes."""
    rng = random.Random(seed)
    return [rng.randbytes(RECORD) for _ in range(total // RECORD)]


def disk_use(folder) -> int:
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(folder) for name in names)


def uploads_in_progress(remote) -> list[str]:
    """Keys of the unfinished multipart uploads in the test's folder (S3);
    GCS has no listing of resumable sessions: an empty list."""
    if remote.scheme != "s3":
        return []
    listed = remote.raw.client.list_multipart_uploads(Bucket=BUCKET, Prefix=remote.folder)
    return [u["Key"] for u in listed.get("Uploads", [])]


def uploads_sent(remote) -> int:
    return remote.proxy.counts["PUT"] + remote.proxy.counts["POST"]


@pytest.fixture
def local_temp(tmp_path, monkeypatch):
    """Python's temporary folder, where remote writers keep their local
    files, moved to a folder of the test's own to measure it."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@PLACEMENTS
@SUFFIXES
def test_large_write_streams_with_bounded_local_disk(remote, local_temp, placement, suffix):
    url = remote.url("big" + suffix)
    records = big_records(3 * PART + PART // 2)
    writer = sackli.Writer(url, limits_placement=placement)
    writer.write_many(records)
    writer.flush()
    # Three whole parts have left; the local disk holds the limits only.
    assert disk_use(local_temp) < 64 * 1024
    assert uploads_sent(remote) >= 3
    assert remote.objects() == {}  # nothing visible before close
    if remote.scheme == "s3":
        assert uploads_in_progress(remote) == [remote.folder + "big" + suffix]
    writer.close()
    expected = {"big" + suffix}
    if placement == SEPARATE:
        expected.add("limits.big" + suffix)
    assert set(remote.objects()) == expected
    assert uploads_in_progress(remote) == []
    assert not os.listdir(local_temp)  # the local folder is gone
    assert sackli.Reader(url, limits_placement=placement).read() == records


@PLACEMENTS
@SUFFIXES
def test_discarded_large_write_leaves_no_object_or_upload(remote, local_temp, placement, suffix):
    url = remote.url("dropped" + suffix)
    with pytest.raises(RuntimeError, match="boom"):
        with sackli.Writer(url, limits_placement=placement) as writer:
            writer.write_many(big_records(2 * PART + 1))
            writer.flush()
            assert uploads_sent(remote) >= 2
            raise RuntimeError("boom")
    assert remote.objects() == {}
    assert uploads_in_progress(remote) == []
    assert not os.listdir(local_temp)


def test_writer_dropped_without_close_leaves_no_upload(remote, local_temp):
    url = remote.url("abandoned.bag")
    writer = sackli.Writer(url)
    writer.write_many(big_records(PART + RECORD))
    writer.flush()
    del writer
    assert remote.objects() == {}
    assert uploads_in_progress(remote) == []
    assert not os.listdir(local_temp)


def test_failed_part_upload_raises_and_leaves_nothing(remote, local_temp):
    url = remote.url("refused.bag")
    writer = sackli.Writer(url)
    remote.proxy.fail_fraction(1.0, status=403, kinds=["PUT"])
    with pytest.raises(PermissionError) as caught:
        with writer:
            writer.write_many(big_records(2 * PART))
            writer.flush()
    assert url in str(caught.value)
    remote.proxy.reset_faults()
    assert remote.objects() == {}
    assert uploads_in_progress(remote) == []
    assert not os.listdir(local_temp)


def test_a_writer_whose_part_failed_never_publishes(remote, local_temp):
    # Writing on after the error and closing raise; nothing appears.
    url = remote.url("broken.bag")
    writer = sackli.Writer(url)
    remote.proxy.fail_fraction(1.0, status=403, kinds=["PUT"])
    with pytest.raises(PermissionError):
        writer.write_many(big_records(2 * PART))
        writer.flush()
    remote.proxy.reset_faults()
    with pytest.raises(OSError, match="aborted"):
        writer.write_many(big_records(PART))
    with pytest.raises(OSError, match="aborted"):
        writer.close()
    assert remote.objects() == {}
    assert uploads_in_progress(remote) == []


@pytest.mark.parametrize("remote", ["s3"], indirect=True)
def test_transient_part_failures_are_retried_s3(remote):
    url = remote.url("flaky.bag")
    records = big_records(2 * PART + PART // 2, seed=3)
    remote.proxy.fail_next(2, status=503, kinds=["PUT"])
    with sackli.Writer(url) as writer:
        writer.write_many(records)
    assert remote.proxy.faults_applied["fail"] == 2
    assert sackli.Reader(url).read() == records
    assert uploads_in_progress(remote) == []


# fake-gcs-server finalizes a resumable upload on the status query
# ("Content-Range: bytes */*") that real GCS answers with the bytes it holds
# (see fsouza/fake-gcs-server#1149); GcsUpload asks it before resending a
# chunk, as the protocol prescribes. gcp-storage-emulator answers it as GCS
# does once it holds a chunk (before that it claims byte 0, where GCS sends
# no Range), so the faults here come after the first chunk.
def test_transient_chunk_failures_are_retried_gs(emulated_gcs):
    url = emulated_gcs.url("flaky.bag")
    records = big_records(3 * PART + PART // 2, seed=3)
    first = (PART + PART // 2) // RECORD
    with sackli.Writer(url) as writer:
        writer.write_many(records[:first])
        writer.flush()
        assert emulated_gcs.proxy.counts["PUT"] >= 1  # the first chunk is stored
        emulated_gcs.proxy.fail_next(2, status=503, kinds=["PUT"])
        writer.write_many(records[first:])
    assert emulated_gcs.proxy.faults_applied["fail"] == 2
    assert sackli.Reader(url).read() == records


@PLACEMENTS
@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_empty_bag_is_a_plain_upload_of_an_empty_object(remote, placement, suffix):
    url = remote.url("empty" + suffix)
    with sackli.Writer(url, limits_placement=placement):
        pass
    expected = {"empty" + suffix: 0}
    if placement == SEPARATE:
        expected["limits.empty" + suffix] = 0
    assert remote.objects() == expected
    assert uploads_in_progress(remote) == []
    assert sackli.Reader(url, limits_placement=placement).read() == []


def test_small_bag_is_one_upload_request(remote):
    url = remote.url("small.bagz")
    with sackli.Writer(url) as writer:
        writer.write_many([b"a", b"", b"bc"])
    assert uploads_sent(remote) == 1
    assert sackli.Reader(url).read() == [b"a", b"", b"bc"]


@pytest.mark.timeout(300)  # a deadlock fails instead of hanging the run
def test_threads_sharing_a_streaming_writer_do_not_deadlock(remote):
    # The thread holding the writer's lock takes the GIL to hand bytes to
    # the upload; a thread waiting for that lock must not hold the GIL.
    import threading

    url = remote.url("threads.bag")
    writer = sackli.Writer(url)
    # 20 MiB: parts upload (the GIL released for the network) mid-write.
    per_thread = [[b"%d-%d:" % (t, i) + bytes(2048) for i in range(5000)] for t in range(2)]

    def one_by_one(records):
        for record in records:
            writer.write(record)

    def in_slices(records):
        for first in range(0, len(records), 100):
            writer.write_many(records[first:first + 100])

    threads = [threading.Thread(target=one_by_one, args=(per_thread[0],), daemon=True),
               threading.Thread(target=in_slices, args=(per_thread[1],), daemon=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "deadlocked"
    writer.close()
    read = sackli.Reader(url).read()
    assert sorted(read) == sorted(per_thread[0] + per_thread[1])
    for records in per_thread:  # each thread's records in its order
        assert [r for r in read if r.split(b"-")[0] == records[0].split(b"-")[0]] == records
