"""Damaged maps: each defect raises ValidationError (a sackli.CorruptionError)
naming the file (a path, or <bytes>) and, where there is one, the key; and a
random-corruption loop never crashes the process."""

from __future__ import annotations

import pathlib
import random
import struct
import sys
from typing import Any, Callable

import pytest

from sackli.maps import IntMap, MapBuffer, ValidationError

HEADER = 16
ENTRY = 16


def built(compress: str | None = None) -> bytearray:
    return bytearray(MapBuffer({10: b"hello", 20: b"world", 30: b"again"},
                               compress=compress).tobytes())


def key_at(buffer: bytes, position: int) -> int:
    return struct.unpack_from("<Q", buffer, HEADER + ENTRY * position)[0]


def set_offset(buffer: bytearray, position: int, offset: int) -> None:
    struct.pack_into("<Q", buffer, HEADER + ENTRY * position + 8, offset)


def read_everything(mb: MapBuffer) -> None:
    mb.validate()
    for key in list(mb.keys()):
        mb[key]


def test_wrong_magic_names_the_bytes() -> None:
    data = built()
    data[0:7] = b"notamap"
    with pytest.raises(ValidationError, match=r"<bytes>: not a MapBuffer: magic is b'notamap'"):
        len(MapBuffer(bytes(data)))


def test_wrong_magic_names_the_path(tmp_path: pathlib.Path) -> None:
    data = built()
    data[0:7] = b"xxxxxxx"
    path = tmp_path / "bad.mb"
    path.write_bytes(data)
    with pytest.raises(ValidationError, match=str(path)):
        MapBuffer(path)


def test_unknown_version() -> None:
    data = built()
    data[7] = 7
    with pytest.raises(ValidationError, match="unsupported format version 7"):
        MapBuffer(bytes(data)).validate()


def test_unknown_compression() -> None:
    data = built()
    data[8:12] = b"xz__"
    with pytest.raises(ValidationError, match="unknown compression b'xz__'"):
        MapBuffer(bytes(data))[10]


def test_truncated_header_and_index() -> None:
    data = built()
    with pytest.raises(ValidationError, match="truncated header"):
        len(MapBuffer(bytes(data[:10])))
    with pytest.raises(ValidationError, match="truncated index"):
        MapBuffer(bytes(data[:HEADER + ENTRY + 3]))[10]


def test_offsets_out_of_order() -> None:
    data = built()
    set_offset(data, 1, HEADER + 3 * ENTRY + 100)  # past its successor's start
    mb = MapBuffer(bytes(data))
    with pytest.raises(ValidationError, match="byte offset"):
        mb.validate()
    with pytest.raises(ValidationError, match=f"key {key_at(data, 0)}"):
        mb[key_at(data, 0)]  # its end is its successor's start, now before it


def test_offset_past_the_end_names_the_key() -> None:
    data = built()
    set_offset(data, 2, 1 << 40)
    mb = MapBuffer(bytes(data))
    with pytest.raises(ValidationError, match=rf"<bytes>: value of key {key_at(data, 2)}"):
        mb[key_at(data, 2)]
    with pytest.raises(ValidationError):
        mb.get_many(list(mb.keys()))


def test_crc_mismatch_names_key_and_offset() -> None:
    data = built()
    data[data.find(b"world")] ^= 1
    mb = MapBuffer(bytes(data))
    with pytest.raises(ValidationError, match=r"value of key 20: crc32c mismatch .*byte offset"):
        mb[20]
    assert MapBuffer(bytes(data), check_crc=False)[20] == b"vorld"
    assert mb[10] == b"hello"


@pytest.mark.parametrize("compress", [None, "zstd"])
@pytest.mark.parametrize("damaged", [0, 1, 1500, 2999])
def test_crc_mismatch_in_a_large_batch(compress: str | None, damaged: int) -> None:
    """A damaged value anywhere in a batch that several threads check while
    others are still being allocated: the error names its key; the map stays
    usable."""
    data = {k: b"%05d" % k * 50 for k in range(3000)}
    buffer = bytearray(MapBuffer(data, compress=compress).tobytes())
    mb = MapBuffer(bytes(buffer))
    position = mb.find_index_position(damaged)
    begin = struct.unpack_from("<Q", buffer, HEADER + ENTRY * position + 8)[0]
    buffer[begin + 3] ^= 0x40
    mb = MapBuffer(bytes(buffer))
    for _ in range(3):
        with pytest.raises(ValidationError, match=rf"value of key {damaged}: crc32c mismatch"):
            mb.get_many(range(3000))
    rest = [k for k in range(3000) if k != damaged]
    assert mb.get_many(rest) == [data[k] for k in rest]


@pytest.mark.parametrize("compress", ["gzip", "br", "zstd", "lzma"])
def test_value_that_does_not_decompress(compress: str) -> None:
    data = built(compress)
    # Damage the start of key 20's value and skip the crc check, so the
    # decompressor sees the damage.
    mb = MapBuffer(bytes(data))
    position = mb.find_index_position(20)
    begin = struct.unpack_from("<Q", data, HEADER + ENTRY * position + 8)[0]
    data[begin:begin + 4] = b"\xff\xfe\xfd\xfc"
    with pytest.raises(ValidationError, match="value of key 20"):
        MapBuffer(bytes(data))[20]
    with pytest.raises(ValidationError, match="value of key 20: .*does not decompress"):
        MapBuffer(bytes(data), check_crc=False)[20]


def test_keys_out_of_eytzinger_order() -> None:
    data = built()
    struct.pack_into("<Q", data, HEADER, 99)  # the root key, now larger than its right child
    with pytest.raises(ValidationError, match="not in Eytzinger order"):
        MapBuffer(bytes(data)).validate()


def test_intmap_bad_input() -> None:
    data = bytearray(IntMap({1: 2, 3: 4}).tobytes())
    with pytest.raises(ValidationError, match="not an IntMap"):
        len(IntMap(bytes(b"xxxx" + data[4:])))
    with pytest.raises(ValidationError, match="truncated index"):
        IntMap(bytes(data[:-1]))[1]


def _map_oracle():
    """fuzz/map_oracle.py: the fuzzer's independent reader of the map formats.
    The fuzz package is found through the repository root, appended (not
    inserted) so that `import sackli` still finds the package under test."""
    root = str(pathlib.Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.append(root)
    from fuzz import map_oracle

    return map_oracle


def _outcome(read: Callable[[], Any]) -> Any:
    """What a read gave: its value, or the documented exception it raised
    (ValidationError for damage, KeyError for an absent key). Any other
    exception fails the test."""
    try:
        return read()
    except (ValidationError, KeyError) as error:
        return error


class _Judge:
    """Judges each outcome of a read of a damaged map, as the fuzzer judges
    its mutants (fuzz/map_paths.py): against the independent oracle's reading
    of the damaged bytes, and, where the damage left the header and index
    whole, against the map's original contents."""

    def __init__(self, oracle_module: Any, oracle: Any, original: dict[int, bytes],
                 index_whole: bool, context: str) -> None:
        self.absent = oracle_module.ABSENT
        self.oracle_error = oracle_module.OracleError
        self.oracle = oracle  # an OracleMap, or the OracleError opening gives
        self.original = original
        self.index_whole = index_whole
        self.context = context
        self.values = 0  # values compared
        self._held = set() if isinstance(oracle, self.oracle_error) else set(oracle.keys)
        if self._held:
            ordered = oracle.ordered()  # a walk of the whole index: once, not per lookup
            oracle.ordered = lambda: ordered
        self._answers: dict[int, list[Any]] = {}

    def answers(self, key: int) -> list[Any]:
        if isinstance(self.oracle, self.oracle_error):
            return [self.oracle]
        if key not in self._answers:
            # A key no index entry holds is absent, in any index: skip the search.
            held = key in self._held
            self._answers[key] = self.oracle.lookup(key) if held else [self.absent]
        return self._answers[key]

    def _acceptable(self, key: int, got: Any, answers: list[Any]) -> bool:
        if isinstance(got, ValidationError):
            return any(isinstance(answer, self.oracle_error) for answer in answers)
        if isinstance(got, KeyError) or got is None:  # None: get_many's default
            return self.absent in answers and not (self.index_whole and key in self.original)
        self.values += 1
        if self.index_whole and got != self.original.get(key):
            return False  # the index is whole: a value is the key's original one
        return any(type(answer) is bytes and got == answer for answer in answers)

    def lookup(self, key: int, got: Any) -> None:
        answers = self.answers(key)
        assert self._acceptable(key, got, answers), (
            f"{self.context}: m[{key}] gave {got!r}; acceptable: {answers!r}; "
            f"original: {self.original.get(key)!r}")

    def batch(self, keys: list[int], got: Any) -> None:
        answer_sets = [self.answers(key) for key in keys]
        if isinstance(got, ValidationError):  # some key may answer with an error
            assert any(isinstance(a, self.oracle_error) for answers in answer_sets
                       for a in answers), f"{self.context}: get_many raised {got!r}"
            return
        assert not isinstance(got, KeyError), f"{self.context}: get_many raised {got!r}"
        assert len(got) == len(keys), self.context
        for key, value, answers in zip(keys, got, answer_sets):
            assert self._acceptable(key, value, answers), (
                f"{self.context}: get_many gave {value!r} for key {key}; acceptable: {answers!r}")


def test_random_corruption_never_crashes() -> None:
    """Random damage (a few bytes overwritten, sometimes the end cut off):
    no crash, and every read returns what the damaged bytes hold (the fuzz
    oracle's reading of them; the original value when the damage spared the
    header and index) or raises ValidationError (KeyError for absent keys)."""
    oracle_module = _map_oracle()
    rng = random.Random(7)
    compared = 0
    for compress in (None, "zstd", "gzip"):
        contents = {key: rng.randbytes(rng.randrange(0, 30)) or b"-" for key in range(0, 400, 7)}
        original = bytes(MapBuffer(contents, compress=compress).tobytes())
        index_end = HEADER + ENTRY * len(contents)
        for mutant in range(300):
            damaged = bytearray(original)
            touched = []
            for _ in range(rng.randrange(1, 4)):
                touched.append(rng.randrange(len(damaged)))
                damaged[touched[-1]] = rng.randrange(256)
            if rng.random() < 0.2:
                damaged = damaged[:rng.randrange(len(damaged))]
                touched.append(len(damaged))
            oracle = oracle_module.read_map(bytes(damaged), "<bytes>", intmap=False)
            judge = _Judge(oracle_module, oracle, contents,
                           index_whole=min(touched) >= index_end,
                           context=f"compress={compress}, mutant {mutant}")
            mb = MapBuffer(bytes(damaged))
            probes = set(contents) | set(range(1, 400, 5))  # the map's keys and others
            if not isinstance(oracle, oracle_module.OracleError):
                probes |= set(oracle.keys)  # and what a damaged index holds
            for key in probes:
                judge.lookup(key, _outcome(lambda: mb[key]))
            keys = list(range(0, 400, 3))
            judge.batch(keys, _outcome(lambda: mb.get_many(keys, default=None)))
            validated = _outcome(mb.validate)
            if isinstance(judge.oracle, oracle_module.OracleError):
                assert isinstance(validated, ValidationError), judge.context
            else:
                assert (validated is True) == (judge.oracle.structure_error() is None), (
                    f"{judge.context}: validate() gave {validated!r}")
            compared += judge.values
    assert compared > 20_000  # the damage left most values readable: they were compared


@pytest.mark.parametrize("compress", [None, "zstd"])
def test_damaged_maps_never_return_other_values_than_mapbuffer(compress: str | None) -> None:
    """Damaged maps large enough for the parallel, pipelined get_many: a value
    sackli returns is the value the real mapbuffer reads for that key (which
    checks the same crc32c), whether or not other keys of the batch fail."""
    mapbuffer = pytest.importorskip("mapbuffer")
    rng = random.Random(11)
    data = {key: rng.randbytes(rng.randrange(1, 200)) for key in range(0, 6000, 2)}
    original = bytes(MapBuffer(data, compress=compress).tobytes())
    keys = list(range(0, 6000, 3))
    for _ in range(40):
        damaged = bytearray(original)
        for _ in range(rng.randrange(1, 4)):
            damaged[rng.randrange(HEADER, len(damaged))] = rng.randrange(256)
        mb = MapBuffer(bytes(damaged))
        try:
            ours = mb.get_many(keys, default=None)
        except ValidationError:
            # One by one: each value we return must be mapbuffer's.
            ours = []
            for key in keys:
                try:
                    ours.append(mb.get(key))
                except ValidationError:
                    ours.append(ValidationError)
        theirs = mapbuffer.MapBuffer(bytes(damaged), compress=compress)
        for key, value in zip(keys, ours):
            if value is None or value is ValidationError:
                continue
            assert value == theirs[key], key


# --- Found by the fuzzer's map target (fuzz/map_paths.py) -----------------------------------


class OnlySlices:
    """A map held by an object that only answers obj[a:b] (size unknown)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __getitem__(self, window: slice) -> bytes:
        return self.data[window]


def _with_offset(data: bytes, position: int, offset: int) -> bytes:
    """`data` with the value offset of index position `position` replaced."""
    at = 16 + 16 * position + 8
    return data[:at] + struct.pack("<Q", offset) + data[at + 8:]


def test_errors_of_a_map_read_from_a_file_object_name_the_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.mb"
    path.write_bytes(b"mapbufX" + bytes(9))
    with open(path, "rb") as file:
        with pytest.raises(ValidationError, match=f"^{path}: not a MapBuffer"):
            len(MapBuffer(file))


@pytest.mark.parametrize("check_crc", [True, False])
@pytest.mark.parametrize("next_offset", [2**64 - 1, 10**6])
def test_a_value_cut_off_by_the_end_of_a_sliced_object_is_an_error(check_crc, next_offset) -> None:
    data = bytes(MapBuffer({k: bytes([k]) * 50 for k in range(8)}).tobytes())
    keys = [struct.unpack_from("<Q", data, 16 + 16 * p)[0] for p in range(8)]
    damaged = _with_offset(data, 3, next_offset)  # value 2 now ends past the object's end
    for source in (OnlySlices(damaged), damaged):
        mb = MapBuffer(source, check_crc=check_crc)
        with pytest.raises(ValidationError, match=f"value of key {keys[2]}"):
            mb[keys[2]]
        with pytest.raises(ValidationError, match=f"value of key {keys[2]}"):
            mb.get_many([keys[2], keys[1]])
        with pytest.raises(ValidationError):  # value 3 starts past the end too
            mb.todict()
        assert mb[keys[1]] == bytes([keys[1]]) * 50  # its neighbour is intact


def test_a_zstd_frame_whose_header_says_0_bytes_must_hold_nothing() -> None:
    import zstandard

    # A frame of one raw block holding b"abc" whose header claims 0 bytes.
    lying = bytes([0x28, 0xB5, 0x2F, 0xFD, 0x20, 0x00]) + bytes([0x19, 0x00, 0x00]) + b"abc"
    stored = {1: lying, 2: zstandard.ZstdCompressor().compress(b"y")}
    raw = bytearray(MapBuffer(stored).tobytes())  # stored as given...
    raw[8:12] = b"zstd"  # ...then labelled zstd
    mb = MapBuffer(bytes(raw))
    assert mb[2] == b"y"
    with pytest.raises(ValidationError, match="value of key 1: does not decompress"):
        mb[1]
    with pytest.raises(ValidationError, match="value of key 1"):
        mb.get_many([1, 2])
    with pytest.raises(ValidationError, match="value of key 1"):
        list(mb.values())
    assert MapBuffer({1: b""}, compress="zstd")[1] == b""  # an honest empty frame


def test_validate_of_an_empty_map_of_unknown_size() -> None:
    data = bytes(MapBuffer({}).tobytes())
    assert MapBuffer(OnlySlices(data)).validate() is True
    assert len(MapBuffer(OnlySlices(data))) == 0
