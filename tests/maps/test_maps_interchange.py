"""Maps written by sackli.maps are read by the real mapbuffer 1.2.0 and vice
versa, for every compression; uncompressed maps are byte-identical."""

from __future__ import annotations

import random

import mapbuffer
import pytest

import sackli.maps

COMPRESSIONS = (None, "gzip", "br", "zstd", "lzma")


def sample(seed: int = 1, n: int = 500) -> dict[int, bytes]:
    rng = random.Random(seed)
    data = {rng.randrange(1 << 64): rng.randbytes(rng.randrange(1, 300)) for _ in range(n)}
    data[0] = b"zero key"
    data[(1 << 64) - 1] = b"largest key"
    return data


@pytest.mark.parametrize("compute_crc", [True, False])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 1000])
def test_uncompressed_maps_are_byte_identical(n: int, compute_crc: bool) -> None:
    rng = random.Random(n)
    data = {rng.randrange(1 << 40): rng.randbytes(rng.randrange(0, 40)) for _ in range(n)}
    ours = sackli.maps.MapBuffer(data, compute_crc=compute_crc).tobytes()
    theirs = mapbuffer.MapBuffer(data, compute_crc=compute_crc).tobytes()
    assert ours == theirs


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_mapbuffer_reads_our_maps(compress: str | None) -> None:
    data = sample()
    theirs = mapbuffer.MapBuffer(sackli.maps.MapBuffer(data, compress=compress).tobytes())
    assert theirs.compress == compress
    assert theirs.format_version == 1
    assert theirs.validate()
    assert {int(key): bytes(value) for key, value in theirs.items()} == data


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_we_read_mapbuffer_maps(compress: str | None) -> None:
    data = sample(seed=2)
    ours = sackli.maps.MapBuffer(mapbuffer.MapBuffer(data, compress=compress).tobytes())
    assert ours.compress == compress
    assert ours.validate()
    assert ours.todict() == data
    keys = list(data) + [12345, 67890]
    assert ours.get_many(keys, default=b"?") == [data.get(key, b"?") for key in keys]


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_we_read_mapbuffer_format_0(compress: str | None) -> None:
    data = sample(seed=3, n=50)
    ours = sackli.maps.MapBuffer(
        mapbuffer.MapBuffer(data, compress=compress, compute_crc=False).tobytes())
    assert ours.format_version == 0
    assert ours.todict() == data


def test_intmaps_interchange() -> None:
    rng = random.Random(4)
    data = {rng.randrange(1 << 64): rng.randrange(1 << 64) for _ in range(1000)}
    ours = sackli.maps.IntMap(data).tobytes()
    assert ours == mapbuffer.IntMap(data).tobytes()
    assert {int(k): int(v) for k, v in mapbuffer.IntMap(ours).items()} == data
    assert sackli.maps.IntMap(mapbuffer.IntMap(data).tobytes()).todict() == data


def test_import_names_match_mapbuffer() -> None:
    for name in ("MapBuffer", "IntMap", "ValidationError", "HEADER_LENGTH", "FORMAT_VERSION",
                 "MAGIC_NUMBERS"):
        assert hasattr(sackli.maps, name), name
    assert sackli.maps.HEADER_LENGTH == mapbuffer.HEADER_LENGTH
    assert sackli.maps.FORMAT_VERSION == mapbuffer.FORMAT_VERSION
    assert sackli.maps.MAGIC_NUMBERS == mapbuffer.MAGIC_NUMBERS
    assert issubclass(sackli.maps.ValidationError, sackli.CorruptionError)
