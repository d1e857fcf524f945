"""TFRecord written and read from its specification alone, to check sackli
against: entries of u64 length, masked CRC-32C of the length, data, masked
CRC-32C of the data. Slow, plain Python, independent of sackli."""

from __future__ import annotations

import struct


def crc32c(data: bytes) -> int:
    """CRC-32C from its definition (reflected, polynomial 0x82F63B78)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write(records: list[bytes]) -> bytes:
    """The bytes of a TFRecord file holding `records`."""
    out = bytearray()
    for record in records:
        length = struct.pack("<Q", len(record))
        out += length + struct.pack("<I", masked_crc32c(length))
        out += record + struct.pack("<I", masked_crc32c(record))
    return bytes(out)


def read(data: bytes) -> list[bytes]:
    """The records of a TFRecord file; AssertionError on any CRC mismatch."""
    records, offset = [], 0
    while offset < len(data):
        length_bytes = data[offset : offset + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        assert struct.unpack("<I", data[offset + 8 : offset + 12])[0] == masked_crc32c(length_bytes)
        record = data[offset + 12 : offset + 12 + length]
        assert len(record) == length
        stored = struct.unpack("<I", data[offset + 12 + length : offset + 16 + length])[0]
        assert stored == masked_crc32c(record)
        records.append(record)
        offset += 16 + length
    return records
