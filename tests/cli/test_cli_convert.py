"""`sackli convert` between bags, TFRecord, JSON Lines and text
(sackli/cli/_convert.py, _endpoints.py): formats, resharding, existing
destinations, gzip, interrupted runs."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import sackli
from cli_helpers import (  # registered by conftest.py
    tfrecord_spec, RECORDS, ok, fails, write_bag, bag, _corrupt_set,
)


# --- convert ------------------------------------------------------------------


def test_crc32c_check_value() -> None:
    assert tfrecord_spec.crc32c(b"123456789") == 0xE3069283


def test_convert_reads_a_hand_built_tfrecord(tmp_path) -> None:
    records = [b"", b"x", bytes(range(256)), b"y" * 70_000]
    (tmp_path / "in.tfrecord").write_bytes(tfrecord_spec.write(records))
    assert ok("convert", "in.tfrecord", "out.bagz", cwd=tmp_path) == (
        b"converted 4 records from in.tfrecord to out.bagz\n")
    assert sackli.Reader(tmp_path / "out.bagz").read() == records


def test_convert_rejects_a_tfrecord_with_a_bad_crc(tmp_path) -> None:
    data = bytearray(tfrecord_spec.write([b"hello", b"world"]))
    data[-5] ^= 1  # last byte of "world"
    (tmp_path / "in.tfrecord").write_bytes(bytes(data))
    assert fails("convert", "in.tfrecord", "out.bag", cwd=tmp_path) == (
        "sackli: error: in.tfrecord: bad TFRecord data CRC32C (byte offset 33)")
    assert not (tmp_path / "out.bag").exists()
    assert not (tmp_path / "limits.out.bag").exists()


def test_convert_writes_a_tfrecord_by_the_spec(bag) -> None:
    ok("convert", "small.bagz", "out.tfrecord", cwd=bag)
    assert tfrecord_spec.read((bag / "out.tfrecord").read_bytes()) == RECORDS
    ok("convert", "small.bagz", "out.tfrecord.gz", cwd=bag)
    ok("convert", "out.tfrecord.gz", "back.bag", cwd=bag)
    assert sackli.Reader(bag / "back.bag").read() == RECORDS


def test_convert_json_lines_and_text_round_trip(bag) -> None:
    # Record 4 is not UTF-8: JSON Lines holds it only with the opt-in convention.
    assert "record 4 is not UTF-8 text" in fails("convert", "small.bagz", "out.jsonl", cwd=bag)
    assert not (bag / "out.jsonl").exists()
    ok("convert", "small.bagz", "out.jsonl", "--jsonl-base64", cwd=bag)
    assert (bag / "out.jsonl").read_bytes() == (
        b'"alpha"\n""\n"caf\xc3\xa9"\n"line\\nbreak"\n{"base64": "//4="}\n')
    ok("convert", "out.jsonl", "back.bagz", "--jsonl-base64", cwd=bag)
    assert sackli.Reader(bag / "back.bagz").read() == RECORDS
    # Without the flag a {"base64": ...} line is a JSON object like any other:
    # the file is not all strings, so each record is its line's JSON text.
    ok("convert", "out.jsonl", "kept.bagz", cwd=bag)
    assert sackli.Reader(bag / "kept.bagz").read() == (bag / "out.jsonl").read_bytes().splitlines()
    assert "applies to JSON Lines" in fails("convert", "small.bagz", "x.bag", "--jsonl-base64",
                                            cwd=bag, status=2)  # a wrong argument
    assert fails("convert", "small.bagz", "out.txt", cwd=bag) == (
        "sackli: error: out.txt: record 3 contains a newline and cannot be written as one "
        "line of text; use .jsonl or .tfrecord")
    assert not (bag / "out.txt").exists()
    (bag / "lines.txt").write_bytes(b"first\n\nthird\n")
    ok("convert", "lines.txt", "lines.bag", cwd=bag)
    assert sackli.Reader(bag / "lines.bag").read() == [b"first", b"", b"third"]


def test_convert_recompresses_and_changes_placement(tmp_path) -> None:
    records = [b"%d" % i * 50 for i in range(1000)]
    write_bag(tmp_path / "in.bag", records)
    ok("convert", "in.bag", "out.bagz", "--level", "19", "--output-limits-placement", "SEPARATE",
       cwd=tmp_path)
    assert (tmp_path / "limits.out.bagz").stat().st_size == 8000
    out = sackli.Reader(tmp_path / "out.bagz", limits_placement="SEPARATE")
    assert out.read() == records
    ok("convert", "out.bagz", "back.bag", "--limits-placement", "SEPARATE", cwd=tmp_path)
    assert (tmp_path / "back.bag").read_bytes() == (tmp_path / "in.bag").read_bytes()


def test_convert_reshards_into_n_even_runs(tmp_path) -> None:
    for shard, size in enumerate([4, 0, 6]):
        write_bag(tmp_path / f"in-{shard:05d}-of-00003.bagz", [b"%d:%d" % (shard, i) for i in range(size)])
    assert ok("convert", "in@*.bagz", "out@4.bag", cwd=tmp_path) == (
        b"converted 10 records from in@*.bagz to 4 shards, out-00000-of-00004.bag ... "
        b"out-00003-of-00004.bag\n")
    sizes = [len(sackli.Reader(tmp_path / f"out-{s:05d}-of-00004.bag")) for s in range(4)]
    assert sizes == [3, 3, 2, 2]
    assert sackli.Reader(tmp_path / "out@4.bag").read() == sackli.Reader(tmp_path / "in@3.bagz").read()


def test_convert_reshards_by_size(tmp_path) -> None:
    records = [b"r" * 100] * 95
    write_bag(tmp_path / "in.bag", records)
    # 100 bytes + 8 of limits per record: 9 records fit in 1000 bytes.
    ok("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1000", cwd=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out"))
    assert names == [f"out-{s:05d}-of-00011.bag" for s in range(11)]
    sizes = [len(sackli.Reader(tmp_path / name)) for name in names]
    assert sizes == [9] * 10 + [5]
    assert all((tmp_path / name).stat().st_size <= 1000 for name in names)
    assert sackli.Reader(tmp_path / "out@*.bag").read() == records


def test_convert_empty_source_by_size_makes_one_empty_shard(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [])
    ok("convert", "in.bag", "out@*.bagz", "--max-shard-bytes", "100", cwd=tmp_path)
    assert (tmp_path / "out-00000-of-00001.bagz").stat().st_size == 0


def test_convert_failure_from_a_corrupt_source_leaves_nothing(tmp_path) -> None:
    _corrupt_set(tmp_path)
    line = fails("convert", "c-00000-of-00003.bag,c-00001-of-00003.bag", "out@*.bagz", "--max-shard-bytes", "1000", cwd=tmp_path)
    assert line.startswith("sackli: error: c-00001-of-00003.bag: limit of record 1 is 1")
    assert [p.name for p in tmp_path.iterdir() if "out" in p.name] == []


# --- convert: existing destinations, bag names, gzip --------------------------


def test_convert_refuses_to_overwrite_without_force(bag) -> None:
    ok("convert", "small.bagz", "out.jsonl", "--jsonl-base64", cwd=bag)
    (bag / "out.jsonl").write_bytes(b"precious\n")
    assert fails("convert", "small.bagz", "out.jsonl", "--jsonl-base64", cwd=bag) == (
        "sackli: error: out.jsonl exists; pass --force to overwrite it")
    assert (bag / "out.jsonl").read_bytes() == b"precious\n"
    ok("convert", "small.bagz", "out.jsonl", "--force", "--jsonl-base64", cwd=bag)
    assert (bag / "out.jsonl").read_bytes().startswith(b'"alpha"\n')
    # A bag's limits file counts: it may hold an interrupted write to recover.
    (bag / "limits.out.bag").write_bytes(b"")
    assert fails("convert", "small.bagz", "out.bag", cwd=bag) == (
        "sackli: error: out.bag: limits.out.bag exist(s); pass --force to overwrite")


def test_convert_refuses_existing_shards(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"r" * 100] * 30)
    ok("convert", "in.bag", "out@3.bag", cwd=tmp_path)
    assert fails("convert", "in.bag", "out@3.bag", cwd=tmp_path) == (
        "sackli: error: out@3.bag: out-00000-of-00003.bag and 2 more file(s) exist(s); "
        "pass --force to overwrite")
    # name@*: any shard of that name is in the way, whatever the count.
    assert fails("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1kB", cwd=tmp_path) == (
        "sackli: error: out@*.bag: out-00000-of-00003.bag and 2 more file(s) exist(s); "
        "pass --force to overwrite")
    # --force replaces the set: the old count's shards go, so out@* finds one set.
    ok("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1kB", "--force", cwd=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out"))
    assert names == [f"out-{i:05d}-of-00004.bag" for i in range(4)]
    assert len(sackli.Reader(tmp_path / "out@*.bag")) == 30


@pytest.mark.parametrize("name", ["x.parquet", "x", "x.bagz.tmp", "x@4.parquet", "x@*.txt"])
def test_write_table_refuses_names_that_are_not_bags(tmp_path, name) -> None:
    import pyarrow as pa

    import sackli.arrow

    with pytest.raises(ValueError, match=r"names end in \.bag \(raw records\) or \.bagz \(zstd\)"):
        sackli.arrow.write_table(pa.table({"a": [1]}), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_write_table_accepts_bag_names(tmp_path) -> None:
    import pyarrow as pa

    import sackli.arrow

    table = pa.table({"a": [1, 2]})
    for name in ["x.bag", "y.bagz", "z@2.bagz", f"posix:{tmp_path}/w.bag"]:
        sackli.arrow.write_table(table, name if name.startswith("posix:") else tmp_path / name)
    assert sackli.arrow.write_table(table, tmp_path / "s@*.bag", max_shard_bytes=1 << 20) == [
        str(tmp_path / "s-00000-of-00001.bag")]


def test_gzip_level(tmp_path) -> None:
    import gzip

    records = [b"%d words and some text that compresses %d" % (i, i % 7) for i in range(20_000)]
    write_bag(tmp_path / "in.bag", records)
    ok("convert", "in.bag", "six.tfrecord.gz", cwd=tmp_path)
    ok("convert", "in.bag", "one.tfrecord.gz", "--gzip-level", "1", cwd=tmp_path)
    ok("convert", "in.bag", "nine.jsonl.gz", "--gzip-level", "9", cwd=tmp_path)
    six, one = (tmp_path / "six.tfrecord.gz").read_bytes(), (tmp_path / "one.tfrecord.gz").read_bytes()
    assert gzip.decompress(six) == gzip.decompress(one) == tfrecord_spec.write(records)
    assert len(one) > len(six)
    assert gzip.decompress((tmp_path / "nine.jsonl.gz").read_bytes()).count(b"\n") == len(records)
    ok("convert", "six.tfrecord.gz", "back.bag", cwd=tmp_path)
    assert sackli.Reader(tmp_path / "back.bag").read() == records
    assert fails("convert", "in.bag", "x.tfrecord", "--gzip-level", "3", cwd=tmp_path,
                 status=2) == ("sackli convert: error: --gzip-level applies to .gz destinations "
                               "only (see 'sackli convert --help')")


def test_killed_convert_leaves_no_shard_under_a_final_name(tmp_path) -> None:
    """kill -9 in the middle of `convert big.bagz 'k@8.bagz'` used to leave a
    few complete shards and an empty one, which a glob took for a set."""
    with sackli.ShardedWriter(tmp_path / "big.bagz") as writer:
        writer.write_many(b"%09d" % i * 12 for i in range(400_000))
    process = subprocess.Popen([sys.executable, "-m", "sackli", "convert", "big.bagz", "k@8.bagz"],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = 60.0
        while deadline > 0 and len(list(tmp_path.glob(".sackli-convert-*"))) < 3:
            assert process.poll() is None, "convert finished before it could be interrupted"
            deadline -= 0.005
            time.sleep(0.005)
    finally:
        process.kill()
        process.wait()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["big.bagz"]
    # Run again, to the end: the set appears whole, the leftovers of the
    # killed run are hidden files that no glob of the set matches.
    assert ok("convert", "big.bagz", "k@8.bagz", cwd=tmp_path).startswith(b"converted 400000 records")
    assert len(sackli.Reader(tmp_path / "k@*.bagz")) == 400_000
