"""Maps on gs:// and s3:// (fake-gcs / moto servers behind the counting
proxy of remote_helpers): reading with few requests, and writing."""

from __future__ import annotations

import random

import mapbuffer
import pytest

import sackli.maps
from remote_helpers import remote, servers  # noqa: F401  (fixtures, loaded through conftest.py)


def sample(n: int, seed: int = 0) -> dict[int, bytes]:
    rng = random.Random(seed)
    return {rng.randrange(1 << 64): rng.randbytes(rng.randrange(1, 100)) for _ in range(n)}


@pytest.mark.parametrize("compress", [None, "zstd", "gzip"])
def test_remote_map_reads_mapbuffer_files(remote, compress) -> None:  # noqa: F811
    data = sample(300)
    remote.put("m.mb", mapbuffer.MapBuffer(data, compress=compress).tobytes())
    sackli.maps.MapBuffer(remote.url("m.mb"))  # the client's first use may look up the bucket
    remote.proxy.reset_counts()
    mb = sackli.maps.MapBuffer(remote.url("m.mb"))
    # The size (HEAD), then header and index in one GET.
    assert dict(remote.proxy.counts) == {"HEAD": 1, "GET": 1}, remote.proxy.log
    key = next(iter(data))
    assert mb[key] == data[key]
    assert mb.todict() == data
    assert mb.validate()


def test_batched_remote_lookups_cost_few_requests(remote) -> None:  # noqa: F811
    data = sample(100_000, seed=1)
    remote.put("big.mb", sackli.maps.MapBuffer(data).tobytes())
    mb = sackli.maps.MapBuffer(remote.url("big.mb"))
    keys = random.Random(2).sample(list(data), 1000) + [5, 6]
    remote.proxy.reset_counts()
    assert mb.get_many(keys, default=b"?") == [data.get(key, b"?") for key in keys]
    assert set(remote.proxy.counts) == {"GET"}
    assert remote.proxy.counts["GET"] <= 10, remote.proxy.counts


def test_remote_scan_costs_few_requests(remote) -> None:  # noqa: F811
    data = sample(2000, seed=4)
    remote.put("scan.mb", mapbuffer.MapBuffer(data, compress="zstd").tobytes())
    mb = sackli.maps.MapBuffer(remote.url("scan.mb"))
    remote.proxy.reset_counts()
    assert mb.todict() == data
    # The index was fetched on open; the values come in coalesced GETs.
    assert set(remote.proxy.counts) == {"GET"}
    assert remote.proxy.counts["GET"] <= 3, remote.proxy.counts


def test_missing_remote_map(remote) -> None:  # noqa: F811
    with pytest.raises(FileNotFoundError):
        sackli.maps.MapBuffer(remote.url("absent.mb"))


@pytest.mark.parametrize("compress", [None, "zstd"])
def test_write_to_a_remote_map(remote, compress) -> None:  # noqa: F811
    data = sample(200, seed=3)
    url = remote.url("w.mb")
    assert sackli.maps.write(url, data.items(), compress=compress) == len(data)
    stored = remote.get("w.mb")
    assert mapbuffer.MapBuffer(stored).todict() == data
    if compress is None:
        assert stored == mapbuffer.MapBuffer(data).tobytes()
