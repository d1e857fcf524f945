"""sackli.datasets on `s3://` and `gs://` prefixes, against the moto S3
server and fake-gcs-server (tests/remote_servers.py), through the proxies
that count requests; nothing mocked."""

from __future__ import annotations

import pathlib

import bags
import pytest

from sackli import datasets
from remote_helpers import remote, servers  # noqa: F401 (fixtures, loaded through conftest.py)

SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"image": bytes([i % 256]) * (100 + i), "label": i, "words": [f"w{j}" for j in range(i % 6)]}


def _write(directory, count: int, **options) -> None:
    with datasets.ShardedDatasetWriter(directory, SPEC, **options) as writer:
        for i in range(count):
            writer.append(_point(i))


def test_write_and_read_a_remote_dataset(remote, tmp_path):
    _write(remote.url("ds"), 25, shard_length=10)
    names = {"spec.json", "refs.bag", "image.bag", "label.bag", "words.bag"}
    assert set(remote.objects()) == {f"ds/{s}/{n}" for s in ("000000", "000001", "000002")
                                     for n in names}
    with datasets.ShardedDatasetReader(remote.url("ds")) as reader:
        assert reader.shards == 3
        assert list(reader) == [_point(i) for i in range(25)]
        assert reader[-2, {"words": range(1, 3)}] == {"words": ["w1", "w2"]}
    # The objects are the bytes bags writes locally for the same datapoints.
    with bags.ShardedDatasetWriter(tmp_path / "ds", SPEC, bags.encoders,
                                   shard_length=10) as writer:
        for i in range(25):
            writer.append(_point(i))
    for name in remote.objects():
        assert remote.get(name) == (tmp_path / name).read_bytes(), name


def test_bags_dataset_uploaded_reads_remotely(remote, tmp_path):
    with bags.DatasetWriter(tmp_path / "shard", SPEC, bags.encoders) as writer:
        for i in range(7):
            writer.append(_point(i))
    for path in (tmp_path / "shard").iterdir():
        remote.put(f"one/{path.name}", path.read_bytes())
    reader = datasets.DatasetReader(remote.url("one"))
    assert reader.read_indices([6, 0, 3]) == [_point(6), _point(0), _point(3)]
    assert reader.size == sum(p.stat().st_size for p in (tmp_path / "shard").iterdir()
                              if p.suffix == ".bag")


def test_batch_read_costs_a_few_requests_per_field(remote):
    _write(remote.url("ds"), 200)
    reader = datasets.ShardedDatasetReader(remote.url("ds"))
    remote.proxy.reset_counts()
    points = reader.read_indices(range(50, 150), {"label": True, "words": True})
    assert points == [{"label": i, "words": _point(i)["words"]} for i in range(50, 150)]
    # refs, label and words: each read by one coalesced ranged GET (their
    # limits were fetched at open), not one request per value; image is not
    # touched.
    assert remote.proxy.counts["GET"] == 3


def test_failed_remote_write_leaves_no_shard(remote):
    with pytest.raises(RuntimeError, match="job failed"):
        with datasets.ShardedDatasetWriter(remote.url("ds"), SPEC, shard_length=3) as writer:
            for i in range(4):
                writer.append(_point(i))
            raise RuntimeError("job failed")
    # Shard 000000 was complete; 000001 never got its objects.
    assert {name.split("/")[1] for name in remote.objects()} == {"000000"}
    assert list(datasets.ShardedDatasetReader(remote.url("ds"))) == [_point(i) for i in range(3)]


def test_shard_without_spec_is_not_a_shard(remote):
    _write(remote.url("ds"), 3)
    remote.put("ds/000001/refs.bag", b"\0" * 8)  # an unfinished write: no spec.json
    assert len(datasets.ShardedDatasetReader(remote.url("ds"))) == 3


def test_remote_errors(remote):
    with pytest.raises(FileNotFoundError, match="nothing"):
        datasets.ShardedDatasetReader(remote.url("nothing"))
    with pytest.raises(FileNotFoundError, match="spec.json"):
        datasets.DatasetReader(remote.url("nothing"))
    _write(remote.url("ds"), 2)
    with pytest.raises(FileExistsError, match="000000"):
        datasets.DatasetWriter(remote.url("ds/000000"), SPEC)
    remote.delete("ds/000000/words.bag")
    with pytest.raises(FileNotFoundError, match="words.bag"):
        datasets.ShardedDatasetReader(remote.url("ds"))


def test_pathlib_spelling_of_a_remote_folder(remote):
    _write(pathlib.Path("/" + remote.url("ds")), 4)
    reader = datasets.ShardedDatasetReader(pathlib.Path("/" + remote.url("ds")))
    assert reader.read_indices([3, 1]) == [_point(3), _point(1)]


def test_a_remote_dataset_opens_its_shards_concurrently(remote):
    # Each remote open is a few round trips; a dataset of many shards opens
    # them overlapped (the proxy holds each request 20 ms), with the request
    # count of opening one after another.
    _write(remote.url("ds"), 60, shard_length=10)
    remote.proxy.reset_counts()
    remote.proxy.latency = 0.02
    with datasets.ShardedDatasetReader(remote.url("ds")) as reader:
        assert remote.proxy.counts["LIST"] == 1
        assert remote.proxy.max_in_flight >= 4, remote.proxy.max_in_flight
        opened = sum(remote.proxy.counts.values())
        assert reader.shards == 6
        remote.proxy.latency = 0
        assert reader.read_indices([59, 0, 31]) == [_point(59), _point(0), _point(31)]
    remote.proxy.reset_counts()
    with datasets.ShardedDatasetReader(remote.url("ds"), shard_step=6):
        # One shard of six: a sixth of the requests, bar the listing.
        assert sum(remote.proxy.counts.values()) - 1 == (opened - 1) / 6
    # A single shard opens its files (refs.bag and one per field) overlapped.
    remote.proxy.reset_counts()
    remote.proxy.latency = 0.02
    datasets.DatasetReader(remote.url("ds/000003")).close()
    assert remote.proxy.max_in_flight >= 2, remote.proxy.max_in_flight


def test_a_concurrent_open_raises_the_first_shards_error(remote):
    _write(remote.url("ds"), 40, shard_length=10)
    remote.delete("ds/000001/words.bag")
    remote.delete("ds/000003/label.bag")
    for _ in range(3):  # whichever finishes first, shard 000001's error is the one
        with pytest.raises(FileNotFoundError, match="000001/words.bag"):
            datasets.ShardedDatasetReader(remote.url("ds"))
    remote.delete("ds/000002/refs.bag")
    with pytest.raises(FileNotFoundError, match="000002/refs.bag"):
        datasets.DatasetReader(remote.url("ds/000002"))


def test_a_remote_shard_closes_its_files_concurrently(remote):
    # Each close finishes an upload: refs.bag and the field files overlap
    # theirs (the proxy holds each request 20 ms).
    remote.proxy.latency = 0.02
    with datasets.DatasetWriter(remote.url("one"), SPEC) as writer:
        for i in range(5):
            writer.append(_point(i))
        remote.proxy.reset_counts()
    assert remote.proxy.max_in_flight >= 2, remote.proxy.max_in_flight
    remote.proxy.latency = 0
    assert list(datasets.DatasetReader(remote.url("one"))) == [_point(i) for i in range(5)]


def test_a_failed_upload_at_close_leaves_no_shard(remote, monkeypatch):
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "2")
    writer = datasets.DatasetWriter(remote.url("one"), SPEC)
    for i in range(5):
        writer.append(_point(i))
    remote.proxy.fail_fraction(1.0, kinds=["PUT", "POST"])
    with pytest.raises(OSError):
        writer.close()
    remote.proxy.reset_faults()
    assert not any(name.endswith("spec.json") for name in remote.objects())
    with pytest.raises(FileNotFoundError, match="spec.json"):
        datasets.DatasetReader(remote.url("one"))
