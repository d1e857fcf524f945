"""The `.bagz` writer's memory (issue 49): a record of 16 MiB or more is
compressed from the caller's buffer, not copied into a batch, and its frame
is the one bagz writes; whatever `max_parallelism` is, what the writer holds
for it is its compressed frame. benchmarks/write_memory.py measures the
figures; these check the behaviour."""

from __future__ import annotations

import json
import os
import random

import bagz
import pytest

import sackli

LARGE = 16 << 20  # native/bagz/writer.h, Writer::kLargeRecordBytes


def _record(size: int, seed: int) -> bytes:
    """Half random, half repetitive: zstd halves it."""
    half = size // 2
    return random.Random(seed).randbytes(half) + (b"large record " * (size // 13 + 1))[: size - half]


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "write_many"])
def test_large_records_are_the_bytes_bagz_writes(tmp_path, kind) -> None:
    records = [b"small before", _record(LARGE, 1), b"", _record(LARGE + 5, 2)[: LARGE + 1], b"after"]
    sackli_path, bagz_path = tmp_path / "s.bagz", tmp_path / "b.bagz"
    # checksum=False: bagz's frames carry no content checksum.
    with sackli.Writer(sackli_path, max_parallelism=2, checksum=False) as writer:
        if kind == "write_many":
            writer.write_many(records)
        else:
            convert = {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview}[kind]
            for record in records:
                writer.write(convert(record))
    with bagz.Writer(str(bagz_path)) as writer:
        for record in records:
            writer.write(record)
    assert sackli_path.read_bytes() == bagz_path.read_bytes()
    assert list(sackli.Reader(sackli_path)) == records


PEAK = """
    import json, random, sackli
    size = {size}
    record = random.Random(3).randbytes(size // 2) + b"x" * (size - size // 2)
    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    open("/proc/self/clear_refs", "w").write("5")  # the peak from here on
    before = status("VmRSS")
    with sackli.Writer("out.bagz", compression=sackli.CompressionZstd(level=1),
                       max_parallelism={parallelism}) as writer:
        for _ in range(3):
            writer.write(record)
    print(json.dumps(status("VmHWM") - before))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="Linux's peak-RSS reset")
@pytest.mark.parametrize("parallelism", [1, 8])
def test_large_records_are_not_held_whole(run_python, tmp_path, parallelism) -> None:
    # Before: a copy of each record and a zero-filled frame buffer as large,
    # for up to 2 x max_parallelism records (4 records' size and more here).
    # Now: one frame, half the record (half of it is random), and zstd's
    # context, whatever max_parallelism is.
    size = 2 * LARGE
    result = run_python(PEAK.format(size=size, parallelism=parallelism))
    assert result.returncode == 0, result.stderr
    extra = json.loads(result.stdout.strip().splitlines()[-1])
    assert extra < 0.75 * size, f"the writer held {extra / 2**20:.1f} MiB for records of {size >> 20} MiB"
    assert (tmp_path / "out.bagz").stat().st_size > 0
