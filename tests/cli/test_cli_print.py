"""`sackli head`, `cat` and `get` (sackli/cli/_print.py): formats, reading
options, control characters, broken pipes and corrupt records."""

from __future__ import annotations

import json
import subprocess

import pytest

import sackli
from cli_helpers import (  # registered by conftest.py
    sackli_cli, ok, fails, write_bag, bag,
)


# --- printing -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["cat", "small.bagz"], b"alpha\n\ncaf\xc3\xa9\nline\\nbreak\n\\xff\\xfe\n"),
        (["cat", "small.bagz", "--format", "raw"], b"alphacaf\xc3\xa9line\nbreak\xff\xfe"),
        (["cat", "small.bagz", "--format", "hex"], b"616c706861\n\n636166c3a9\n6c696e650a627265616b\nfffe\n"),
        (["cat", "small.bagz", "--format", "json"],
         b'"alpha"\n""\n"caf\xc3\xa9"\n"line\\nbreak"\n{"base64": "//4="}\n'),
        (["cat", "small.bagz", "--range=-2:"], b"line\\nbreak\n\\xff\\xfe\n"),
        (["cat", "small.bagz", "--range", ":1"], b"alpha\n"),
        (["cat", "small.bagz", "--indices", "2,0,2"], b"caf\xc3\xa9\nalpha\ncaf\xc3\xa9\n"),
        (["head", "small.bagz", "-n", "2", "--format", "json"], b'"alpha"\n""\n'),
        (["head", "small.bagz"], b"alpha\n\ncaf\xc3\xa9\nline\\nbreak\n\\xff\\xfe\n"),
        (["get", "small.bagz", "-1", "--format", "raw"], b"\xff\xfe"),
        (["get", "small.bagz", "0"], b"alpha\n"),
        (["count", "small.bagz"], b"5\n"),
    ],
)
def test_printing(bag, args, expected) -> None:
    assert ok(*args, cwd=bag) == expected


def test_reading_options_apply_to_every_reader(tmp_path) -> None:
    for shard in range(2):
        write_bag(tmp_path / f"s-{shard:05d}-of-00002.bag", [b"%d:%d" % (shard, i) for i in range(2)],
                  limits_placement=sackli.LimitsPlacement.SEPARATE)
    options = ["--limits-placement", "SEPARATE", "--layout", "INTERLEAVED"]
    assert ok("cat", "s@2.bag", *options, cwd=tmp_path) == b"0:0\n1:0\n0:1\n1:1\n"
    assert ok("count", "s@*.bag", *options, cwd=tmp_path) == b"4\n"
    assert ok("get", "s@2.bag", "1", *options, cwd=tmp_path) == b"1:0\n"
    assert ok("verify", "s@2.bag", *options, cwd=tmp_path) == (
        b"verify: OK, 4 records in 2 shard(s); structure only: no record carries a checksum "
        b"(raw records, or zstd frames written without one), so damaged bytes would go "
        b"unnoticed\n")


def test_dictionary_option(tmp_path) -> None:
    dictionary = b"a shared zstd dictionary of raw content " * 20
    (tmp_path / "dict").write_bytes(dictionary)
    lines = b"zstd dictionary of raw content a shared\nof raw content a shared zstd dictionary\n"
    (tmp_path / "in.txt").write_bytes(lines)
    ok("convert", "in.txt", "d.bagz", "--dictionary", "dict", cwd=tmp_path)
    assert ok("cat", "d.bagz", "--dictionary", "dict", cwd=tmp_path) == lines
    assert fails("cat", "d.bagz", cwd=tmp_path).startswith("sackli: error: index 0: d.bagz: record 0")


def test_broken_pipe_ends_quietly(tmp_path) -> None:
    write_bag(tmp_path / "big.bag", (b"%08d" % i for i in range(300_000)))
    cat = subprocess.Popen(["sackli", "cat", "big.bag", "--format", "raw"], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.run(["head", "-c", "10"], stdin=cat.stdout, capture_output=True)
    cat.stdout.close()
    assert cat.wait(timeout=60) == 141  # 128 + SIGPIPE, as a shell reports it
    assert cat.stderr.read() == b""
    assert head.stdout == b"0000000000"


# --- control characters -------------------------------------------------------


def test_text_output_escapes_control_characters(tmp_path) -> None:
    records = [b"\x1b[31mred\x1b[0m", b"bell\x07 nul\x00 del\x7f", "c1 \u009b2J".encode(),
               b"tab\tstays", b"cr\r\nlf", "caf\u00e9 \u2603".encode()]
    write_bag(tmp_path / "ctl.bag", records)
    assert ok("cat", "ctl.bag", cwd=tmp_path) == (
        b"\\x1b[31mred\\x1b[0m\n"
        b"bell\\x07 nul\\x00 del\\x7f\n"
        b"c1 \\u009b2J\n"
        b"tab\tstays\n"
        b"cr\\r\\nlf\n"
        + "caf\u00e9 \u2603\n".encode())
    json_lines = ok("cat", "ctl.bag", "--format", "json", cwd=tmp_path)
    assert b"\x1b" not in json_lines and b"\x7f" not in json_lines
    assert "\u009b".encode() not in json_lines
    assert [json.loads(line).encode() for line in json_lines.splitlines()] == records
    assert ok("get", "ctl.bag", "0", cwd=tmp_path) == b"\\x1b[31mred\\x1b[0m\n"
    assert ok("get", "ctl.bag", "0", "--format", "raw", cwd=tmp_path) == records[0]


# --- corrupt records in cat and head ------------------------------------------


def _bag_with_corrupt_records(folder, corrupt: list[int]) -> dict[int, int]:
    """c.bagz: records b"record 0" ... b"record 9", those in `corrupt` damaged
    (their zstd magic overwritten); returns their byte offsets."""
    path = folder / "c.bagz"
    write_bag(path, [b"record %d" % i for i in range(10)])
    raw = sackli.Reader(path, compression=sackli.CompressionNone())
    sizes = [len(r) for r in raw.read()]
    raw.close()
    data = bytearray(path.read_bytes())
    offsets = {index: sum(sizes[:index]) for index in corrupt}
    for offset in offsets.values():
        data[offset:offset + 4] = b"XXXX"
    path.write_bytes(bytes(data))
    return offsets


def test_cat_prints_the_records_before_a_corrupt_one_then_fails(tmp_path) -> None:
    offsets = _bag_with_corrupt_records(tmp_path, [3])
    result = sackli_cli("cat", "c.bagz", "--range", "0:10", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == b"record 0\nrecord 1\nrecord 2\n"
    assert result.stderr.decode().splitlines() == [
        f"sackli: error: index 3: c.bagz: record 3 is corrupt: not a zstd frame (byte offset "
        f"{offsets[3]}) (--skip-corrupt goes on past it)"]
    head = sackli_cli("head", "c.bagz", "-n", "5", cwd=tmp_path)
    assert (head.returncode, head.stdout) == (1, b"record 0\nrecord 1\nrecord 2\n")


def test_skip_corrupt_goes_on_and_reports_what_it_skipped(tmp_path) -> None:
    offsets = _bag_with_corrupt_records(tmp_path, [3, 7])
    result = sackli_cli("cat", "c.bagz", "--skip-corrupt", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == b"".join(b"record %d\n" % i for i in range(10) if i not in (3, 7))
    assert result.stderr.decode().splitlines() == [
        f"sackli: skipped index 3: c.bagz: record 3 is corrupt: not a zstd frame (byte offset {offsets[3]})",
        f"sackli: skipped index 7: c.bagz: record 7 is corrupt: not a zstd frame (byte offset {offsets[7]})",
        "sackli: skipped 2 corrupt record(s) of 10",
    ]
    # Indices in the bag, also for a range, --indices and head.
    ranged = sackli_cli("cat", "c.bagz", "--range", "5:9", "--skip-corrupt", cwd=tmp_path)
    assert ranged.stdout == b"record 5\nrecord 6\nrecord 8\n"
    assert ranged.stderr.decode().splitlines()[0].startswith("sackli: skipped index 7: ")
    chosen = sackli_cli("cat", "c.bagz", "--indices", "-3,9,0", "--skip-corrupt", "--format", "json",
                        cwd=tmp_path)
    assert chosen.stdout == b'"record 9"\n"record 0"\n'
    assert chosen.stderr.decode().splitlines()[0].startswith("sackli: skipped index 7: ")
    head = sackli_cli("head", "c.bagz", "-n", "3", "--skip-corrupt", cwd=tmp_path)
    assert (head.returncode, head.stdout, head.stderr) == (0, b"record 0\nrecord 1\nrecord 2\n", b"")


def test_indices_out_of_range_fail_before_printing(bag) -> None:
    result = sackli_cli("cat", "small.bagz", "--indices", "0,5", cwd=bag)
    assert (result.returncode, result.stdout) == (2, b"")  # a wrong argument for this bag
    assert result.stderr == (b"sackli cat: error: index 5 out of range for a reader of 5 records "
                             b"(see 'sackli cat --help')\n")
