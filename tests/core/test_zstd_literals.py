"""CompressionZstd(literals=...): raw literals write different, valid zstd
frames that sackli and the reference `bagz` read back; the default keeps
bagz's bytes; the engine's sample-size helper measures both settings."""

from __future__ import annotations

import random

import bagz
import numpy as np
import pytest

import sackli
from sackli._engine import zstd_packed_size

_rng = random.Random(20261125)
# Text over a 4-letter alphabet: Huffman codes each literal in ~2 bits, so
# raw literals make these frames clearly larger.
SKEWED_TEXT = [("".join(_rng.choice("acgt") for _ in range(400))).encode() for _ in range(60)]
RECORDS = SKEWED_TEXT + [b"", b"x", b"record %d" % 7]
DICTIONARY = b"acgtacgattacaggctta" * 50


def _write(path, records, compression, **options) -> None:
    with sackli.Writer(path, compression=compression, **options) as writer:
        for record in records:
            writer.write(record)


def _frames(path) -> list[bytes]:
    return sackli.Reader(path, compression=sackli.CompressionNone()).read()


def _packed(records: list[bytes]) -> tuple[bytes, np.ndarray]:
    ends = np.cumsum([0] + [len(r) for r in records]).astype(np.int64)
    return b"".join(records), ends


@pytest.mark.parametrize("level", [-1, 1, 3, 19])
def test_raw_literals_are_different_valid_frames(tmp_path, level):
    raw_path, huffman_path = tmp_path / "raw.bagz", tmp_path / "huffman.bagz"
    _write(raw_path, RECORDS, sackli.CompressionZstd(level=level, literals="raw"))
    _write(huffman_path, RECORDS, sackli.CompressionZstd(level=level))
    raw, huffman = _frames(raw_path), _frames(huffman_path)
    assert all(frame.startswith(b"\x28\xb5\x2f\xfd") for frame in raw if frame)
    if level > 0:  # zstd's negative levels never Huffman-code literals
        assert sum(map(len, raw[:60])) > 1.3 * sum(map(len, huffman[:60]))
    assert bagz.Reader(str(raw_path)).read() == RECORDS
    assert sackli.Reader(raw_path).read() == RECORDS
    assert sackli.Reader(huffman_path).read() == RECORDS


def test_raw_literals_with_a_dictionary(tmp_path):
    path = tmp_path / "dict.bagz"
    _write(path, RECORDS, sackli.CompressionZstd(dictionary=DICTIONARY, literals="raw"))
    options = bagz.Reader.Options(
        compression=bagz.CompressionZstd(dictionary=DICTIONARY.decode()))
    assert bagz.Reader(str(path), options).read() == RECORDS
    assert sackli.Reader(path, compression=sackli.CompressionZstd(dictionary=DICTIONARY)
                         ).read() == RECORDS
    huffman = tmp_path / "huffman.bagz"
    _write(huffman, RECORDS, sackli.CompressionZstd(dictionary=DICTIONARY))
    assert _frames(path) != _frames(huffman)


def test_default_literals_write_the_same_bytes_as_before(tmp_path):
    # literals="huffman" is the plain one-shot zstd call of before: for these
    # short records bagz (its own zstd build) writes the very same file.
    # (For longer records the two zstd versions' frames differ, as they
    # already did before this option; test_interchange checks both read.)
    records = [b"record %d says %s" % (i, b"hello " * (i % 13)) for i in range(300)]
    default, huffman, theirs = (tmp_path / f"{name}.bagz" for name in ("d", "h", "t"))
    # (checksum=False: bagz writes no zstd checksum.)
    _write(default, records, sackli.CompressionAutoDetect(), checksum=False)
    _write(huffman, records, sackli.CompressionZstd(level=3, literals="huffman"), checksum=False)
    writer = bagz.Writer(str(theirs))
    for record in records:
        writer.write(record)
    writer.close()
    assert default.read_bytes() == huffman.read_bytes() == theirs.read_bytes()
    _write(default, SKEWED_TEXT, sackli.CompressionAutoDetect())
    _write(huffman, SKEWED_TEXT, sackli.CompressionZstd(level=3, literals="huffman"))
    assert default.read_bytes() == huffman.read_bytes()


def test_literals_field_validation_and_repr():
    assert sackli.CompressionZstd().literals == "huffman"
    assert repr(sackli.CompressionZstd()) == "CompressionZstd(level=3)"
    assert repr(sackli.CompressionZstd(level=1, literals="raw")) == \
        "CompressionZstd(level=1, literals='raw')"
    with pytest.raises(ValueError, match="literals must be one of 'huffman', 'raw', not 'none'"):
        sackli.CompressionZstd(literals="none")
    with pytest.raises(ValueError, match="literals must be one of"):
        sackli.CompressionZstd(literals=1)


def test_packed_size_measures_both_settings():
    data, ends = _packed(RECORDS)
    huffman = zstd_packed_size(data, ends, 3, False)
    raw = zstd_packed_size(data, ends, 3, True)
    assert raw > 1.3 * huffman
    assert huffman < len(data)
    assert zstd_packed_size(b"", np.zeros(1, np.int64), 3, True) == 0


def test_packed_size_matches_written_frames(tmp_path):
    data, ends = _packed(RECORDS)
    for literals in ("huffman", "raw"):
        path = tmp_path / f"{literals}.bagz"
        _write(path, RECORDS, sackli.CompressionZstd(literals=literals))
        assert zstd_packed_size(data, ends, 3, literals == "raw") == \
            sum(map(len, _frames(path)))


def test_packed_size_rejects_bad_input():
    data, ends = _packed(RECORDS)
    with pytest.raises(ValueError, match="zstd level 99 is outside"):
        zstd_packed_size(data, ends, 99, False)
    with pytest.raises(ValueError, match="is not a span of the data"):
        zstd_packed_size(data[:10], ends, 3, False)
    with pytest.raises(TypeError, match="offsets must be a contiguous int64 buffer"):
        zstd_packed_size(data, ends.astype(np.int32), 3, False)


def test_beam_display_names_raw_literals():
    from sackli.beam._display import describe_compression

    raw = sackli.CompressionZstd(level=1, literals="raw")
    assert describe_compression(raw, writing=True) == "zstd level 1, raw literals"
    assert describe_compression(raw, writing=False) == "zstd"
    assert describe_compression(sackli.CompressionZstd(), writing=True) == "zstd level 3"
