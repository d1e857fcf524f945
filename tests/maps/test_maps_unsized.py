"""Maps read from an object that only answers ``obj[a:b]`` and has no
``__len__`` (how mapbuffer users wrap remote files): `size()` of every key,
the last one included, works without the map's length; `datasize()` cannot
and says so, naming the map (issue 30, item 6)."""

from __future__ import annotations

import pytest

from sackli.maps import MapBuffer

mapbuffer = pytest.importorskip("mapbuffer")


class Slices:
    """Bytes answered by slices only."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __getitem__(self, window: slice) -> bytes:
        return self._data[window]


DATA = {3: b"a", 9: b"", 12: b"twelve", 40: b"x" * 1000}


@pytest.mark.parametrize("compress", [None, "gzip", "zstd"])
@pytest.mark.parametrize("compute_crc", [True, False])
def test_size_of_every_key_without_a_length(compress, compute_crc):
    data = bytes(MapBuffer(DATA, compress=compress, compute_crc=compute_crc).tobytes())
    theirs = mapbuffer.MapBuffer(data)
    ours = MapBuffer(Slices(data))
    assert {key: ours.size(key) for key in DATA} == {key: int(theirs.size(key)) for key in DATA}


def test_size_without_a_length_with_an_index_cache(tmp_path):
    data = bytes(MapBuffer(DATA).tobytes())
    cache = str(tmp_path / "index")
    for _ in range(2):  # the second time from the cache
        ours = MapBuffer(Slices(data), index_cache=cache)
        assert {key: ours.size(key) for key in DATA} == {3: 1, 9: 0, 12: 6, 40: 1000}


def test_datasize_without_a_length_names_the_map():
    data = bytes(MapBuffer(DATA).tobytes())
    with pytest.raises(TypeError, match=r"<Slices>.*datasize\(\).*__len__"):
        MapBuffer(Slices(data)).datasize()


def test_datasize_with_a_length_is_mapbuffers():
    class Sized(Slices):
        def __len__(self) -> int:
            return len(self._data)

    data = bytes(MapBuffer(DATA).tobytes())
    assert MapBuffer(Sized(data)).datasize() == mapbuffer.MapBuffer(data).datasize()
