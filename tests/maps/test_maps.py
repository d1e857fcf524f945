"""sackli.maps beyond mapbuffer: batched lookups, paths and buffers of every
kind, keys at the edges of uint64, in-place overwrites."""

from __future__ import annotations

import array
import io
import mmap
import pathlib
import random
import sys
import threading
import time

import pytest

import sackli
from sackli.maps import IntMap, MapBuffer, ValidationError

COMPRESSIONS = (None, "gzip", "br", "zstd", "lzma")


def sample(n: int = 3000, seed: int = 0) -> dict[int, bytes]:
    rng = random.Random(seed)
    return {rng.randrange(1 << 64): rng.randbytes(rng.randrange(0, 200)) for _ in range(n)}


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_get_many_returns_values_in_order(compress: str | None) -> None:
    data = {key: value or b"-" for key, value in sample().items()}
    mb = MapBuffer(MapBuffer(data, compress=compress).tobytes())
    keys = list(data)
    random.Random(1).shuffle(keys)
    wanted = keys[:2000] + [1, 2, 3] + keys[:5]  # absent keys and repeats
    assert mb.get_many(wanted) == [data.get(key) for key in wanted]
    assert mb.get_many(iter(wanted), default=b"?") == [data.get(key, b"?") for key in wanted]
    assert mb.get_many([]) == []


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 255, 256, 257, 5000])
def test_lookups_agree_at_every_tree_shape(n: int) -> None:
    # Sizes at full tree levels and at the engine's search-group and task
    # boundaries; every key, its neighbours and keys outside the range, one
    # at a time and batched.
    data = {3 * i + 1: b"%d" % i for i in range(n)}
    mb = MapBuffer(data)
    wanted = [key + delta for key in data for delta in (-1, 0, 1)] + [0, 3 * n + 5, (1 << 64) - 1]
    expected = [data.get(key) for key in wanted]
    assert mb.get_many(wanted) == expected
    assert [mb.get(key) for key in wanted] == expected
    assert [key in mb for key in wanted] == [value is not None for value in expected]


@pytest.mark.parametrize("compress", [None, "zstd", "gzip"])
def test_items_are_read_in_batches(compress: str | None, monkeypatch) -> None:
    from sackli.maps import _map_buffer
    monkeypatch.setattr(_map_buffer, "_SCAN_BATCH_KEYS", 7)  # batches end mid-map
    data = {key: value or b"-" for key, value in sample(100).items()}
    mb = MapBuffer(MapBuffer(data, compress=compress).tobytes(), frombytesfn=bytes.upper)
    assert list(mb.keys()) == [key for key, _ in mb.items()]
    assert mb.todict() == {key: value.upper() for key, value in data.items()}
    assert sorted(mb.values()) == sorted(value.upper() for value in data.values())


def test_items_of_a_sliceable_map_written_during_the_scan(monkeypatch) -> None:
    """A value written in place while items() runs (which drops the parsed
    copy of a map fetched by ranges) does not break the next batch."""
    from sackli.maps import _map_buffer
    monkeypatch.setattr(_map_buffer, "_SCAN_BATCH_KEYS", 7)
    data = {key: b"%05d" % key for key in range(30)}
    stored = bytearray(MapBuffer(data).tobytes())

    class Writable:
        def __getitem__(self, window: slice) -> bytes:
            return bytes(stored[window])

        def __setitem__(self, window: slice, value: bytes) -> None:
            stored[window] = value

    mb = MapBuffer(Writable())
    seen = {}
    for key, value in mb.items():
        seen[key] = value
        if key == 3:
            mb[20] = b"xxxxx"
    assert seen == {**data, 20: b"xxxxx"}


def test_items_name_the_damaged_value() -> None:
    data = bytearray(MapBuffer({1: b"one", 2: b"two", 3: b"three"}).tobytes())
    data[-6] ^= 1  # in the last value ("three")
    with pytest.raises(ValidationError, match="<bytes>: value of key 3: crc32c mismatch"):
        MapBuffer(bytes(data)).todict()


def test_get_many_releases_the_gil() -> None:
    # With a switch interval longer than the test, a thread keeps the GIL
    # until it releases it itself: each turn of the main loop below is one
    # release inside get_many (the worker's own loop never blocks).
    mb = MapBuffer(MapBuffer({key: bytes(1000) for key in range(5000)}, compress="zstd").tobytes())
    keys = list(range(5000))
    done = threading.Event()

    def work() -> None:
        for _ in range(10):
            mb.get_many(keys)
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(60)
    try:
        worker = threading.Thread(target=work)
        worker.start()
        turns = 0
        while not done.is_set():
            turns += 1
            time.sleep(0)  # hands the GIL back to the worker
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert turns >= 10


def test_get_many_takes_integer_arrays_and_odd_keys() -> None:
    data = {0: b"zero", (1 << 64) - 1: b"max", 5: b"five"}
    mb = MapBuffer(data)
    assert mb.get_many(array.array("Q", [5, 0, (1 << 64) - 1, 6])) == [b"five", b"zero", b"max", None]
    assert mb.get_many([-1, 1 << 64, 1 << 70], default=b"?") == [b"?", b"?", b"?"]
    assert mb[(1 << 64) - 1] == b"max"
    assert -1 not in mb
    with pytest.raises(KeyError):
        mb[-5]
    with pytest.raises(TypeError):
        mb["5"]
    with pytest.raises(TypeError):
        mb.get_many([5, 1.5])


@pytest.mark.parametrize("dtype", ["uint64", "int64", "int32", "uint16", "int8", ">i8", "<u8"])
def test_get_many_reads_integer_arrays_of_every_width_and_byte_order(dtype: str) -> None:
    """Buffers are read without a Python object per key; negative keys are
    absent, and a non-native byte order is read correctly (item by item)."""
    np = pytest.importorskip("numpy")
    data = {0: b"zero", 5: b"five", 100: b"hundred"}
    mb = MapBuffer(data)
    keys = np.array([5, 0, 7, 100, 5], dtype=dtype)
    assert mb.get_many(keys) == [b"five", b"zero", None, b"hundred", b"five"]
    assert mb.get_many(keys[::-2], default=b"?") == [b"five", b"?", b"five"]  # strided
    if np.dtype(dtype).kind == "i":
        assert mb.get_many(np.array([-1, 5], dtype=dtype), default=b"?") == [b"?", b"five"]
    assert mb.get_many(np.array([], dtype=dtype)) == []


def test_get_many_takes_any_iterable_and_refuses_non_integers() -> None:
    np = pytest.importorskip("numpy")
    mb = MapBuffer({1: b"a", 2: b"bb", (1 << 63) + 1: b"high"})
    assert mb.get_many((2, 1)) == [b"bb", b"a"]
    assert mb.get_many(k for k in [1, (1 << 63) + 1]) == [b"a", b"high"]
    assert mb.get_many(range(3)) == [None, b"a", b"bb"]
    assert mb.get_many([np.uint64(2), True]) == [b"bb", b"a"]  # __index__
    with pytest.raises(TypeError):
        mb.get_many(np.array([1.0, 2.0]))
    with pytest.raises(TypeError):
        mb.get_many(np.array([[1, 2]], dtype="int64"))  # 2-D: items are arrays
    with pytest.raises(TypeError):
        mb.get_many(5)


def test_get_many_of_many_keys_matches_single_lookups() -> None:
    """Batches larger than one engine task (256 keys) are allocated and
    decoded in overlapping groups; every value lands in its slot."""
    import random
    rng = random.Random(3)
    data = {rng.randrange(1 << 64): rng.randbytes(rng.randrange(0, 3000)) for _ in range(3000)}
    for compress in (None, "zstd"):
        mb = MapBuffer(data, compress=compress)
        wanted = rng.sample(list(data), 2000) + [7, 8] + rng.sample(list(data), 1500)
        assert mb.get_many(wanted, default=b"?") == [data.get(k, b"?") for k in wanted]


def test_get_many_with_frombytesfn() -> None:
    mb = MapBuffer({1: b"a", 2: b"bb"}, frombytesfn=len)
    assert mb.get_many([2, 1, 3], default=0) == [2, 1, 0]


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_every_kind_of_input(tmp_path: pathlib.Path, compress: str | None) -> None:
    data = {key: value or b"-" for key, value in sample(200).items()}
    built = MapBuffer(data, compress=compress).tobytes()
    path = tmp_path / "m.mb"
    path.write_bytes(built)
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    inputs = [built, bytearray(built), memoryview(built), mapped, path, str(path),
              io.BytesIO(built)]
    for source in inputs:
        mb = MapBuffer(source)
        assert mb.todict() == data, type(source)
        assert mb.get_many(list(data)) == list(data.values())
        assert mb.validate()
        assert bytes(mb.buffer) == built
        assert mb.datasize() == len(built) - 16 - 16 * len(data)


def test_missing_path_raises_file_not_found(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError):
        MapBuffer(tmp_path / "absent.mb")


def test_overwrite_in_place_keeps_crc_valid() -> None:
    mb = MapBuffer({1: b"hello", 2: b"world"}, compress="zstd")
    mb.buffer = bytearray(mb.buffer)
    with pytest.raises(ValueError):
        mb[2] = b"a much longer value"
    mb = MapBuffer(bytearray(MapBuffer({1: b"hello", 2: b"world"}).tobytes()))
    mb[1] = b"HELLO"
    assert mb[1] == b"HELLO"
    assert mb.validate()
    with pytest.raises(KeyError):
        mb[3] = b"12345"
    with pytest.raises(ValueError):
        MapBuffer({1: b"hello"})[1] = b"jello"


def test_intmap_on_a_path_and_an_array(tmp_path: pathlib.Path) -> None:
    data = {key: key * 2 % (1 << 64) for key in sample(500)}
    path = tmp_path / "m.im"
    path.write_bytes(IntMap(data).tobytes())
    assert IntMap(path).todict() == data
    assert IntMap(str(path)).validate()


def test_errors_are_sackli_corruption_errors() -> None:
    assert issubclass(ValidationError, sackli.CorruptionError)
    assert issubclass(ValidationError, ValueError)


def test_brotli_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    built = MapBuffer({1: b"x"}, compress="br").tobytes()
    monkeypatch.setitem(sys.modules, "brotli", None)
    mb = MapBuffer(built)
    with pytest.raises(ImportError, match=r"sackli-bagz\[brotli\]"):
        mb[1]


def test_unknown_compression_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unsupported map compression"):
        MapBuffer({1: b"x"}, compress="snappy")


def test_crc32c_matches_google_crc32c() -> None:
    import google_crc32c

    from sackli import _engine
    rng = random.Random(3)
    for size in [0, 1, 7, 8, 9, 63, 64, 1000, 65537]:
        data = rng.randbytes(size)
        assert _engine.crc32c(data) == google_crc32c.value(data), size
    assert _engine.crc32c(b"6789", _engine.crc32c(b"12345")) == google_crc32c.value(b"123456789")


@pytest.mark.parametrize("compress", COMPRESSIONS)
def test_write_matches_a_built_map(tmp_path: pathlib.Path, compress: str | None) -> None:
    import mapbuffer

    from sackli.maps import write
    data = sample(1000, seed=4)
    items = list(data.items())
    random.Random(5).shuffle(items)
    path = tmp_path / "out.mb"
    assert write(path, iter(items), compress=compress) == len(data)
    if compress is None:
        assert path.read_bytes() == MapBuffer(data).tobytes()
    assert MapBuffer(path).todict() == data
    assert mapbuffer.MapBuffer(path.read_bytes()).todict() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mb"]  # no temporary left


def test_write_rejects_duplicate_keys_and_leaves_nothing(tmp_path: pathlib.Path) -> None:
    from sackli.maps import write
    path = tmp_path / "dup.mb"
    with pytest.raises(ValueError, match="key 1 appears more than once"):
        write(path, [(1, b"a"), (2, b"b"), (1, b"c")])
    assert list(tmp_path.iterdir()) == []
    assert write(tmp_path / "empty.mb", []) == 0
    assert MapBuffer(tmp_path / "empty.mb").validate()
