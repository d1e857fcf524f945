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
