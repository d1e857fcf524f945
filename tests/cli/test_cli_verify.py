"""`sackli verify` (sackli/cli/_verify.py)."""

from __future__ import annotations

import sackli
from cli_helpers import (  # registered by conftest.py
    sackli_cli, ok, write_bag, bag, _corrupt_set,
)


# --- verify -------------------------------------------------------------------


def test_verify_clean(bag) -> None:
    assert ok("verify", "small.bagz", cwd=bag) == (
        b"verify: OK, 5 records in 1 shard(s); every record checked against its zstd checksum\n")


def test_verify_says_what_only_decoded(tmp_path) -> None:
    write_bag(tmp_path / "old.bagz", [b"a" * 100, b"", b"b" * 50], checksum=False)
    write_bag(tmp_path / "new.bagz", [b"c" * 100])
    write_bag(tmp_path / "raw.bag", [b"d"])
    assert ok("verify", "old.bagz", cwd=tmp_path).decode() == (
        "verify: OK, 3 records in 1 shard(s); 1 checked against their zstd checksum, "
        "2 for structure only (raw records, or zstd frames written without a checksum)\n")
    assert "structure only: no record carries a checksum" in ok("verify", "raw.bag", cwd=tmp_path).decode()


def test_verify_reports_a_checksum_mismatch(tmp_path) -> None:
    path = tmp_path / "z.bagz"
    write_bag(path, [b"record %d " % i * 40 for i in range(3)])
    data = bytearray(path.read_bytes())
    data[len(data) // 4] ^= 0x20
    path.write_bytes(bytes(data))
    result = sackli_cli("verify", "z.bagz", cwd=tmp_path)
    assert result.returncode == 1
    assert "z.bagz: record 0 is corrupt: its zstd content checksum does not match" in result.stdout.decode()


def test_verify_reports_every_problem(tmp_path) -> None:
    result = sackli_cli("verify", "c@3.bag", cwd=_corrupt_set(tmp_path))
    assert result.returncode == 1
    assert result.stderr == b""
    assert result.stdout.decode().splitlines() == [
        "global index 4 (shard 1, record 1): c-00001-of-00003.bag: limit of record 1 is 1, "
        "smaller than the previous limit 3 (10 bytes) (byte offset 18)",
        "shard 2 cannot be opened: c-00002-of-00003.bag: the last 8 bytes do not point at a "
        "limits section (not a bag with TAIL limits, or truncated) (byte offset 23)",
        "verify: 2 problem(s) in c@3.bag",
    ]


def test_verify_fail_fast(tmp_path) -> None:
    result = sackli_cli("verify", "c@3.bag", "--fail-fast", cwd=_corrupt_set(tmp_path))
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[1:] == ["verify: stopped at the first problem (--fail-fast)"]


def test_verify_finds_each_bad_record_in_a_large_compressed_bag(tmp_path) -> None:
    write_bag(tmp_path / "z.bagz", (b"record %d" % i for i in range(10_000)))
    path = tmp_path / "z.bagz"
    reader = sackli.Reader(path)
    sizes = [len(f) for f in sackli.Reader(path, compression=sackli.CompressionNone()).read_range(0, 10)]
    reader.close()
    offset_of_7 = sum(sizes[:7])
    data = bytearray(path.read_bytes())
    data[0:4] = b"XXXX"  # record 0: not a zstd frame
    data[offset_of_7 : offset_of_7 + 4] = b"YYYY"  # record 7
    path.write_bytes(bytes(data))
    lines = sackli_cli("verify", "z.bagz", cwd=tmp_path).stdout.decode().splitlines()
    assert lines == [
        "global index 0 (shard 0, record 0): z.bagz: record 0 is corrupt: not a zstd frame (byte offset 0)",
        f"global index 7 (shard 0, record 7): z.bagz: record 7 is corrupt: not a zstd frame "
        f"(byte offset {offset_of_7})",
        "verify: 2 problem(s) in z.bagz",
    ]


# --- verify: raw bags with a CRC-32C sidecar ------------------------------------


def test_verify_checks_raw_records_against_their_sidecar(tmp_path) -> None:
    write_bag(tmp_path / "c.bag", [b"record %d" % i for i in range(30)], record_checksums=True)
    assert ok("verify", "c.bag", cwd=tmp_path) == (
        b"verify: OK, 30 records in 1 shard(s); every record checked against its "
        b"CRC-32C sidecar\n")
    data = bytearray((tmp_path / "c.bag").read_bytes())
    data[12] ^= 0x04  # in record 1
    (tmp_path / "c.bag").write_bytes(bytes(data))
    result = sackli_cli("verify", "c.bag", cwd=tmp_path)
    assert result.returncode == 1
    assert ("global index 1 (shard 0, record 1): c.bag: record 1 is corrupt: its bytes do not "
            "match its CRC-32C in c.bag.crc32c") in result.stdout.decode()


def test_verify_checks_the_sidecar_itself(tmp_path) -> None:
    """What a read does not look at: the sidecar's own CRC, and the CRC of
    the limits it recorded (a damaged limit that moves no record)."""
    write_bag(tmp_path / "c.bag", [b"a", b"", b"b"], record_checksums=True)
    sidecar = tmp_path / "c.bag.crc32c"
    data = bytearray(sidecar.read_bytes())
    data[-5] ^= 0x01  # the recorded CRC of the limits
    sidecar.write_bytes(bytes(data))
    result = sackli_cli("verify", "c.bag", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.decode().splitlines()
    assert lines[:2] == [
        "shard 0: c.bag.crc32c: its own CRC-32C does not match: the sidecar is damaged",
        "shard 0: c.bag.crc32c: the CRC-32C of c.bag's limits does not match the one it "
        "recorded: the limits are damaged (or the sidecar is)"]


def test_verify_says_how_a_mixed_set_was_checked(tmp_path) -> None:
    write_bag(tmp_path / "m-00000-of-00002.bag", [b"x", b"y"], record_checksums=True)
    write_bag(tmp_path / "m-00001-of-00002.bag", [b"z"])
    assert ok("verify", "m@2.bag", cwd=tmp_path).decode() == (
        "verify: OK, 3 records in 2 shard(s); 2 checked against their CRC-32C sidecar, "
        "1 for structure only (raw records, or zstd frames written without a checksum)\n")
