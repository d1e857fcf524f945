"""The scenarios of mapbuffer 1.2.0's own test suite, written as our tests and
run against both implementations (the real `mapbuffer` and `sackli.maps`), so
the same calls are seen to behave the same."""

from __future__ import annotations

import random
import types

import mapbuffer
import pytest

import sackli.maps

COMPRESSIONS = (None, "gzip", "br", "zstd", "lzma")


@pytest.fixture(params=["mapbuffer", "sackli.maps"])
def impl(request: pytest.FixtureRequest) -> types.ModuleType:
    """The implementation under test."""
    return mapbuffer if request.param == "mapbuffer" else sackli.maps


def random_data(seed: int, n: int = 2000) -> dict[int, bytes]:
    rng = random.Random(seed)
    return {rng.randint(0, 10**9): bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 50)))
            for _ in range(n)}


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_empty_map(impl: types.ModuleType, compress: str | None) -> None:
    mb = impl.MapBuffer({}, compress=compress)
    assert len(mb) == 0
    assert list(mb) == []
    assert mb.validate()
    assert mb.compress == compress
    with pytest.raises(KeyError):
        mb[1000]
    assert 1000 not in mb
    assert mb.get(1000) is None
    assert mb.get(1000, b"x") == b"x"
    assert len(mb.buffer) == impl.HEADER_LENGTH == 16


@pytest.mark.parametrize("compress", (None, "gzip", "br", "zstd"))
@pytest.mark.parametrize("compute_crc", [True, False])
def test_full_map(impl: types.ModuleType, compress: str | None, compute_crc: bool) -> None:
    data = random_data(seed=len(str(compress)) + compute_crc)
    if compress is not None:  # mapbuffer cannot read an empty compressed value
        data = {key: value or b"\0" for key, value in data.items()}
    mb = impl.MapBuffer(data, compress=compress, compute_crc=compute_crc)
    assert mb.format_version == (1 if compute_crc else 0)
    assert set(data) == set(mb.keys()) == set(mb)
    assert sorted(data.values()) == sorted(bytes(v) for v in mb.values())
    for key, value in data.items():
        assert mb[key] == value
        assert mb.get(key) == value
        assert key in mb
        if compress is None:
            assert mb.size(key) == len(value)
    assert mb.todict() == data
    for key in range(2000):
        if key not in data:
            assert key not in mb
            with pytest.raises(KeyError):
                mb[key]
    assert mb.validate()
    assert len(mb.buffer) > impl.HEADER_LENGTH


@pytest.mark.parametrize("compress", (None, "gzip", "br", "zstd"))
def test_crc32c_detects_a_changed_value(impl: types.ModuleType, compress: str | None) -> None:
    mb = impl.MapBuffer({1: b"hello", 2: b"world"}, compress=compress)
    damaged = bytearray(mb.buffer)
    # compressed: the last byte of the last value, just before its crc32c
    position = damaged.find(b"hello") if compress is None else len(damaged) - 5
    damaged[position] ^= 0x20
    mb.buffer = bytes(damaged)
    with pytest.raises(impl.ValidationError):
        mb[1] if compress is None else (mb[1], mb[2])


@pytest.mark.parametrize("compress", (None, "gzip", "br", "zstd"))
def test_file_object_access(impl: types.ModuleType, compress: str | None, tmp_path) -> None:
    path = tmp_path / "data.mb"
    path.write_bytes(impl.MapBuffer({1: b"hello", 2: b"world"}, compress=compress).tobytes())
    with open(path, "rb") as file:
        mb = impl.MapBuffer(file)
        assert mb[1] == b"hello"
        assert mb[2] == b"world"


@pytest.mark.parametrize("compress", (None, "gzip", "br", "zstd"))
def test_sliceable_object_access(impl: types.ModuleType, compress: str | None) -> None:
    built = impl.MapBuffer({1: b"hello", 2: b"world"}, compress=compress).tobytes()

    class Reader:
        def __getitem__(self, window: slice) -> bytes:
            return built[window]

    mb = impl.MapBuffer(Reader())
    assert mb[1] == b"hello"
    assert mb[2] == b"world"


def test_frombytesfn_and_tobytesfn(impl: types.ModuleType) -> None:
    mb = impl.MapBuffer({1: "abc", 2: "héllo"}, compress="gzip",
                        tobytesfn=lambda text: text.encode("utf8"),
                        frombytesfn=lambda raw: raw.decode("utf8"))
    assert mb[1] == "abc"
    assert mb.get(2) == "héllo"


def test_full_intmap(impl: types.ModuleType) -> None:
    rng = random.Random(5)
    data = {rng.randint(0, 10**9): rng.randint(0, 10**9) for _ in range(5000)}
    im = impl.IntMap(data)
    assert set(data) == set(im.keys()) == set(im)
    assert set(data.values()) == set(im.values())
    for key, value in data.items():
        assert im[key] == value
        assert im.get(key) == value
        assert key in im
    assert im.todict() == data
    for key in range(2000):
        if key not in data:
            assert key not in im
            with pytest.raises(KeyError):
                im[key]
    assert im.validate()


def test_intmap_file_and_object_access(impl: types.ModuleType, tmp_path) -> None:
    built = impl.IntMap({1: 3, 2: 4}).tobytes()
    path = tmp_path / "data.im"
    path.write_bytes(built)
    with open(path, "rb") as file:
        im = impl.IntMap(file)
        assert (im[1], im[2]) == (3, 4)

    class Reader:
        def __getitem__(self, window: slice) -> bytes:
            return built[window]

    im = impl.IntMap(Reader())
    assert (im[1], im[2]) == (3, 4)


def test_intmap_set_on_writable_buffer(impl: types.ModuleType) -> None:
    im = impl.IntMap({1: 5, 2: 7})
    im.buffer = bytearray(im.buffer)
    assert im[1] == 5
    im[1] = 8
    assert im[1] == 8
    assert im[2] == 7
    with pytest.raises(KeyError):
        im[9] = b"123"


def test_intmap_set_on_read_only_buffer_fails(impl: types.ModuleType) -> None:
    im = impl.IntMap({1: 5})
    with pytest.raises(ValueError):
        im[1] = 6
    assert im[1] == 5


def test_missing_key_in_get_with_default(impl: types.ModuleType) -> None:
    mb = impl.MapBuffer({7: b"seven"})
    assert mb.get(8, b"default") == b"default"
    assert mb.get(8, default=b"kw") == b"kw"
    assert mb.get(7, b"default") == b"seven"


def test_negative_and_oversized_keys_are_rejected_when_building(impl: types.ModuleType) -> None:
    with pytest.raises(OverflowError):
        impl.MapBuffer({-1: b"x"})
    with pytest.raises(OverflowError):
        impl.IntMap({1 << 64: 1})


def test_index_cache_is_written_once(impl: types.ModuleType, tmp_path) -> None:
    cache = tmp_path / "cache.mbi"
    mb = impl.MapBuffer({1: b"hello", 2: b"world"}, index_cache=str(cache))
    index = mb.index()
    assert cache.read_bytes() == bytes(mb.buffer[:impl.HEADER_LENGTH + index.nbytes])
    first = cache.stat().st_mtime_ns
    again = impl.MapBuffer({1: b"hello", 2: b"world"}, index_cache=str(cache))
    again.index()
    assert again[1] == b"hello"
    assert cache.stat().st_mtime_ns == first


def test_index_cache_serves_sliceable_objects(impl: types.ModuleType, tmp_path) -> None:
    built = impl.MapBuffer({1: b"hello", 2: b"world"}).tobytes()
    slices: list[slice] = []

    class Reader:
        def __getitem__(self, window: slice) -> bytes:
            slices.append(window)
            return built[window]

    cache = str(tmp_path / "cache.mbi")
    assert impl.MapBuffer(Reader(), index_cache=cache)[2] == b"world"
    slices.clear()
    assert impl.MapBuffer(Reader(), index_cache=cache)[1] == b"hello"
    # Only the value was fetched: the header and index came from the cache.
    assert all(window.start is not None and window.start >= impl.HEADER_LENGTH + 32
               for window in slices), slices


def test_crc_error_despite_index_cache(impl: types.ModuleType, tmp_path) -> None:
    mb = impl.MapBuffer({1: b"hello", 2: b"world"}, index_cache=str(tmp_path / "c.mbi"))
    mb.index()
    damaged = bytearray(mb.buffer)
    damaged[damaged.find(b"hello")] = ord("H")
    mb.buffer = bytes(damaged)
    mb._index = None
    with pytest.raises(impl.ValidationError):
        mb[1]
