"""`-` as standard input and output (`sackli cat -`, `sackli convert - ...
--from FORMAT`, `sackli convert ... - --to FORMAT`), and the byte-counting
progress bars of convert's TFRecord, JSON Lines and text sources."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time

import pytest

import sackli
from cli_helpers import on_terminal as run_on_terminal  # registered by conftest.py
from cli_helpers import tfrecord_spec, write_bag

RECORDS = [b"alpha", b"", b"caf\xc3\xa9", b"omega"]


def run(*args: str, cwd, stdin: bytes = b"", env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["sackli", *args], cwd=cwd, input=stdin, capture_output=True,
                          timeout=60, env=env)


def ok(*args: str, cwd, stdin: bytes = b"", env=None) -> bytes:
    result = run(*args, cwd=cwd, stdin=stdin, env=env)
    assert (result.returncode, result.stderr) == (0, b""), result.stderr.decode()
    return result.stdout


def usage_error(*args: str, cwd, stdin: bytes = b"") -> str:
    """Runs a command with a wrong argument: exit status 2, one line."""
    result = run(*args, cwd=cwd, stdin=stdin)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr
    return stderr.strip()


def bag_bytes(tmp_path, name: str, records=RECORDS, **options) -> bytes:
    write_bag(tmp_path / name, records, **options)
    return (tmp_path / name).read_bytes()


# --- sackli cat - (and head, get, count): a bag on standard input ------------------------


@pytest.mark.parametrize("name", ["piped.bag", "piped.bagz"])
def test_cat_reads_a_bag_from_standard_input(tmp_path, name) -> None:
    data = bag_bytes(tmp_path, name)
    os.remove(tmp_path / name)
    temporary = tmp_path.with_name(tmp_path.name + "-tmp")
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    printed = ok("cat", "-", "--format", "json", cwd=tmp_path, stdin=data, env=env)
    assert os.listdir(temporary) == []  # the copy of standard input is gone at exit
    assert [json.loads(line) for line in printed.splitlines()] == ["alpha", "", "café", "omega"]
    assert ok("count", "-", cwd=tmp_path, stdin=data) == b"4\n"
    assert ok("head", "-n", "1", "-", cwd=tmp_path, stdin=data) == b"alpha\n"
    assert ok("get", "-", "-1", cwd=tmp_path, stdin=data) == b"omega\n"
    assert os.listdir(tmp_path) == []  # the spool lives in a temporary folder


def test_cat_of_standard_input_that_is_no_bag_says_standard_input(tmp_path) -> None:
    result = run("cat", "-", cwd=tmp_path, stdin=b"not a bag at all")
    assert result.returncode == 1
    line = result.stderr.decode().strip()
    assert line.startswith("sackli: error: - (standard input):"), line
    assert "tmp" not in line


def test_standard_input_cannot_have_separate_limits(tmp_path) -> None:
    line = usage_error("cat", "-", "--limits-placement", "SEPARATE", cwd=tmp_path)
    assert "standard input" in line


# --- sackli convert - DST --from FORMAT -------------------------------------------------


def test_convert_reads_json_lines_from_standard_input(tmp_path) -> None:
    ok("convert", "-", "out.bag", "--from", "jsonl", cwd=tmp_path, stdin=b'"a"\n"b"\n"c"\n')
    assert sackli.Reader(tmp_path / "out.bag").read() == [b"a", b"b", b"c"]


def test_convert_reads_tfrecords_from_standard_input_into_shards(tmp_path) -> None:
    data = tfrecord_spec.write(RECORDS)
    ok("convert", "-", "out@2.bagz", "--from", "tfrecord", cwd=tmp_path, stdin=data)
    assert sackli.Reader(tmp_path / "out@2.bagz").read() == RECORDS


def test_convert_reads_a_bag_from_standard_input(tmp_path) -> None:
    data = bag_bytes(tmp_path, "in.bagz")
    ok("convert", "-", "out.bag", "--from", "bag", cwd=tmp_path, stdin=data)
    assert sackli.Reader(tmp_path / "out.bag").read() == RECORDS


# --- sackli convert SRC - --to FORMAT ---------------------------------------------------


def test_convert_writes_json_lines_to_standard_output(tmp_path) -> None:
    write_bag(tmp_path / "in.bagz", [b"a", b"caf\xc3\xa9"])
    assert ok("convert", "in.bagz", "-", "--to", "jsonl", cwd=tmp_path) == (
        '"a"\n"café"\n'.encode())
    assert os.listdir(tmp_path) == ["in.bagz"]


@pytest.mark.parametrize(("kind", "name"), [("tfrecord", "x.tfrecord"), ("text", "x.txt")])
def test_convert_writes_the_same_bytes_to_standard_output_as_to_a_file(tmp_path, kind, name) -> None:
    write_bag(tmp_path / "in.bagz", [b"a", b"", b"last"])
    ok("convert", "in.bagz", name, cwd=tmp_path)
    assert ok("convert", "in.bagz", "-", "--to", kind, cwd=tmp_path) == (tmp_path / name).read_bytes()


def test_convert_from_standard_input_to_standard_output(tmp_path) -> None:
    assert ok("convert", "-", "-", "--from", "jsonl", "--to", "text", cwd=tmp_path,
              stdin=b'"a"\n"b"\n') == b"a\nb\n"


# --- Wrong arguments: exit status 2 ---------------------------------------------------------


def test_standard_input_needs_from_and_standard_output_needs_to(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"a"])
    assert "--from" in usage_error("convert", "-", "out.bag", cwd=tmp_path)
    assert "--to" in usage_error("convert", "in.bag", "-", cwd=tmp_path)


def test_from_and_to_apply_to_dash_only(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"a"])
    line = usage_error("convert", "in.bag", "out.bag", "--from", "bag", cwd=tmp_path)
    assert "--from" in line and "standard input" in line
    line = usage_error("convert", "in.bag", "out.txt", "--to", "text", cwd=tmp_path)
    assert "--to" in line and "standard output" in line


def test_bags_and_parquet_cannot_go_to_standard_output(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"a"])
    line = usage_error("convert", "in.bag", "-", "--to", "bag", cwd=tmp_path)
    assert "--to" in line and "invalid choice" in line


# --- Progress of TFRecord, JSON Lines and text sources: bytes, with a total and an ETA -----


def on_terminal(*args: str, cwd, feed=None) -> tuple[int, str]:
    """Runs the CLI with stderr on a pseudo-terminal and stdout to a pipe;
    `feed(stdin)` writes standard input. Returns (status, what the terminal
    showed)."""
    status, _, shown = run_on_terminal(*args, cwd=cwd, feed=feed)
    return status, shown


@pytest.mark.parametrize("name", ["in.jsonl", "in.tfrecord", "in.tfrecord.gz", "in.txt"])
def test_file_sources_show_bytes_with_a_total_and_an_eta(tmp_path, name) -> None:
    records = [b"record %d" % i for i in range(5000)]
    write_bag(tmp_path / "source.bag", records)
    subprocess.run(["sackli", "convert", "source.bag", name], cwd=tmp_path, check=True)
    size = (tmp_path / name).stat().st_size
    status, shown = on_terminal("convert", name, "out.bag", cwd=tmp_path)
    assert status == 0, shown
    # The first frame: 0 of the file's size in bytes, the ETA still unknown.
    total = re.escape(_size(size))
    assert re.search(rf"convert:   0%\|[^|]*\| 0\.00B/{total} \[00:00<\?", shown), shown
    assert shown.endswith("\r")  # erased when done
    assert sackli.Reader(tmp_path / "out.bag").read() == records


def _size(size: int) -> str:
    """tqdm's spelling of a byte count (unit_scale, powers of 1000)."""
    from tqdm import tqdm

    return tqdm.format_sizeof(size, "B", 1000)


def test_a_slow_source_updates_the_bar_every_second(tmp_path) -> None:
    os.mkfifo(tmp_path / "slow.txt")  # a source that trickles in over 2.5 seconds

    def trickle(_stdin) -> None:
        with open(tmp_path / "slow.txt", "wb") as fifo:
            for i in range(6):
                fifo.write(b"line %d\n" % i)
                fifo.flush()
                time.sleep(0.5)

    writer = threading.Thread(target=trickle, args=(None,))
    writer.start()
    status, shown = on_terminal("convert", "slow.txt", "out.bag", cwd=tmp_path)
    writer.join()
    assert status == 0, shown
    # Frames while the bytes trickle in: elapsed 00:01 and 00:02 both shown.
    assert "[00:01" in shown and "[00:02" in shown, shown
    assert sackli.Reader(tmp_path / "out.bag").read() == [b"line %d" % i for i in range(6)]


def test_standard_input_shows_the_bytes_read_every_second(tmp_path) -> None:
    def trickle(stdin) -> None:
        for i in range(6):
            stdin.write(b'"line %d"\n' % i)
            stdin.flush()
            time.sleep(0.5)

    status, shown = on_terminal("convert", "-", "out.bag", "--from", "jsonl", cwd=tmp_path,
                                feed=trickle)
    assert status == 0, shown
    assert "[00:01" in shown and "[00:02" in shown, shown
    assert sackli.Reader(tmp_path / "out.bag").read() == [b"line %d" % i for i in range(6)]
