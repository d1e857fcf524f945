"""TFRecord files, read and written natively.

A TFRecord file is a sequence of entries, each:

    uint64  length            (little-endian)
    uint32  masked_crc32c(length bytes)
    bytes   data[length]
    uint32  masked_crc32c(data)

where masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2**32)
and crc is the CRC-32C (Castagnoli) of x. Files named `*.gz` are gzip
streams of the same bytes (TensorFlow's GZIP compression type).
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO, Iterator

import google_crc32c

from .. import CorruptionError
from ._files import RecordFileWriter, display_name, open_binary

__all__ = ["TFRecordWriter", "crc32c", "masked_crc32c", "read_tfrecords"]

_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEADER_BYTES = _LENGTH.size + _CRC.size


def crc32c(data: bytes) -> int:
    """The CRC-32C (Castagnoli) of `data`."""
    return google_crc32c.value(data)


def masked_crc32c(data: bytes) -> int:
    """The masked CRC-32C that TFRecord stores after the length and the data."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _read_exactly(stream: BinaryIO, size: int, path: str, offset: int, what: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise CorruptionError(
            f"{path}: truncated TFRecord file: {what} needs {size} bytes, "
            f"{len(data)} left (byte offset {offset})"
        )
    return data


def _check_crc(data: bytes, stored: bytes, path: str, offset: int, what: str) -> None:
    if _CRC.unpack(stored)[0] != masked_crc32c(data):
        raise CorruptionError(f"{path}: bad TFRecord {what} CRC32C (byte offset {offset})")


def read_tfrecords(path: str | os.PathLike[str], verify_crc: bool = True) -> Iterator[bytes]:
    """Iterates over the records of a TFRecord file (gzip if named `*.gz`).

    Raises sackli.CorruptionError, naming the file and byte offset (in the
    uncompressed stream), for a truncated entry or a CRC mismatch.
    """
    name = display_name(path)  # a path, or an open binary stream
    with open_binary(path, "rb") as stream:
        offset = 0
        while True:
            header = stream.read(_HEADER_BYTES)
            if not header:
                return
            if len(header) < _HEADER_BYTES:
                raise CorruptionError(
                    f"{name}: truncated TFRecord header: {len(header)} of "
                    f"{_HEADER_BYTES} bytes (byte offset {offset})"
                )
            length_bytes, length_crc = header[: _LENGTH.size], header[_LENGTH.size :]
            if verify_crc:
                _check_crc(length_bytes, length_crc, name, offset, "length")
            (length,) = _LENGTH.unpack(length_bytes)
            data_offset = offset + _HEADER_BYTES
            data = _read_exactly(stream, length, name, data_offset, "a record")
            data_crc = _read_exactly(stream, _CRC.size, name, data_offset + length, "a CRC")
            if verify_crc:
                _check_crc(data, data_crc, name, data_offset, "data")
            yield data
            offset = data_offset + length + _CRC.size


class TFRecordWriter(RecordFileWriter):
    """Writes records to a TFRecord file (gzip if named `*.gz`).

    Example:
      >>> with TFRecordWriter("out.tfrecord") as writer:
      ...     writer.write_many([b"a", b"b"])
    """

    def _encode(self, record: bytes) -> bytes:
        length = _LENGTH.pack(len(record))
        return b"".join(
            (length, _CRC.pack(masked_crc32c(length)), record, _CRC.pack(masked_crc32c(record)))
        )
