"""sackli.formats: TFRecord and line formats, checked against their specs."""

from __future__ import annotations

import gzip
import struct

import pytest

import sackli
from sackli import formats
from sackli.formats import tfrecord

# TFRecord bytes of [b"", b"a", b"hello world"], computed with the plain-Python
# spec implementation in tests/tfrecord_spec.py (entries: u64 length, masked
# CRC-32C of the length, data, masked CRC-32C of the data).
SPEC_VECTOR = bytes.fromhex(
    "0000000000000000" "29039807" "" "d8ea82a2"
    "0100000000000000" "0175de41" "61" "786ee428"
    "0b00000000000000" "8615f504" "68656c6c6f20776f726c64" "007ed86d"
)
SPEC_RECORDS = [b"", b"a", b"hello world"]


RECORDS = [b"", b"a", b"hello world", bytes(range(256)) * 3]


def test_crc32c_check_value() -> None:
    assert tfrecord.crc32c(b"123456789") == 0xE3069283
    assert formats.masked_crc32c(b"123456789") == 0xC78AB0E5


def _tfrecord(records: list[bytes]) -> bytes:
    """TFRecord bytes written with the (checked) masked CRC of sackli.formats."""
    out = b""
    for record in records:
        length = struct.pack("<Q", len(record))
        out += length + struct.pack("<I", formats.masked_crc32c(length)) + record
        out += struct.pack("<I", formats.masked_crc32c(record))
    return out


def test_writer_matches_spec_bytes(tmp_path) -> None:
    path = tmp_path / "x.tfrecord"
    with formats.TFRecordWriter(path) as writer:
        writer.write_many(SPEC_RECORDS)
    assert path.read_bytes() == SPEC_VECTOR
    assert writer.records_written == 3
    assert _tfrecord(SPEC_RECORDS) == SPEC_VECTOR


def test_reader_reads_spec_file_and_gzip(tmp_path) -> None:
    (tmp_path / "x.tfrecord").write_bytes(_tfrecord(RECORDS))
    (tmp_path / "x.tfrecord.gz").write_bytes(gzip.compress(_tfrecord(RECORDS)))
    (tmp_path / "vector.tfrecord").write_bytes(SPEC_VECTOR)
    assert list(formats.read_tfrecords(tmp_path / "vector.tfrecord")) == SPEC_RECORDS
    assert list(formats.read_tfrecords(tmp_path / "x.tfrecord")) == RECORDS
    assert list(formats.read_tfrecords(tmp_path / "x.tfrecord.gz")) == RECORDS


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:-2], "truncated TFRecord file: a CRC needs 4 bytes, 2 left (byte offset 45)"),
        (lambda data: data[:5], "truncated TFRecord header: 5 of 12 bytes (byte offset 0)"),
        (lambda data: data[:12] + b"X" + data[13:], "bad TFRecord data CRC32C (byte offset 12)"),
        (lambda data: b"\x02" + data[1:], "bad TFRecord length CRC32C (byte offset 0)"),
    ],
)
def test_reader_reports_corruption(tmp_path, damage, message) -> None:
    path = tmp_path / "x.tfrecord"
    path.write_bytes(damage(_tfrecord([b"hello", b"world, again"])))
    with pytest.raises(sackli.CorruptionError) as caught:
        list(formats.read_tfrecords(path))
    assert str(caught.value) == f"{path}: {message}"


def test_json_lines_round_trip(tmp_path) -> None:
    records = [b"plain", "caf\u00e9\n".encode(), b"\xff\x00bin", b""]
    path = tmp_path / "x.jsonl"
    with formats.JsonLinesWriter(path, base64=True) as writer:
        writer.write_many(records)
    assert path.read_text(encoding="utf-8") == '"plain"\n"café\\n"\n{"base64": "/wBiaW4="}\n""\n'
    assert list(formats.read_json_lines(path, base64=True)) == records


def test_json_lines_base64_convention_is_opt_in(tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    with formats.JsonLinesWriter(path) as writer:
        writer.write(b"text")
        with pytest.raises(ValueError, match=r"x\.jsonl: record 1 is not UTF-8 text"):
            writer.write(b"\xff")
    # A user's own {"base64": ...} object is kept as it is.
    path.write_bytes(b'{"base64": "aGk="}\n"s"\n')
    assert list(formats.read_json_lines(path)) == [b'{"base64": "aGk="}', b"s"]
    assert list(formats.read_json_lines(path, base64=True)) == [b"hi", b"s"]


def test_json_lines_keeps_other_values_as_text(tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  [1, 2] \n7\n')
    assert list(formats.read_json_lines(path)) == [b'{"a": 1}', b"[1, 2]", b"7"]
    path.write_bytes(b'"ok"\n{broken\n')
    with pytest.raises(sackli.CorruptionError, match=r"x\.jsonl: line 2 is not a JSON Lines record"):
        list(formats.read_json_lines(path))


def test_text_lines(tmp_path) -> None:
    path = tmp_path / "x.txt"
    with formats.TextLinesWriter(path) as writer:
        writer.write_many([b"one", b"", b"three"])
        with pytest.raises(ValueError, match="record 3 contains a newline"):
            writer.write(b"bad\nrecord")
    assert path.read_bytes() == b"one\n\nthree\n"
    path.write_bytes(b"a\nb")  # no final newline
    assert list(formats.read_text_lines(path)) == [b"a", b"b"]


# --- gzip -------------------------------------------------------------------------


def _gzip_records(count: int) -> list[bytes]:
    return [b"record %d of a gzip test, with words repeated %d" % (i, i % 9) for i in range(count)]


@pytest.mark.parametrize("level", [0, 1, 6, 9])
def test_gzip_writer_levels(tmp_path, level) -> None:
    records = _gzip_records(50_000)  # several 1 MiB blocks
    path = tmp_path / "x.tfrecord.gz"
    with formats.TFRecordWriter(path, gzip_level=level) as writer:
        writer.write_many(records[:10])
        writer.write_many(records[10:])
    expected = b"".join(_tfrecord([record]) for record in records)
    assert gzip.decompress(path.read_bytes()) == expected
    assert list(formats.read_tfrecords(path)) == records
    assert writer.records_written == len(records)
    assert writer.bytes_written == len(expected)


def test_gzip_output_is_deterministic_and_smaller_at_higher_levels(tmp_path) -> None:
    records = _gzip_records(20_000)
    sizes = {}
    for level in (1, 6):
        for name in ("a", "b"):
            with formats.JsonLinesWriter(tmp_path / f"{name}{level}.jsonl.gz", gzip_level=level) as writer:
                writer.write_many(records)
        first, second = (tmp_path / f"a{level}.jsonl.gz").read_bytes(), (tmp_path / f"b{level}.jsonl.gz").read_bytes()
        assert first == second  # no file name or time in the header
        sizes[level] = len(first)
    assert sizes[6] < sizes[1]


def test_gzip_level_out_of_range(tmp_path) -> None:
    with pytest.raises(ValueError, match="gzip level must be 0-9, not 10"):
        formats.TextLinesWriter(tmp_path / "x.txt.gz", gzip_level=10)


def test_text_writer_error_keeps_the_records_before_it(tmp_path) -> None:
    path = tmp_path / "x.txt.gz"
    with formats.TextLinesWriter(path) as writer:
        with pytest.raises(ValueError, match="record 2 contains a newline"):
            writer.write_many([b"a", b"b", b"c\nd", b"e"])
    assert gzip.decompress(path.read_bytes()) == b"a\nb\n"
    assert writer.records_written == 2


def test_gzip_library_falls_back_to_the_standard_library(run_python) -> None:
    """Without zlib-ng, the standard library's zlib writes and reads the same
    format (zlib-ng is optional)."""
    outcome = run_python("""
        import gzip, sys
        sys.modules["zlib_ng"] = None  # as if it were not installed
        from sackli import formats
        with formats.TFRecordWriter("x.tfrecord.gz") as writer:
            writer.write_many([b"one", b"two"])
        report(lambda: (formats.gzip_library(), list(formats.read_tfrecords("x.tfrecord.gz")),
                        gzip.decompress(open("x.tfrecord.gz", "rb").read())[12:15]))
    """).outcome()
    assert outcome == {"ok": repr(("zlib", [b"one", b"two"], b"one"))}


def test_gzip_library_uses_zlib_ng_when_installed() -> None:
    pytest.importorskip("zlib_ng")
    assert formats.gzip_library() == "zlib-ng"
