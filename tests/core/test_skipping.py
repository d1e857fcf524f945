"""Skipping damaged records (sackli._skipping): an explicit opt-in on scans
that leaves out records raising CorruptionError and reports each; strict
reads stay the default. Real corrupt files: records whose zstd frame was
overwritten, as a bad disk or a bad copy leaves them."""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

import sackli

N = 200
BAD = (0, 3, 4, 57, 199)  # first, neighbours, middle, last
RECORDS = [b"record %03d " % i * (1 + i % 5) for i in range(N)]
GOOD = [record for i, record in enumerate(RECORDS) if i not in BAD]
CACHES = pytest.mark.parametrize("cache", ["SYSTEM", "DROP_AFTER_READ"], ids=["mapped", "pread"])


def damaged_bag_bytes(records=RECORDS, bad=BAD) -> bytes:
    """A TAIL .bagz of `records` whose records `bad` are not zstd frames."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "x.bagz"
        with sackli.Writer(path) as writer:
            writer.write_many(records)
        data = bytearray(path.read_bytes())
    start = struct.unpack("<Q", data[-8:])[0]
    limits = struct.unpack(f"<{len(records)}Q", data[start:start + 8 * len(records)])
    for index in bad:
        begin = limits[index - 1] if index else 0
        data[begin:begin + 4] = b"BAD!"  # the zstd magic
    return bytes(data)


@pytest.fixture
def damaged(tmp_path) -> pathlib.Path:
    path = tmp_path / "damaged.bagz"
    path.write_bytes(damaged_bag_bytes())
    return path


def open_reader(path, cache):
    return sackli.Reader(path, cache_policy=getattr(sackli.CachePolicy, cache))


@CACHES
def test_strict_is_the_default(damaged, cache):
    reader = open_reader(damaged, cache)
    with pytest.raises(sackli.CorruptionError, match=r"damaged\.bagz: record 0 is corrupt.*byte offset 0"):
        reader.read()
    with pytest.raises(sackli.CorruptionError):
        reader.read_range(1, 5)
    with pytest.raises(sackli.CorruptionError):
        list(reader)
    for strict in (None, False):
        with pytest.raises(sackli.CorruptionError):
            reader.read_indices([57], skip_corrupt=strict)


@CACHES
def test_read_skips_and_reports(damaged, cache):
    reader = open_reader(damaged, cache)
    skipped = sackli.SkippedRecords()
    assert reader.read(skip_corrupt=skipped) == GOOD
    assert skipped.indices == list(BAD)
    assert len(skipped) == len(BAD)
    for (index, error), expected in zip(skipped, BAD):
        assert index == expected
        assert isinstance(error, sackli.CorruptionError)
        assert f"damaged.bagz: record {expected} is corrupt: not a zstd frame" in str(error)
    assert "5 skipped" in repr(skipped)


@CACHES
def test_ranges_and_iterators_skip(damaged, cache):
    reader = open_reader(damaged, cache)
    skipped = sackli.SkippedRecords()
    assert reader.read_range(2, 10, skip_corrupt=skipped) == [RECORDS[2]] + RECORDS[5:12]
    assert skipped.indices == [3, 4]
    for read_ahead in (None, 7):
        skipped = sackli.SkippedRecords()
        got = list(reader.read_range_iter(0, N, read_ahead, skip_corrupt=skipped))
        assert got == GOOD and skipped.indices == list(BAD)


@CACHES
def test_indices_skip_with_repeats_negatives_and_arrays(damaged, cache):
    reader = open_reader(damaged, cache)
    skipped = sackli.SkippedRecords()
    wanted = [5, -1, 57, 5, 3, -3]
    assert reader.read_indices(wanted, skip_corrupt=skipped) == [RECORDS[5], RECORDS[5], RECORDS[-3]]
    assert skipped.indices == [199, 57, 3]
    skipped = sackli.SkippedRecords()
    got = list(reader.read_indices_iter(iter(np.arange(N)), skip_corrupt=skipped))
    assert got == GOOD and skipped.indices == list(BAD)
    with pytest.raises(IndexError, match="index 200 out of range"):
        reader.read_indices([1, 200], skip_corrupt=skipped)


def test_a_view_reports_its_own_indices(damaged):
    view = sackli.Reader(damaged)[50:60]
    skipped = sackli.SkippedRecords()
    assert view.read(skip_corrupt=skipped) == RECORDS[50:57] + RECORDS[58:60]
    assert skipped.indices == [7]


def test_a_callback_sees_records_in_scan_order_and_may_stop(damaged):
    seen: list[tuple[str, int]] = []
    reader = sackli.Reader(damaged)
    for i, record in enumerate(reader.read_range_iter(
            0, 10, skip_corrupt=lambda skip: seen.append(("skip", skip.index)))):
        seen.append(("record", RECORDS.index(record)))
    assert seen == [("skip", 0), ("record", 1), ("record", 2), ("skip", 3), ("skip", 4)] + [
        ("record", i) for i in range(5, 10)]

    def stop(skip: sackli.SkippedRecord) -> None:
        raise RuntimeError(f"stop at {skip.index}")

    got = []
    with pytest.raises(RuntimeError, match="stop at 57"):
        for record in reader.read_range_iter(5, 100, skip_corrupt=stop):
            got.append(record)
    assert got == RECORDS[5:57]  # everything before the damaged record came out


def test_skip_corrupt_must_be_callable(damaged):
    with pytest.raises(TypeError, match="SkippedRecords"):
        sackli.Reader(damaged).read(skip_corrupt=True)


def test_an_undamaged_scan_reports_nothing(tmp_path):
    path = tmp_path / "fine.bagz"
    with sackli.Writer(path) as writer:
        writer.write_many(RECORDS)
    skipped = sackli.SkippedRecords()
    assert sackli.Reader(path).read(skip_corrupt=skipped) == RECORDS
    assert len(skipped) == 0 and skipped.indices == []


def test_a_file_truncated_under_the_reader_reports_the_missing_records(tmp_path):
    path = tmp_path / "x.bag"
    with sackli.Writer(path) as writer:
        writer.write_many([b"%05d" % i for i in range(N)])
    reader = sackli.Reader(path, cache_policy=sackli.CachePolicy.DROP_AFTER_READ,
                           limits_storage=sackli.LimitsStorage.IN_MEMORY)
    os.truncate(path, 5 * 120)  # records 120.. and the limits are gone
    skipped = sackli.SkippedRecords()
    assert reader.read(skip_corrupt=skipped) == [b"%05d" % i for i in range(120)]
    assert skipped.indices == list(range(120, N))
    assert "unexpected end of file (byte offset 600)" in str(skipped[0].error)


# --- The command line uses the library's scans ------------------------------------


def sackli_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sackli", *args], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONSAFEPATH": "1"})


def test_convert_skip_corrupt_copies_the_good_records(damaged):
    result = sackli_cli("convert", "damaged.bagz", "good@3.bag", "--skip-corrupt", cwd=damaged.parent)
    assert result.returncode == 1  # a script can tell a partial copy
    assert result.stderr.splitlines()[-1] == f"sackli: skipped {len(BAD)} corrupt record(s) of {N}"
    assert "sackli: skipped index 57: damaged.bagz: record 57 is corrupt" in result.stderr
    reader = sackli.Reader(damaged.parent / "good@3.bag")
    assert reader.read() == GOOD
    assert reader.shard_sizes == [65, 65, 65]  # split evenly, from the spool


def test_convert_without_skip_corrupt_fails_and_writes_nothing(damaged):
    result = sackli_cli("convert", "damaged.bagz", "out.jsonl", cwd=damaged.parent)
    assert result.returncode == 1
    assert "record 0 is corrupt" in result.stderr
    assert sorted(p.name for p in damaged.parent.iterdir()) == ["damaged.bagz"]


def test_convert_skip_corrupt_needs_a_bag_source(tmp_path):
    (tmp_path / "in.txt").write_text("a\n")
    result = sackli_cli("convert", "in.txt", "out.bag", "--skip-corrupt", cwd=tmp_path)
    assert result.returncode == 2 and "--skip-corrupt applies to bag sources" in result.stderr


def test_verify_reports_every_damaged_record(damaged):
    result = sackli_cli("verify", "damaged.bagz", cwd=damaged.parent)
    assert result.returncode == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("global index")]
    assert [line.split(" (")[0] for line in lines] == [f"global index {i}" for i in BAD]
    assert f"verify: {len(BAD)} problem(s)" in result.stdout


def test_cat_prints_up_to_the_damage_then_skips_with_the_flag(damaged):
    strict = sackli_cli("cat", "damaged.bagz", "--range", "1:10", cwd=damaged.parent)
    assert strict.returncode == 1
    assert strict.stdout.splitlines() == [RECORDS[1].decode(), RECORDS[2].decode()]
    assert "index 3: " in strict.stderr and "--skip-corrupt goes on past it" in strict.stderr
    skipping = sackli_cli("cat", "damaged.bagz", "--indices", "57,1,3", "--skip-corrupt",
                          cwd=damaged.parent)
    assert skipping.returncode == 1
    assert skipping.stdout.splitlines() == [RECORDS[1].decode()]
    assert "skipped index 57" in skipping.stderr and "skipped index 3" in skipping.stderr


def test_a_streams_position_counts_the_records_it_skipped(damaged):
    """A checkpoint taken after a skip resumes after it, not one record early."""
    reader = sackli.Reader(damaged)
    stream = reader.read_indices_iter(range(N), read_ahead=8, skip_corrupt=sackli.SkippedRecords())
    assert [next(stream) for _ in range(3)] == [RECORDS[1], RECORDS[2], RECORDS[5]]
    assert stream.position == 6  # indices 0-5 taken, three of them skipped
    later = reader.read_indices_iter(range(N), read_ahead=8, skip_corrupt=sackli.SkippedRecords())
    later.load_state_dict(stream.state_dict())
    assert [next(stream) for _ in range(3)] == [next(later) for _ in range(3)] == RECORDS[6:9]
