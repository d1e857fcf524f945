"""zstd content checksums in .bagz records (issue 51 §1): written by default,
verified by every read path, readable by bagz; off for bagz's exact bytes;
files without them (bagz's, older sackli's) still read."""

from __future__ import annotations

import pathlib
import random
import re

import bagz
import pytest
import zstandard

import sackli

_DATA = pathlib.Path(__file__).parent.parent / "data"
_rng = random.Random(51)


def _records(n: int = 60, size: int = 1024) -> list[bytes]:
    """Labelled records of `size` bytes from a small alphabet: compressed
    blocks, not raw ones."""
    return [(b"label %d " % i + bytes(_rng.randrange(40, 60) for _ in range(size)))[:size]
            for i in range(n)]


def _write(path: pathlib.Path, records: list[bytes], **options) -> None:
    with sackli.Writer(path, **options) as writer:
        for record in records:
            writer.write(record)


def _stored(path: pathlib.Path) -> list[bytes]:
    with sackli.Reader(path, compression=sackli.CompressionNone()) as reader:
        return reader.read()


def _has_checksum(frame: bytes) -> bool:
    return bool(frame[4] & 0x04)  # Content_Checksum_flag (RFC 8878)


def test_default_frames_carry_a_checksum_bagz_verifies(tmp_path) -> None:
    records = _records()
    path = tmp_path / "c.bagz"
    _write(path, records)
    assert all(_has_checksum(frame) for frame in _stored(path))
    assert list(bagz.Reader(str(path))) == records
    # bagz verifies it too: a flipped checksum byte fails there as well.
    data = bytearray(path.read_bytes())
    data[len(_stored(path)[0]) - 1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(Exception):
        bagz.Reader(str(path))[0]


def test_checksum_off_writes_frames_as_bagz_does(tmp_path) -> None:
    """bagz's frames carry no checksum (their exact bytes depend on its
    libzstd's version: the C++ tests compare with our libzstd's)."""
    records = _records(20)
    ours, theirs = tmp_path / "ours.bagz", tmp_path / "theirs.bagz"
    _write(ours, records, checksum=False)
    with bagz.Writer(str(theirs)) as writer:
        for record in records:
            writer.write(record)
    assert not any(_has_checksum(frame) for frame in _stored(ours))
    assert not any(_has_checksum(frame) for frame in _stored(theirs))
    assert list(bagz.Reader(str(ours))) == records


def test_checksum_option_is_validated() -> None:
    with pytest.raises(TypeError, match="checksum"):
        sackli.Writer.Options(checksum="no")
    assert sackli.Writer.Options().checksum is True


def test_files_without_checksums_still_read() -> None:
    for name in ("tail.bagz", "level19.bagz", "blanks.bagz"):
        frames = [f for f in _stored(_DATA / name) if f]
        assert frames and not any(_has_checksum(f) for f in frames)
        with sackli.Reader(_DATA / name) as reader:
            assert reader.read() == list(bagz.Reader(str(_DATA / name)))


def _flipped(path: pathlib.Path, bit: int, out: pathlib.Path) -> pathlib.Path:
    data = bytearray(path.read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    out.write_bytes(bytes(data))
    return out


def _record_at(ends: list[int], byte: int) -> int:
    return next(i for i, end in enumerate(ends) if byte < end)


def _read(reader: sackli.Reader, how: str, target: int) -> list[bytes]:
    if how == "single":
        return [reader[target]]
    if how == "range":
        return reader.read_range(0, len(reader))
    if how == "indices":
        return reader.read_indices([target, 0, target])
    return list(reader.read_range_iter(0, len(reader), read_ahead=7))


@pytest.mark.parametrize("how", ["single", "range", "indices", "iter"])
def test_bit_flips_raise_naming_file_and_record(tmp_path, how) -> None:
    """Random single-bit flips in the records: each raises CorruptionError
    naming the file, the record and its offset. The one exception zstd's
    format allows: a flip in a table description that decodes to the very
    same record (the checksum proves it), about 1 bit in 500; then the read
    must return exactly the bytes written."""
    records = _records()
    path = tmp_path / "c.bagz"
    _write(path, records)
    ends, total = [], 0
    for frame in _stored(path):
        total += len(frame)
        ends.append(total)
    rng = random.Random(how)
    trials = 200 if how == "single" else 50
    raised = 0
    for _ in range(trials):
        bit = rng.randrange(total * 8)
        target = _record_at(ends, bit // 8)
        bad = _flipped(path, bit, tmp_path / "bad.bagz")
        with sackli.Reader(bad) as reader:
            try:
                got = _read(reader, how, target)
            except sackli.CorruptionError as error:
                message = str(error)
                start = ends[target - 1] if target else 0
                assert f"bad.bagz: record {target} " in message, (bit, message)
                assert f"(byte offset {start})" in message, (bit, message)
                raised += 1
                continue
        assert got == _read_records(records, how, target), bit
    assert raised == trials  # with these seeds: every flip lands where zstd looks


def _read_records(records: list[bytes], how: str, target: int) -> list[bytes]:
    """What _read returns from an undamaged bag of `records`."""
    if how == "single":
        return [records[target]]
    if how == "indices":
        return [records[target], records[0], records[target]]
    return records


def test_a_mismatch_is_named_as_such(tmp_path) -> None:
    path = tmp_path / "c.bagz"
    _write(path, _records(3))
    first = len(_stored(path)[0])
    bad = _flipped(path, (first // 2) * 8, tmp_path / "bad.bagz")
    with pytest.raises(sackli.CorruptionError,
                       match=r"bad\.bagz: record 0 is corrupt: its zstd content checksum does not"
                             r" match.*\(byte offset 0\)"):
        sackli.Reader(bad)[0]


def test_frames_without_their_size_are_verified(tmp_path) -> None:
    """Frames of a streaming compressor (no content size: DecodeUnsized)."""
    records = _records(10)
    compressor = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False)
    frames = []
    for record in records:
        stream = compressor.compressobj()
        frames.append(stream.compress(record) + stream.flush())
    path = tmp_path / "u.bagz"
    _write(path, frames, compression=sackli.CompressionNone())
    with sackli.Reader(path) as reader:
        assert reader.read() == records
    bad = _flipped(path, (len(frames[0]) + len(frames[1]) // 2) * 8, tmp_path / "bad.bagz")
    with sackli.Reader(bad) as reader:
        with pytest.raises(sackli.CorruptionError, match=r"record 1 is corrupt: its zstd content"):
            reader[1]
        with pytest.raises(sackli.CorruptionError, match=r"record 1 "):
            reader.read()


def test_dictionary_frames_are_verified(tmp_path) -> None:
    dictionary = b"label " + bytes(range(40, 60)) * 50
    compression = sackli.CompressionZstd(dictionary=dictionary)
    path = tmp_path / "d.bagz"
    _write(path, _records(5), compression=compression, checksum=False)
    stored = _stored(path)
    assert all(_has_checksum(f) for f in stored)  # a dictionary always brings one
    bad = _flipped(path, (len(stored[0]) + len(stored[1]) - 2) * 8, tmp_path / "bad.bagz")
    with pytest.raises(sackli.CorruptionError, match=r"record 1 is corrupt"):
        sackli.Reader(bad, compression=compression)[1]


def test_the_unused_header_bit_is_refused(tmp_path) -> None:
    """zstd ignores it (the checksum covers only the content): a flip there
    must still fail."""
    path = tmp_path / "c.bagz"
    _write(path, _records(2))
    bad = _flipped(path, 4 * 8 + 4, tmp_path / "bad.bagz")
    with pytest.raises(sackli.CorruptionError, match=re.escape("unused bit set")):
        sackli.Reader(bad)[0]
