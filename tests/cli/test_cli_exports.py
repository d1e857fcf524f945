"""`sackli convert` exports that give back what went in (issue 31, section
4), and its one-line errors for a wrong `--column` and a full disk
(section 3): sackli/cli/_convert.py, _parquet.py, _json_records.py and
sackli/formats/lines.py."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
import sys

import pytest

import sackli
from cli_helpers import RECORDS, bag, fails, ok, write_bag  # noqa: F401 (bag: a fixture)

# Every kind of JSON value, and text that looks like JSON inside a string.
_JSON_LINES = [
    '{"id": 1, "name": "caf\u00e9", "tags": ["a", "b"], "nested": {"x": null}}',
    "42",
    "-3.5e-7",
    "null",
    "true",
    "[1, [2, 3], {}]",
    '"a string"',
    '"42"',
    '"{\\"looks\\": \\"like an object\\"}"',
    '{"big": 123456789012345678901234567890, "float": 0.1000000000000000055511151231257827}',
]


def _write_lines(path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _values(path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- JSON Lines -> bag -> JSON Lines -------------------------------------------


def test_json_values_survive_a_round_trip_through_a_bag(tmp_path) -> None:
    _write_lines(tmp_path / "in.jsonl", _JSON_LINES)
    ok("convert", "in.jsonl", "x.bag", cwd=tmp_path)
    # Each record is its line's JSON text (a string keeps its quotes) ...
    assert sackli.Reader(tmp_path / "x.bag").read() == [line.encode() for line in _JSON_LINES]
    # ... and the companion file beside the bag says so.
    assert json.loads((tmp_path / "x.bag.record_format").read_text()) == {"records": "json"}
    ok("convert", "x.bag", "out.jsonl", cwd=tmp_path)
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines() == _JSON_LINES
    assert _values(tmp_path / "out.jsonl") == _values(tmp_path / "in.jsonl")


def test_json_values_survive_shard_sets_and_resharding(tmp_path) -> None:
    lines = _JSON_LINES * 5
    _write_lines(tmp_path / "in.jsonl", lines)
    ok("convert", "in.jsonl", "x@4.bag", cwd=tmp_path)
    assert (tmp_path / "x-of-00004.bag.record_format").exists()
    for source in ("x@4.bag", "x@*.bag"):
        ok("convert", source, "out.jsonl", "--force", cwd=tmp_path)
        assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines() == lines
    # bag -> bag keeps the mark, by shard count and by size.
    ok("convert", "x@*.bag", "y.bagz", cwd=tmp_path)
    ok("convert", "y.bagz", "z@*.bag", "--max-shard-bytes", "400", cwd=tmp_path)
    ok("convert", "z@*.bag", "gz.jsonl.gz", cwd=tmp_path)
    ok("convert", "gz.jsonl.gz", "w.bag", cwd=tmp_path)
    ok("convert", "w.bag", "final.jsonl", cwd=tmp_path)
    assert (tmp_path / "final.jsonl").read_text(encoding="utf-8").splitlines() == lines


def test_a_file_of_strings_is_still_text(tmp_path) -> None:
    """Only strings: each record is the string's text, as before, and the
    bag has no mark (bag -> JSON Lines -> bag gives the same records)."""
    (tmp_path / "in.jsonl").write_text('"alpha"\n""\n"42"\n"line\\nbreak"\n', encoding="utf-8")
    ok("convert", "in.jsonl", "t.bag", cwd=tmp_path)
    assert sackli.Reader(tmp_path / "t.bag").read() == [b"alpha", b"", b"42", b"line\nbreak"]
    assert not (tmp_path / "t.bag.record_format").exists()
    ok("convert", "t.bag", "out.jsonl", cwd=tmp_path)
    assert _values(tmp_path / "out.jsonl") == ["alpha", "", "42", "line\nbreak"]


def test_a_bag_without_the_mark_keeps_todays_rule(bag) -> None:
    """Arbitrary records: UTF-8 text as JSON strings, anything else an error
    unless --jsonl-base64."""
    assert "record 4 is not UTF-8 text" in fails("convert", "small.bagz", "out.jsonl", cwd=bag)
    write_bag(bag / "objects.bag", [b'{"a": 1}', b"7"])
    ok("convert", "objects.bag", "out.jsonl", cwd=bag)
    assert _values(bag / "out.jsonl") == ['{"a": 1}', "7"]
    ok("convert", "small.bagz", "b64.jsonl", "--jsonl-base64", cwd=bag)
    ok("convert", "b64.jsonl", "back.bag", "--jsonl-base64", cwd=bag)
    assert sackli.Reader(bag / "back.bag").read() == RECORDS
    assert not (bag / "back.bag.record_format").exists()


def test_a_replaced_bag_loses_a_stale_mark(tmp_path) -> None:
    _write_lines(tmp_path / "in.jsonl", ['{"a": 1}'])
    ok("convert", "in.jsonl", "x.bag", cwd=tmp_path)
    (tmp_path / "in.txt").write_text('{"a": 1}\n')
    ok("convert", "in.txt", "x.bag", "--force", cwd=tmp_path)
    assert not (tmp_path / "x.bag.record_format").exists()
    # So does a row bag's schema file.
    import sackli.arrow

    sackli.arrow.write_table(_rows_table(), str(tmp_path / "r.bag"))
    ok("convert", "in.txt", "r.bag", "--force", cwd=tmp_path)
    assert not (tmp_path / "r.bag.arrow_schema").exists()
    ok("convert", "x.bag", "out.jsonl", cwd=tmp_path)
    assert _values(tmp_path / "out.jsonl") == ['{"a": 1}']


def test_a_marked_record_that_is_not_json_is_an_error(tmp_path) -> None:
    _write_lines(tmp_path / "in.jsonl", ['{"a": 1}'])
    ok("convert", "in.jsonl", "x.bag", cwd=tmp_path)
    write_bag(tmp_path / "x.bag", [b'{"a": 1}', b"{not json"])
    line = fails("convert", "x.bag", "out.jsonl", cwd=tmp_path)
    assert line.startswith("sackli: error: out.jsonl: record 1 is not JSON text (")
    assert line.endswith("), though the bag is marked as holding JSON texts; write every record "
                         "as a JSON string with --decode raw (json_texts=False)")
    assert not (tmp_path / "out.jsonl").exists()
    ok("convert", "x.bag", "raw.jsonl", "--decode", "raw", cwd=tmp_path)
    assert _values(tmp_path / "raw.jsonl") == ['{"a": 1}', "{not json"]


def test_json_lines_formats_api(tmp_path) -> None:
    """sackli.formats: which way a file reads, and JSON texts both ways."""
    from sackli import formats

    strings, mixed = tmp_path / "strings.jsonl", tmp_path / "mixed.jsonl"
    strings.write_text('"a"\n\n  "b"\n', encoding="utf-8")
    mixed.write_text('"a"\n{"b": 2}\n', encoding="utf-8")
    assert formats.holds_only_strings([strings])
    assert not formats.holds_only_strings([strings, mixed])
    assert list(formats.read_json_lines(mixed, json_texts=True)) == [b'"a"', b'{"b": 2}']
    out = tmp_path / "out.jsonl"
    with formats.JsonLinesWriter(out, json_texts=True) as writer:
        writer.write_many([b'"a"', b' {"b": 2} ', b'{\n  "c": [1,\n 2]\n}'])
    assert out.read_text(encoding="utf-8") == '"a"\n{"b": 2}\n{"c": [1, 2]}\n'


# --- row bags -> JSON Lines -----------------------------------------------------


def _rows_table():
    import pyarrow as pa

    return pa.table({
        "id": pa.array(range(50), pa.int64()),
        "price": pa.array([i / 4 if i % 7 else None for i in range(50)], pa.float64()),
        "name": pa.array([f"item {i}" for i in range(50)]),
        "tags": pa.array([[i % 3, i % 5] for i in range(50)], pa.list_(pa.int32())),
    })


@pytest.mark.parametrize("encoding", ["row", "arrow", "json"])
def test_row_bags_export_one_object_per_row(tmp_path, encoding) -> None:
    import sackli.arrow

    table = _rows_table()
    sackli.arrow.write_table(table, str(tmp_path / "rows@2.bagz"), encoding=encoding)
    ok("convert", "rows@*.bagz", "out.jsonl", cwd=tmp_path)
    assert _values(tmp_path / "out.jsonl") == table.to_pylist()
    # The same lines as head --format json prints.
    shown = ok("cat", "rows@*.bagz", "--format", "json", cwd=tmp_path)
    assert (tmp_path / "out.jsonl").read_bytes() == shown
    # And back: a bag of JSON objects, which exports the same lines.
    ok("convert", "out.jsonl", "back.bag", cwd=tmp_path)
    ok("convert", "back.bag", "again.jsonl", cwd=tmp_path)
    assert (tmp_path / "again.jsonl").read_bytes() == shown


def test_bag_to_bag_keeps_rows(tmp_path) -> None:
    """Resharding a row bag carries its schema file: the rows stay rows."""
    import sackli.arrow

    table = _rows_table()
    sackli.arrow.write_table(table, str(tmp_path / "rows@2.bagz"))
    ok("convert", "rows@*.bagz", "re@3.bag", cwd=tmp_path)
    assert ok("head", "re@*.bag", "-n", "100", "--format", "json", cwd=tmp_path) == ok(
        "head", "rows@*.bagz", "-n", "100", "--format", "json", cwd=tmp_path)
    ok("convert", "re@3.bag", "out.jsonl", cwd=tmp_path)
    assert _values(tmp_path / "out.jsonl") == table.to_pylist()


def test_parquet_rows_export_to_json_lines(tmp_path) -> None:
    import pyarrow.parquet as pq

    table = _rows_table()
    pq.write_table(table, tmp_path / "events.parquet")
    ok("convert", "events.parquet", "rows@3.bagz", cwd=tmp_path)
    ok("convert", "rows@3.bagz", "out.jsonl.gz", cwd=tmp_path)
    ok("convert", "out.jsonl.gz", "plain.jsonl", cwd=tmp_path)
    ok("convert", "plain.jsonl", "p.bag", cwd=tmp_path)
    ok("convert", "p.bag", "p.jsonl", cwd=tmp_path)
    assert _values(tmp_path / "p.jsonl") == table.to_pylist()
    # --decode raw: the records as they are (Arrow rows are bytes, not text).
    assert "is not UTF-8 text" in fails(
        "convert", "rows@3.bagz", "raw.jsonl", "--decode", "raw", cwd=tmp_path)


# --- --column: one-line usage errors -------------------------------------------


def test_convert_column_errors_are_one_line(tmp_path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(_rows_table(), tmp_path / "events.parquet")
    assert fails("convert", "events.parquet", "p.bag", "--column", "nope", cwd=tmp_path,
                 status=2) == (
        "sackli convert: error: --column nope: events.parquet has no such column (columns: "
        "id, price, name, tags) (see 'sackli convert --help')")
    assert fails("convert", "events.parquet", "p.bag", "--column", "price", cwd=tmp_path,
                 status=2) == (
        "sackli convert: error: --column price: the column is double, and only a binary or "
        "string column can be written as records; leave --column out to write whole rows "
        "(see 'sackli convert --help')")
    assert not (tmp_path / "p.bag").exists()


# --- a full disk ----------------------------------------------------------------

_ROOM = 64 << 10  # bytes the small disk holds


@contextlib.contextmanager
def _tmpfs(folder):
    """`folder` as a tmpfs of _ROOM bytes (pytest.skip when we may not mount one)."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={_ROOM}", "tmpfs", str(folder)],
                             capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


# Runs the command after it in a process whose writes past _ROOM bytes of one
# file fail with EFBIG (SIGXFSZ ignored, so a write returns the error instead
# of killing). An exec wrapper, not a preexec_fn: Python code between fork and
# exec in a pytest process whose earlier tests started gRPC's threads can
# abort the child (gRPC's poller finds its descriptors gone).
_LIMIT_FILE_SIZE = (
    "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "room = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (room, room)); "
    "os.execvp(sys.argv[2], sys.argv[2:])")


@pytest.fixture(params=["tmpfs", "rlimit"])
def small_disk(request, tmp_path):
    """(folder, prefix, errno): a folder where writes fail for real once past
    _ROOM bytes, the command prefix that runs `sackli` so, and the error the kernel gives:
    ENOSPC on a full tmpfs, or EFBIG past RLIMIT_FSIZE (needs no root)."""
    folder = tmp_path / "small"
    if request.param == "tmpfs":
        with _tmpfs(folder):
            yield folder, [], errno.ENOSPC
        return
    folder.mkdir()
    yield folder, [sys.executable, "-c", _LIMIT_FILE_SIZE, str(_ROOM)], errno.EFBIG


def _incompressible_sources(folder) -> None:
    """src.bag, src.jsonl and src.parquet of 2000 random hex strings (about
    400 kB: well past _ROOM even compressed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [os.urandom(100).hex().encode() for _ in range(2000)]
    write_bag(folder / "src.bag", records)
    _write_lines(folder / "src.jsonl", [json.dumps(r.decode()) for r in records])
    pq.write_table(pa.table({"text": [r.decode() for r in records]}), folder / "src.parquet")


@pytest.mark.parametrize(("source", "target"), [
    ("src.bag", "out.bag"),
    ("src.bag", "out.bagz"),
    ("src.bag", "out@3.bagz"),
    ("src.jsonl", "out@3.bag"),  # through the spool
    ("src.bag", "out@*.bag"),
    ("src.bag", "out.jsonl"),
    ("src.bag", "out.jsonl.gz"),
    ("src.bag", "out.tfrecord"),
    ("src.bag", "out.tfrecord.gz"),
    ("src.bag", "out.txt"),
    ("src.parquet", "out.bagz"),
    ("src.bag", "out.parquet"),
])
def test_a_full_disk_names_the_target(tmp_path, small_disk, source, target) -> None:
    folder, prefix, expected = small_disk
    _incompressible_sources(tmp_path)
    extra = ["--max-shard-bytes", "1MB"] if "@*" in target else []
    result = subprocess.run(
        [*prefix, "sackli", "convert", str(tmp_path / source), target, *extra], cwd=folder,
        capture_output=True, timeout=60)
    assert result.returncode == 1, result.stderr.decode()
    assert _own_lines(result.stderr.decode()) == [
        f"sackli: error: {target}: {os.strerror(expected)}"]
    assert os.listdir(folder) == []  # nothing half-written is left behind


# A log line of gRPC (inside pyarrow's GCS file system, loaded with
# pyarrow.parquet), which now and then reports its poller at exit:
# "E1127 10:00:44.732790   14229 ev_epoll1_linux.cc:373] ...".
_THIRD_PARTY_LOG = re.compile(r"[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] ")


def _own_lines(stderr: str) -> list[str]:
    """The lines of stderr that sackli wrote."""
    return [line for line in stderr.splitlines() if not _THIRD_PARTY_LOG.match(line)]


def test_head_cat_and_get_print_a_json_marked_bag_as_its_values(tmp_path):
    # As the bag's JSON Lines export writes them: values, not JSON strings.
    _write_lines(tmp_path / "in.jsonl", ['{"a": 1}', "42", '"x"', "null", "[1, 2]"])
    ok("convert", "in.jsonl", "x.bag", cwd=tmp_path)
    values = [{"a": 1}, 42, "x", None, [1, 2]]
    for args in (["head", "x.bag"], ["cat", "x.bag"], ["cat", "x.bag", "--indices", "0,4"]):
        printed = ok(*args, "--format", "json", cwd=tmp_path).decode().splitlines()
        expected = values if "--indices" not in args else [values[0], values[4]]
        assert [json.loads(line) for line in printed] == expected
    assert json.loads(ok("get", "x.bag", "0", "--format", "json", cwd=tmp_path)) == {"a": 1}
    # --decode raw prints the stored texts as JSON strings, as before.
    raw = ok("cat", "x.bag", "--format", "json", "--decode", "raw", cwd=tmp_path)
    assert json.loads(raw.decode().splitlines()[0]) == '{"a": 1}'
