"""Remote maps with the local cache of remote reads (SACKLI_CACHE_DIR), on
moto's S3 and fake-gcs-server behind the counting proxy: a second pass
fetches no bytes."""

from __future__ import annotations

import random

import sackli.maps
from remote_helpers import remote, servers  # noqa: F401  (fixtures, loaded through conftest.py)


def test_a_second_pass_over_remote_maps_fetches_no_bytes(remote, tmp_path,  # noqa: F811
                                                          monkeypatch) -> None:
    rng = random.Random(0)
    data = {rng.randrange(1 << 64): rng.randbytes(rng.randrange(1, 200)) for _ in range(3000)}
    ints = {key: rng.randrange(1 << 64) for key in data}
    remote.put("m.mb", sackli.maps.MapBuffer(data).tobytes())
    remote.put("i.im", sackli.maps.IntMap(ints).tobytes())
    monkeypatch.setenv("SACKLI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SACKLI_CACHE_MAX_BYTES", "16M")
    keys = list(data)
    rng.shuffle(keys)
    for _ in range(2):
        remote.proxy.reset_counts()
        mb = sackli.maps.MapBuffer(remote.url("m.mb"))
        im = sackli.maps.IntMap(remote.url("i.im"))
        assert mb.get_many(keys) == [data[key] for key in keys]
        assert [mb[key] for key in keys[:50]] == [data[key] for key in keys[:50]]
        assert [im[key] for key in keys[:50]] == [ints[key] for key in keys[:50]]
        assert mb.todict() == data and im.todict() == ints
    # The second pass: the size and identity of each map, no bytes.
    assert dict(remote.proxy.counts) == {"HEAD": 2}
    assert remote.proxy.bytes_sent["GET"] == 0
