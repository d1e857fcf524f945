"""sackli.maps' cap on a decoded value (issue 49 §3): MapBuffer(...,
max_value_bytes=N) refuses a value that decodes to more than N bytes with
sackli.RecordTooLargeError naming the map and key, for every compression:
zstd and none before anything is allocated, gzip, br and lzma once decoding
passes the cap (it stops there)."""

from __future__ import annotations

import importlib.util

import pytest

import sackli
from sackli.maps import MapBuffer

from bombs import unsized_bomb

MiB = 1 << 20
BIG = bytes(2 * MiB)  # compresses to a few KB in every codec

COMPRESSIONS = [None, "gzip", "zstd", "lzma",
                pytest.param("br", marks=pytest.mark.skipif(
                    importlib.util.find_spec("brotli") is None, reason="brotli not installed"))]


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_a_value_over_the_cap_raises_naming_map_and_key(tmp_path, compress):
    path = tmp_path / "m.mb"
    path.write_bytes(MapBuffer({1: b"small", 7: BIG}, compress=compress).tobytes())
    capped = MapBuffer(str(path), max_value_bytes=MiB)
    assert capped[1] == b"small"
    pattern = rf"{path}: value of key 7 .*decodes to .*bytes.*max_value_bytes=1048576"
    for read in (lambda: capped[7], lambda: capped.get(7), lambda: [capped.getindex(i) for i in range(2)],
                 lambda: capped.todict(), lambda: list(capped.values())):
        with pytest.raises(sackli.RecordTooLargeError, match=pattern):
            read()
    assert MapBuffer(str(path), max_value_bytes=len(BIG))[7] == BIG
    assert MapBuffer(str(path), max_value_bytes=None)[7] == BIG


@pytest.mark.parametrize("compress", ["gzip", "zstd", "lzma"])
def test_a_map_in_memory_is_capped_too(compress):
    data = MapBuffer({7: BIG}, compress=compress).tobytes()
    with pytest.raises(sackli.RecordTooLargeError, match="value of key 7"):
        MapBuffer(data, max_value_bytes=MiB)[7]


def test_an_unsized_zstd_value_stops_at_the_cap():
    # A map of raw values whose header then says zstd: the value is stored
    # as given (its crc32c covers the stored bytes).
    data = bytearray(MapBuffer({7: unsized_bomb(64 * MiB)}).tobytes())
    assert data[8:12] == b"none"
    data[8:12] = b"zstd"
    data = bytes(data)
    with pytest.raises(sackli.RecordTooLargeError, match="decodes to more than 1048576 bytes"):
        MapBuffer(data, max_value_bytes=MiB)[7]
    assert MapBuffer(data, max_value_bytes=64 * MiB)[7] == bytes(64 * MiB)


def test_the_default_cap_and_its_checks():
    data = MapBuffer({7: b"v"}).tobytes()
    assert MapBuffer(data)[7] == b"v"
    with pytest.raises(ValueError, match="max_value_bytes"):
        MapBuffer(data, max_value_bytes=-1)
    with pytest.raises(TypeError, match="max_value_bytes"):
        MapBuffer(data, max_value_bytes="1")
