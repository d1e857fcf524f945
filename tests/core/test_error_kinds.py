"""Errors by one path: corruption is sackli.CorruptionError everywhere (the
Arrow decoders included, as the engine and the text formats), and the
command line hides only expected errors: a bug keeps its traceback."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest

import sackli
from sackli import cli

pa = pytest.importorskip("pyarrow")
import sackli.arrow  # noqa: E402


def write_records(path, records) -> None:
    with sackli.Writer(path) as writer:
        writer.write_many(records)


# --- Arrow: bad rows are corruption ---------------------------------------------


def test_json_rows_that_are_not_json_are_corruption(tmp_path):
    path = str(tmp_path / "mixed.bag")
    write_records(path, [b'{"a": 1}', b"not json"])
    with pytest.raises(sackli.CorruptionError, match=f"^{path}: record 1 is not JSON"):
        sackli.arrow.read_table(path, decode="json")
    write_records(path, [b'{"a": 1}', b"[1]"])
    with pytest.raises(sackli.CorruptionError, match="record 1 is JSON but not an object"):
        sackli.arrow.read_table(path, decode="json")


def test_json_rows_that_do_not_fit_the_written_schema_are_corruption(tmp_path):
    path = tmp_path / "j.bag"
    sackli.arrow.write_table(pa.table({"a": [1, 2]}), path, encoding="json")
    write_records(path, [b'{"a": 1}', b'{"a": "text"}'])  # the schema file says int64
    with pytest.raises(sackli.CorruptionError, match=str(path)):
        sackli.arrow.read_table(str(path), decode="json")


def test_arrow_rows_that_are_not_ipc_rows_are_corruption(tmp_path):
    path = tmp_path / "a.bag"
    sackli.arrow.write_table(pa.table({"a": [1, 2, 3]}), path, encoding="arrow")
    schema_file = [p for p in tmp_path.iterdir() if p.name != "a.bag"]
    write_records(path, [b"not an IPC message"] * 3)  # the schema file stays
    assert schema_file
    with pytest.raises(sackli.CorruptionError,
                       match=rf"{path}: records from 0 on are not rows written with encoding='arrow'"):
        sackli.arrow.read_table(str(path), decode="arrow")


def test_a_damaged_schema_file_is_corruption(tmp_path):
    path = tmp_path / "a.bag"
    sackli.arrow.write_table(pa.table({"a": [1]}), path, encoding="arrow")
    (schema_file,) = [p for p in tmp_path.iterdir() if p.name != "a.bag"]
    schema_file.write_bytes(b"garbage")
    with pytest.raises(sackli.CorruptionError, match="not an Arrow schema file"):
        sackli.arrow.read_table(str(path), decode="arrow")


def test_corruption_is_still_a_value_error(tmp_path):
    path = str(tmp_path / "x.bag")
    write_records(path, [b"nope"])
    with pytest.raises(ValueError):
        sackli.arrow.read_table(path, decode="json")


# --- The command line: one line for expected errors, a traceback for bugs ----------


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = cli.main(list(argv))
    return status, err.getvalue()


@pytest.mark.parametrize("bug", [TypeError("a bug"), IndexError("list index out of range"),
                                 KeyError("k"), AttributeError("x")])
def test_a_bug_is_not_hidden(tmp_path, monkeypatch, bug):
    write_records(tmp_path / "x.bag", [b"a"])

    def broken(args):
        raise bug

    monkeypatch.setattr(cli._print, "head", broken)
    with pytest.raises(type(bug)):
        run("head", str(tmp_path / "x.bag"))


@pytest.mark.parametrize("error, line", [
    (sackli.CorruptionError("x.bag: record 0 is corrupt (byte offset 3)"),
     "sackli: error: x.bag: record 0 is corrupt (byte offset 3)\n"),
    (FileNotFoundError(2, "No such file or directory", "gone.bag"),
     "sackli: error: gone.bag: No such file or directory\n"),
    (ValueError("--range 'x' is not A:B"), "sackli: error: --range 'x' is not A:B\n"),
    (KeyboardInterrupt(), "sackli: error: interrupted\n"),
])
def test_expected_errors_are_one_line(tmp_path, monkeypatch, error, line):
    write_records(tmp_path / "x.bag", [b"a"])

    def failing(args):
        raise error

    monkeypatch.setattr(cli._print, "head", failing)
    status, stderr = run("head", str(tmp_path / "x.bag"))
    assert (status, stderr) == (130 if isinstance(error, KeyboardInterrupt) else 1, line)


def test_a_user_index_out_of_range_is_one_line(tmp_path):
    write_records(tmp_path / "x.bag", [b"a"])
    # A wrong argument for this bag: a usage error (exit 2), as argparse's.
    for argv in (["get", str(tmp_path / "x.bag"), "3"], ["cat", str(tmp_path / "x.bag"), "--indices", "0,3"]):
        assert run(*argv) == (2, f"sackli {argv[0]}: error: index 3 out of range for a reader "
                                 f"of 1 records (see 'sackli {argv[0]} --help')\n")


def test_a_bug_shows_its_traceback_from_the_shell(tmp_path):
    write_records(tmp_path / "x.bag", [b"a"])
    code = ("import sys, sackli.cli as cli\n"
            "def broken(args): raise TypeError('a bug in sackli')\n"
            "cli._print.head = broken\n"
            "sys.exit(cli.main(['head', 'x.bag']))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip().endswith("TypeError: a bug in sackli")
