"""Open hints on buckets (sackli/_open_hints.py), against moto's S3 server
and fake-gcs-server behind the fault proxy: `name@N.ext` whose shards are
missing names the counts the bucket holds (one listing, made only once the
open failed), and a dataset's prefix names its reader. A successful open
makes the requests it always made, no listing."""

from __future__ import annotations

import errno

import pytest

import sackli
from sackli import datasets
from remote_helpers import make_records, remote, servers, write_bag  # noqa: F401


def _write_set(url: str, records: list[bytes]) -> None:
    with sackli.ShardedWriter(url) as writer:
        writer.write_many(records)


def test_a_missing_shard_count_names_the_counts_in_the_bucket(remote) -> None:
    _write_set(remote.url("imgs@4.bagz"), make_records(12, seed=1))
    remote.proxy.reset_counts()
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url("imgs@8.bagz"))
    error = caught.value
    assert error.errno == errno.ENOENT
    assert error.filename == remote.url("imgs-00000-of-00008.bagz")
    assert error.strerror.endswith(
        f"{remote.url('imgs@8.bagz')} has no shard 0 of 8, but shard sets of other counts "
        f"exist: {remote.url('imgs@4.bagz')}"), error.strerror
    # The hint's one listing, after the open's own requests failed.
    assert remote.proxy.counts["LIST"] == 1, remote.proxy.log


def test_an_incomplete_other_set_in_the_bucket_says_so(remote) -> None:
    for i in range(2):  # two of three shards: a set copied in part
        write_bag(remote.url(f"part-{i:05d}-of-00003.bag"), [b"%d" % i])
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url("part@5.bag"))
    assert str(caught.value).count(f"{remote.url('part@3.bag')} (2 of 3 shards)") == 1


def test_a_missing_object_without_other_sets_keeps_its_message(remote) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url("nothing@3.bag"))
    assert "other counts" not in str(caught.value)
    assert caught.value.filename == remote.url("nothing-00000-of-00003.bag")


def test_a_successful_open_lists_nothing(remote) -> None:
    records = make_records(8, seed=2)
    _write_set(remote.url("imgs@4.bagz"), records)
    write_bag(remote.url("imgs-00000-of-00002.bagz"), [b"another count"])
    remote.proxy.reset_counts()
    reader = sackli.Reader(remote.url("imgs@4.bagz"))
    # Each shard's tail and the set's manifest (tests/storage/test_remote_open.py):
    # no listing, no metadata request.
    assert dict(remote.proxy.counts) == {"GET": 4 + 1}, remote.proxy.log
    assert reader.read() == records


def test_a_dataset_prefix_names_its_reader(remote) -> None:
    with datasets.ShardedDatasetWriter(remote.url("ds"), {"label": "int(8)"},
                                       shard_length=2) as writer:
        for i in range(3):
            writer.append({"label": i})
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url("ds"))
    assert caught.value.strerror == (
        f"{remote.url('ds')}: not a bag: it is a sackli.datasets folder (a sharded dataset): "
        f"open it with sackli.datasets.ShardedDatasetReader({remote.url('ds')!r}); from a "
        f"shell: read it with sackli info {remote.url('ds')} (or cat, head, count, verify)")
    with datasets.ShardedDatasetReader(remote.url("ds")) as reader:
        assert [point["label"] for point in reader] == [0, 1, 2]
