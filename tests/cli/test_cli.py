"""The `sackli` console script, run as a real subprocess: help, arguments,
usage errors and sizes (sackli/cli/__init__.py, _commands.py, _arguments.py)."""

from __future__ import annotations


import pytest

import sackli
from cli_helpers import (  # registered by conftest.py
    sackli_cli, ok, fails, write_bag, bag,
)


# --- help and arguments -------------------------------------------------------


def test_help_lists_every_command(tmp_path) -> None:
    text = ok("--help", cwd=tmp_path).decode()
    for command in ["info", "count", "head", "cat", "get", "verify", "recover", "convert", "demo"]:
        assert f"\n    {command} " in text
        sub = ok(command, "--help", cwd=tmp_path).decode()
        assert "example:\n  sackli " + command in sub


def test_python_dash_m_runs_the_same_cli(bag) -> None:
    result = sackli_cli("count", "small.bagz", cwd=bag, module=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"5\n", b"")


@pytest.mark.parametrize(
    ("args", "status", "line"),
    [
        (["count", "missing.bag"], 1,
         "sackli: error: missing.bag: open: No such file or directory"),
        # Wrong arguments, even when only the bag shows it: status 2.
        (["get", "small.bagz", "5"], 2,
         "sackli get: error: index 5 out of range for a reader of 5 records "
         "(see 'sackli get --help')"),
        (["cat", "small.bagz", "--range", "1-2"], 2,
         "sackli cat: error: argument --range: '1-2' is not A:B (e.g. 10:20, :5 or -3:) "
         "(see 'sackli cat --help')"),
        (["cat", "small.bagz", "--indices", "1,x"], 2,
         "sackli cat: error: argument --indices: '1,x' is not a comma-separated list of integers "
         "(see 'sackli cat --help')"),
        (["head", "small.bagz", "-n", "-1"], 2,
         "sackli head: error: argument -n: must be >= 0, not -1 (see 'sackli head --help')"),
        (["count", "."], 1,
         "sackli: error: .: a directory, but not a dataset: it holds neither spec.json (a dataset "
         "shard) nor 000000/spec.json (a sharded dataset)"),
        (["convert", "in.parquet", "out.bag"], 1,
         "sackli: error: in.parquet: no such Parquet file or folder"),
        (["convert", "in.parquet", "out.jsonl"], 2,
         "sackli convert: error: Parquet converts to and from bags (.bag, .bagz) only "
         "(see 'sackli convert --help')"),
        (["convert", "small.bagz", "out.parquet", "--column", "x"], 2,
         "sackli convert: error: --column and --skip-nulls apply to Parquet sources "
         "(see 'sackli convert --help')"),
        (["convert", "small.bagz", "out.jsonl", "--encoding", "json"], 2,
         "sackli convert: error: --column, --skip-nulls, --encoding and --decode apply to Parquet "
         "conversions only (and --decode to bag -> JSON Lines) (see 'sackli convert --help')"),
        (["convert", "small.bagz", "out.csv"], 2,
         "sackli convert: error: out.csv: cannot tell the format from the name (known: .bag, "
         ".bagz, .jsonl, .jsonl.gz, .ndjson, .parquet, .tfrecord, .tfrecord.gz, .tfrecords, "
         ".tfrecords.gz, .txt, .txt.gz) (see 'sackli convert --help')"),
        (["convert", "small.bagz", "small.bagz"], 2,
         "sackli convert: error: small.bagz is both source and destination; write elsewhere "
         "(see 'sackli convert --help')"),
        (["convert", "small.bagz", "out.bag", "--level", "9"], 2,
         "sackli convert: error: --level and --output-dictionary apply to .bagz destinations "
         "only (see 'sackli convert --help')"),
        (["convert", "small.bagz", "out@*.bag"], 2,
         "sackli convert: error: use --max-shard-bytes with a name@*.ext destination, and only "
         "then (see 'sackli convert --help')"),
        (["recover", "small.bagz"], 1,
         "sackli: error: small.bagz: nothing to recover: no limits.small.bagz and no "
         "unfinished write (.small.bagz.sackli-partial-*) beside it (the write "
         "completed, or it was never started)"),
        (["recover", "absent.bagz"], 1, "sackli: error: absent.bagz: no such file"),
        (["frobnicate"], 2, None),
        (["get", "small.bagz", "x"], 2,
         "sackli get: error: argument INDEX: invalid int value: 'x' (see 'sackli get --help')"),
    ],
)
def test_errors_are_one_line(bag, args, status, line) -> None:
    got = fails(*args, cwd=bag, status=status)
    if line is not None:
        assert got == line
    assert not (bag / "out.bag").exists()


# --- usage errors, option values and sizes ------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ([], "sackli: error: the following arguments are required: COMMAND (see 'sackli --help')"),
        (["frobnicate"], "sackli: error: argument COMMAND: invalid choice: 'frobnicate' (choose from "
                         "'info', 'schema', 'count', 'head', 'cat', 'get', 'verify', 'recover', 'clean', "
                         "'convert', 'demo') "
                         "(see 'sackli --help')"),
        (["cat"], "sackli cat: error: the following arguments are required: SPEC "
                  "(see 'sackli cat --help')"),
        (["cat", "small.bagz", "--format", "xml"],
         "sackli cat: error: argument --format: invalid choice: 'xml' (choose from 'text', 'raw', "
         "'hex', 'json') (see 'sackli cat --help')"),
        (["cat", "small.bagz", "--bogus"],
         "sackli: error: unrecognized arguments: --bogus (see 'sackli --help')"),
        (["convert", "small.bagz", "out@*.bag", "--max-shard-bytes", "20XB"],
         "sackli convert: error: argument --max-shard-bytes: '20XB' is not a size: write a number "
         "of bytes, optionally with a unit: kB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB (x1024), "
         "e.g. 20MB or 1GiB (see 'sackli convert --help')"),
        (["convert", "small.bagz", "out.tfrecord.gz", "--gzip-level", "10"],
         "sackli convert: error: argument --gzip-level: invalid choice: 10 (choose from 0, 1, 2, 3, "
         "4, 5, 6, 7, 8, 9) (see 'sackli convert --help')"),
    ],
)
def test_usage_errors_are_one_line_with_status_2(bag, args, line) -> None:
    result = sackli_cli(*args, cwd=bag)
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode().splitlines() == [line]


def test_negative_ranges_and_indices_need_no_equals_sign(bag) -> None:
    assert ok("cat", "small.bagz", "--range", "-2:", cwd=bag) == b"line\\nbreak\n\\xff\\xfe\n"
    assert ok("cat", "small.bagz", "--range", "-4:-3", cwd=bag) == b"\n"
    assert ok("cat", "small.bagz", "--indices", "-1,0", "--format", "hex", cwd=bag) == b"fffe\n616c706861\n"
    assert ok("cat", "--range", "-1:", "small.bagz", cwd=bag) == b"\\xff\\xfe\n"


@pytest.mark.parametrize(
    ("text", "size"),
    [("1000", 1000), ("20MB", 20_000_000), ("20mb", 20_000_000), ("1GiB", 1 << 30),
     ("1gib", 1 << 30), ("1.5kB", 1500), ("2 KiB", 2048), ("7b", 7), ("1TB", 10**12),
     ("0.5MiB", 1 << 19), ("3PiB", 3 << 50)],
)
def test_sizes_take_decimal_and_binary_units(text, size) -> None:
    from sackli.cli._arguments import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "20XB", "1e6", "-5", "20 M B", "1,000", "20k"])
def test_sizes_refuse_anything_else(text) -> None:
    import argparse

    from sackli.cli._arguments import parse_size

    with pytest.raises(argparse.ArgumentTypeError, match="is not a size"):
        parse_size(text)


def test_max_shard_bytes_takes_units(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"r" * 100] * 95)
    ok("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1kB", cwd=tmp_path)
    assert len(sackli.Reader(tmp_path / "out@*.bag").paths) == 11  # 9 records per 1000 bytes
