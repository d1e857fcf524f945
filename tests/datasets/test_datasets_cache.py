"""sackli.datasets readers with a local cache of remote reads (`cache_dir`,
or SACKLI_CACHE_DIR), on moto's S3 and fake-gcs-server behind the counting
proxy: a second pass fetches no record bytes."""

from __future__ import annotations

import pickle

import pytest

from sackli import datasets
from remote_helpers import remote, servers  # noqa: F401 (fixtures, loaded through conftest.py)

SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}
POINTS = [{"image": bytes([i]) * (50 + i), "label": i, "words": [f"w{j}" for j in range(i % 4)]}
          for i in range(40)]


@pytest.fixture(autouse=True)
def no_cache_from_the_environment(monkeypatch):
    monkeypatch.delenv("SACKLI_CACHE_DIR", raising=False)
    monkeypatch.delenv("SACKLI_CACHE_MAX_BYTES", raising=False)


def _write(url: str) -> None:
    with datasets.ShardedDatasetWriter(url, SPEC, shard_length=15) as writer:
        for point in POINTS:
            writer.append(point)


def _spec_bytes(remote) -> int:  # noqa: F811
    return sum(size for name, size in remote.objects().items() if name.endswith("spec.json"))


@pytest.mark.parametrize("cache_index", [True, False])
def test_a_second_pass_over_a_remote_dataset_fetches_no_records(remote, tmp_path,  # noqa: F811
                                                                cache_index):
    _write(remote.url("ds"))
    cache = {"cache_dir": tmp_path / "cache", "cache_max_bytes": 1 << 24}
    reader = datasets.ShardedDatasetReader(remote.url("ds"), cache_index=cache_index, **cache)
    assert reader.read_indices(range(40)) == POINTS
    remote.proxy.reset_counts()
    assert list(reader) == POINTS
    assert reader[3, {"words": range(1, 3)}] == {"words": ["w1", "w2"]}
    assert dict(remote.proxy.counts) == {}
    # A new reader: the listing, each shard's spec.json and a HEAD per bag.
    again = datasets.ShardedDatasetReader(remote.url("ds"), cache_index=cache_index, **cache)
    assert list(again) == POINTS
    assert remote.proxy.bytes_sent["GET"] == _spec_bytes(remote)
    # Three shards of refs and three fields, each opened (a HEAD); none is
    # asked for a CRC-32C sidecar: its metadata says it has none
    # (docs/format.md, section 12).
    assert remote.proxy.counts["HEAD"] == 3 * 4
    # A pickled copy (a DataLoader worker's) keeps the cache.
    remote.proxy.reset_counts()
    copy = pickle.loads(pickle.dumps(again))
    assert copy.read_indices(range(39, -1, -1)) == POINTS[::-1]
    assert remote.proxy.bytes_sent["GET"] == 0


def test_the_environment_caches_dataset_and_bag_reads(remote, tmp_path, monkeypatch):  # noqa: F811
    _write(remote.url("env"))
    monkeypatch.setenv("SACKLI_CACHE_DIR", str(tmp_path / "env-cache"))
    assert list(datasets.DatasetReader(remote.url("env/000001"))) == POINTS[15:30]
    remote.proxy.reset_counts()
    assert list(datasets.DatasetReader(remote.url("env/000001"))) == POINTS[15:30]
    assert remote.proxy.bytes_sent["GET"] == remote.objects()["env/000001/spec.json"]
    monkeypatch.delenv("SACKLI_CACHE_DIR")
    bag = remote.url("env/000000/image.bag")
    images = [point["image"] for point in POINTS[:15]]
    assert datasets.BagReader(bag, cache_dir=tmp_path / "bag-cache")[0:15] == images
    remote.proxy.reset_counts()
    assert datasets.BagReader(bag, cache_dir=tmp_path / "bag-cache")[0:15] == images
    assert remote.proxy.bytes_sent["GET"] == 0
