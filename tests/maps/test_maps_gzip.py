"""gzip maps (issue 30, items 5 and 6): the bytes `mapbuffer` 1.2.0 writes
(libdeflate at level 9, through the `deflate` package), and values that are
not exactly one gzip member rejected with a ValidationError naming the map,
the key and the byte offset."""

from __future__ import annotations

import gzip
import random

import pytest

import sackli.maps
from sackli.maps import MapBuffer, ValidationError

mapbuffer = pytest.importorskip("mapbuffer")


def _value(rng: random.Random, kind: str, big: bool) -> bytes:
    size = rng.choice([0, 1, 2, 5, 64, 1000] + ([70_000] if big else []))
    if kind == "empty":
        return b""
    if kind == "random":
        return rng.randbytes(size)
    if kind == "text":  # compressible: exercises libdeflate's matching, not stored blocks
        return b" ".join(b"%d" % rng.randrange(50) for _ in range(size // 2))
    return bytes([rng.randrange(256)]) * size  # a run


def _maps(seed: int) -> list[dict[int, bytes]]:
    """Maps of 0 to 2,000 keys, values empty, random, text, runs and mixed
    (values up to 70 KB in the smaller maps, to keep the test quick)."""
    rng = random.Random(seed)
    maps: list[dict[int, bytes]] = [{}, {0: b""}, {7: b"seven"}, {2**63 - 1: b"x" * 100_000}]
    for count in (1, 2, 3, 10, 100, 2000):
        for kind in ("empty", "random", "text", "run", "mixed"):
            keys = {rng.randrange(2**63) for _ in range(count)}
            maps.append({key: _value(rng, rng.choice(["empty", "random", "text", "run"])
                                     if kind == "mixed" else kind, count <= 10) for key in keys})
    return maps


@pytest.mark.parametrize("seed", [1, 2])
def test_gzip_maps_are_byte_identical_to_mapbuffer(seed, tmp_path):
    """MapBuffer(dict, compress="gzip"), format 0 and 1, and write() give
    mapbuffer's bytes, and each reads the other's map."""
    for number, data in enumerate(_maps(seed)):
        for compute_crc in (False, True):  # format 1 (the default) last: `ours` below
            ours = bytes(MapBuffer(data, compress="gzip", compute_crc=compute_crc).tobytes())
            theirs = bytes(mapbuffer.MapBuffer(data, compress="gzip",
                                               compute_crc=compute_crc).tobytes())
            assert ours == theirs, (number, compute_crc, len(data))
        path = tmp_path / f"{number}.mb"
        sackli.maps.write(path, data.items(), compress="gzip")
        assert path.read_bytes() == ours, number
        assert MapBuffer(theirs).todict() == data
        assert {int(k): bytes(v) for k, v in mapbuffer.MapBuffer(ours).items()} == data


def test_gzip_value_rewritten_in_place_is_mapbuffers(tmp_path):
    """mb[key] = value compresses as mapbuffer does (same stored size)."""
    data = {1: b"a" * 100, 2: b"b" * 100}
    ours = MapBuffer(bytearray(MapBuffer(data, compress="gzip").tobytes()))
    ours[1] = b"c" * 100
    assert bytes(ours.tobytes()) == bytes(
        mapbuffer.MapBuffer({1: b"c" * 100, 2: b"b" * 100}, compress="gzip").tobytes())


# --- values that are not one gzip member ----------------------------------------------


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _gzip_map(stored: dict[int, bytes]) -> bytes:
    """A format-1 gzip map whose values are stored exactly as given (crc32c
    included, so only the gzip decoding can fail)."""
    raw = bytearray(MapBuffer(stored).tobytes())
    raw[8:12] = b"gzip"
    return bytes(raw)


def _every_read(mapped: MapBuffer, key: int) -> dict[str, object]:
    """What each way of reading `key` gives: the value or the exception."""
    reads = {
        "getitem": lambda: mapped[key],
        "get": lambda: mapped.get(key),
        "get_many": lambda: mapped.get_many([key]),
        "getindex": lambda: mapped.getindex(mapped.find_index_position(key)),
        "items": lambda: list(mapped.items()),
        "todict": mapped.todict,
    }
    outcomes: dict[str, object] = {}
    for name, read in reads.items():
        try:
            outcomes[name] = read()
        except Exception as error:  # noqa: BLE001 - the outcome is what is compared
            outcomes[name] = error
    return outcomes


DAMAGED = {
    # a second member: gzip.decompress returns both, a reader of the first
    # member only loses the second silently
    "two members": _gz(b"hello world") + _gz(b"x"),
    "two members, the second longer": _gz(b"hello") + _gz(b"world!!"),
    "an empty second member": _gz(b"hello") + _gz(b""),
    "then garbage": _gz(b"hello") + b"junk",
    "then a zero byte": _gz(b"hello") + b"\x00",
    "truncated": _gz(b"hello")[:-1],
    "empty": b"",
}


@pytest.mark.parametrize("what", list(DAMAGED))
def test_a_value_that_is_not_one_gzip_member_raises(what, tmp_path):
    stored = DAMAGED[what]
    good = _gz(b"fine")
    data = _gzip_map({1: good, 5: stored})
    path = tmp_path / "damaged.mb"
    path.write_bytes(data)
    for source, name in ((data, "<bytes>"), (str(path), str(path))):
        mapped = MapBuffer(source)
        assert mapped[1] == b"fine"
        offset = next(int(o) for k, o in mapbuffer.MapBuffer(data).index() if k == 5)
        for read, outcome in _every_read(mapped, 5).items():
            assert isinstance(outcome, ValidationError), (what, read, outcome)
            message = str(outcome)
            assert name in message and "key 5" in message, (read, message)
            assert f"byte offset {offset}" in message, (read, message)


def test_two_members_raise_where_mapbuffer_raises():
    """mapbuffer raises for a second member when the first decodes to more
    bytes than the last member's size field: so does sackli, always."""
    data = _gzip_map({5: DAMAGED["two members"]})
    with pytest.raises(Exception):
        mapbuffer.MapBuffer(data)[5]
    with pytest.raises(ValidationError, match="second gzip member"):
        MapBuffer(data)[5]
    assert gzip.decompress(DAMAGED["two members"]) == b"hello worldx"


def test_trailing_bytes_named_in_the_error():
    with pytest.raises(ValidationError, match="4 bytes after the gzip member"):
        MapBuffer(_gzip_map({5: DAMAGED["then garbage"]}))[5]


def test_sackli_verify_reports_a_gzip_value_with_trailing_bytes(tmp_path, capsys):
    """validate() checks the structure (as mapbuffer's); `sackli verify`
    decodes every value and names the damaged one."""
    from sackli.cli import main

    path = tmp_path / "damaged.mb"
    path.write_bytes(_gzip_map({1: _gz(b"fine"), 5: DAMAGED["then garbage"]}))
    assert MapBuffer(str(path)).validate() is True
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr()
    assert "key 5" in out.out + out.err and "after the gzip member" in out.out + out.err


def test_without_the_deflate_package_gzip_writes_say_so_and_reads_work(monkeypatch):
    """No silent zlib fallback (it would write other bytes than mapbuffer)."""
    data = bytes(MapBuffer({1: b"one"}, compress="gzip").tobytes())
    monkeypatch.setitem(__import__("sys").modules, "deflate", None)  # import deflate fails
    with pytest.raises(ImportError, match="deflate"):
        MapBuffer({1: b"one"}, compress="gzip")
    assert MapBuffer(data)[1] == b"one"
