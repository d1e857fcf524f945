"""Buckets that train fast without being told (docs/cache.md, "Loaders cache
by default" and "When sackli warns"): `EpochStream` reads a remote
`sackli.Reader` with no cache through the user's own cache folder, and a
plain `Reader` read out of order with no cache says so once.

On moto and fake-gcs-server behind the counting proxy: the first shuffled
epoch makes at most the bag's size / block size x 1.2 requests, later
epochs none.
"""

from __future__ import annotations

import os
import pickle
import random
import stat
import warnings

import pytest

import sackli
from sackli._storage._read_cache import BLOCK_BYTES
from remote_helpers import make_records, remote, servers, write_bag  # noqa: F401

RECORDS = 2000


@pytest.fixture
def user_cache(tmp_path, monkeypatch):
    """The platform's per-user cache folder, in this test's own folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SACKLI_CACHE_DIR", raising=False)
    monkeypatch.delenv("SACKLI_LOADER_CACHE", raising=False)
    return tmp_path / "xdg" / "sackli"


def _bag(remote, name="train.bag"):
    records = make_records(RECORDS, seed=5, max_size=2000)
    write_bag(remote.url(name), records)
    return remote.url(name), records


def _uncached_warnings(caught) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, sackli.UncachedReadWarning)]


def test_a_stream_of_a_remote_bag_caches_in_the_users_folder(remote, user_cache):
    url, records = _bag(remote)
    reader = sackli.Reader(url)
    stream = sackli.EpochStream(reader, seed=3)
    assert stream.source is not reader
    assert stream.source.options.cache_dir == str(user_cache)
    size = sum(remote.objects().values())
    remote.proxy.reset_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = list(stream)
    assert sorted(first) == sorted(records)
    assert first != records  # shuffled
    assert remote.proxy.counts["GET"] <= size / BLOCK_BYTES * 1.2, remote.proxy.log
    assert not _uncached_warnings(caught)
    # Later epochs come from local disk: no request at all.
    remote.proxy.reset_counts()
    stream.set_epoch(1)
    second = list(stream)
    assert sorted(second) == sorted(records) and second != first
    assert sum(remote.proxy.counts.values()) == 0, remote.proxy.log
    # The user's own: 0700, and a copy in a worker (pickled) reads through it.
    assert stat.S_IMODE(os.stat(user_cache).st_mode) == 0o700
    assert pickle.loads(pickle.dumps(stream.source)).options.cache_dir == str(user_cache)


def test_sackli_loader_cache_0_turns_the_default_off_and_then_it_warns(remote, user_cache,
                                                                        monkeypatch):
    url, records = _bag(remote)
    monkeypatch.setenv("SACKLI_LOADER_CACHE", "0")
    reader = sackli.Reader(url)
    stream = sackli.EpochStream(reader, seed=3)
    assert stream.source is reader
    remote.proxy.reset_counts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert sorted(stream) == sorted(records)
        stream.set_epoch(1)
        assert sorted(stream) == sorted(records)
    assert remote.proxy.counts["GET"] > 10 * sum(remote.objects().values()) / BLOCK_BYTES
    found = _uncached_warnings(caught)
    assert len(found) == 1, [str(w.message) for w in found]
    message = str(found[0].message)
    assert url in message and "cache_dir" in message and "SACKLI_CACHE_DIR" in message
    assert not os.path.exists(user_cache)


def test_a_plain_reader_read_out_of_order_warns_once(remote, user_cache):
    """One batch of the whole bag coalesces into a few requests (no
    warning needed); a shuffled epoch in small batches is a request per
    record."""
    url, records = _bag(remote)
    reader = sackli.Reader(url)
    order = list(range(RECORDS))
    random.Random(1).shuffle(order)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(reader) == records  # a scan: its ranges follow each other
        assert not _uncached_warnings(caught)
        for _ in range(2):  # two epochs in batches of 32, as a training loop reads
            for start in range(0, RECORDS, 32):
                batch = order[start:start + 32]
                assert reader.read_indices(batch) == [records[i] for i in batch]
    assert len(_uncached_warnings(caught)) == 1


def test_singles_read_at_random_warn_too(remote, user_cache):
    """Grain and map-style PyTorch datasets read `reader[i]` one by one."""
    url, records = _bag(remote)
    reader = sackli.Reader(url)
    order = random.Random(2).sample(range(RECORDS), 1200)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [reader[i] for i in order] == [records[i] for i in order]
    assert len(_uncached_warnings(caught)) == 1


def test_a_reader_with_a_cache_never_warns(remote, user_cache, tmp_path):
    url, records = _bag(remote)
    reader = sackli.Reader(url, cache_dir=str(tmp_path / "mine"))
    order = random.Random(1).sample(range(RECORDS), RECORDS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert reader.read_indices(order) == [records[i] for i in order]
    assert not _uncached_warnings(caught)
    # The stream keeps the reader's own cache.
    assert sackli.EpochStream(reader).source is reader


def test_a_cache_named_by_the_environment_is_kept(remote, user_cache, tmp_path, monkeypatch):
    url, _ = _bag(remote)
    monkeypatch.setenv("SACKLI_CACHE_DIR", str(tmp_path / "env"))
    reader = sackli.Reader(url)
    assert sackli.EpochStream(reader).source is reader


def test_a_view_keeps_its_records_when_reopened(remote, user_cache):
    url, records = _bag(remote)
    view = sackli.Reader(url)[100:1100:2]
    stream = sackli.EpochStream(view, shuffle=False)
    assert stream.source.options.cache_dir == str(user_cache)
    assert list(stream) == records[100:1100:2]


def test_local_bags_and_other_sources_are_left_as_they_are(tmp_path, user_cache):
    path = str(tmp_path / "local.bag")
    write_bag(path, [b"a", b"b"])
    reader = sackli.Reader(path)
    assert sackli.EpochStream(reader).source is reader
    rows = ["x", "y"]

    class Source(list):
        def read_indices_iter(self, indices):
            return (self[i] for i in indices)

    source = Source(rows)
    assert sackli.EpochStream(source).source is source
    assert not os.path.exists(user_cache)


def test_an_unknown_switch_value_is_refused(tmp_path, user_cache, monkeypatch, remote):
    url, _ = _bag(remote)
    monkeypatch.setenv("SACKLI_LOADER_CACHE", "maybe")
    with pytest.raises(ValueError, match="SACKLI_LOADER_CACHE must be 1 or 0"):
        sackli.EpochStream(sackli.Reader(url))


@pytest.mark.parametrize("sharded", [True, False])
def test_a_stream_of_a_remote_dataset_caches_in_the_users_folder(remote, user_cache, sharded):
    from sackli import datasets

    spec = {"image": "bytes", "label": "int(8)"}
    points = [{"image": bytes([i % 256]) * (300 + i), "label": i} for i in range(60)]
    with datasets.ShardedDatasetWriter(remote.url("ds"), spec, shard_length=20) as writer:
        for point in points:
            writer.append(point)
    reader = (datasets.ShardedDatasetReader(remote.url("ds")) if sharded
              else datasets.DatasetReader(remote.url("ds/000001")))
    expected = points if sharded else points[20:40]
    stream = sackli.EpochStream(reader, seed=4)
    assert stream.source is not reader and type(stream.source) is type(reader)
    first = list(stream)
    assert sorted(first, key=lambda point: point["label"]) == expected
    assert any(user_cache.iterdir())  # the blocks went to the user's cache
    remote.proxy.reset_counts()
    stream.set_epoch(1)
    second = list(stream)
    assert sorted(second, key=lambda point: point["label"]) == expected and second != first
    assert sum(remote.proxy.counts.values()) == 0, remote.proxy.log
    # Given a cache of its own, or read from local disk: kept as it is.
    own = datasets.DatasetReader(remote.url("ds/000000"), cache_dir=str(user_cache.parent / "own"))
    assert sackli.EpochStream(own, seed=4).source is own
