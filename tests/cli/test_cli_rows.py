"""`sackli head/cat/get` print the rows of row-encoded bags (written by
sackli.arrow.write_table) through their schema file; `sackli schema` shows
it; `sackli info` says how the rows are encoded."""

from __future__ import annotations

import datetime
import json

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from cli_helpers import fails, ok  # registered by conftest.py


def events() -> pa.Table:
    return pa.table({
        "id": pa.array([1, 2, 3, 4], pa.int32()),
        "kind": ["click", "view\nnew line", None, "x" * 100],
        "at": pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5)] * 4, pa.timestamp("s", tz="UTC")),
        "score": pa.array([0.5, float("nan"), None, float("-inf")], pa.float64()),
    })


@pytest.fixture(params=["row", "arrow", "json"])
def rows_bag(tmp_path, request):
    sackli.arrow.write_table(events(), tmp_path / "ev@2.bagz", encoding=request.param)
    return tmp_path


def test_head_json_prints_one_object_per_row(rows_bag):
    lines = ok("head", "ev@*.bagz", "--format", "json", cwd=rows_bag).decode().splitlines()
    rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c}")) for line in lines]
    assert [row["id"] for row in rows] == [1, 2, 3, 4]
    assert rows[1]["score"] == "NaN" and rows[3]["score"] == "-Infinity" and rows[2]["score"] is None
    assert rows[0]["at"] == "2024-01-02T03:04:05+00:00"
    assert rows[1]["kind"] == "view\nnew line"


def test_cat_text_prints_a_table(rows_bag):
    lines = ok("cat", "ev@2.bagz", "--range", "1:3", cwd=rows_bag).decode().splitlines()
    assert lines[0].split() == ["id", "kind", "at", "score"]
    assert lines[1].split()[:2] == ["2", "view\\nnew"]  # escaped, on one line
    assert lines[2].split()[:2] == ["3", "null"]
    assert len(lines) == 3


def test_long_values_are_cut_in_the_table(rows_bag):
    lines = ok("get", "ev@2.bagz", "-1", cwd=rows_bag).decode().splitlines()
    assert len(lines) == 2 and "x" * 37 + "..." in lines[1] and "x" * 41 not in lines[1]


def test_decode_raw_and_byte_formats_print_the_records(rows_bag):
    records = sackli.Reader(str(rows_bag / "ev@2.bagz")).read()
    assert ok("get", "ev@2.bagz", "0", "--format", "raw", cwd=rows_bag) == records[0]
    assert ok("get", "ev@2.bagz", "0", "--decode", "raw", "--format", "hex",
              cwd=rows_bag).decode().strip() == records[0].hex()


@pytest.mark.parametrize("encoding", ["row", "json"])
def test_a_row_that_does_not_decode_is_reported_like_a_corrupt_record(tmp_path, encoding):
    sackli.arrow.write_table(events(), tmp_path / "ev.bag", encoding=encoding)
    records = sackli.Reader(str(tmp_path / "ev.bag")).read()
    records[2] = b"not a row" if encoding == "json" else records[2][:-5]
    with sackli.Writer(str(tmp_path / "ev.bag")) as writer:
        writer.write_many(records)
    result_error = fails("cat", "ev.bag", "--format", "json", cwd=tmp_path)
    assert "index 2" in result_error and "ev.bag" in result_error
    out = ok_with_skips("cat", "ev.bag", "--format", "json", "--skip-corrupt", cwd=tmp_path)
    assert [json.loads(line)["id"] for line in out.splitlines()] == [1, 2, 4]


def ok_with_skips(*args, cwd) -> str:
    from cli_helpers import sackli_cli

    result = sackli_cli(*args, cwd=cwd)
    assert result.returncode == 1, result.stderr
    assert b"skipped index 2" in result.stderr
    return result.stdout.decode()


def test_schema_prints_the_schema_and_its_encoding(rows_bag):
    text = ok("schema", "ev@*.bagz", cwd=rows_bag).decode()
    assert "ev-of-00002.bagz.arrow_schema" in text
    assert "id: int32" in text and "at: timestamp[s, tz=UTC]" in text
    described = json.loads(ok("schema", "ev@2.bagz", "--json", cwd=rows_bag))
    assert [f["name"] for f in described["fields"]] == ["id", "kind", "at", "score"]
    assert described["encoding"] in ("row", "arrow", "json")


def test_schema_of_a_bag_without_one_is_an_error(tmp_path):
    with sackli.Writer(str(tmp_path / "raw.bag")) as writer:
        writer.write(b"x")
    assert "raw.bag.arrow_schema" in fails("schema", "raw.bag", cwd=tmp_path)


def test_info_shows_the_row_encoding(rows_bag):
    facts = json.loads(ok("info", "ev@2.bagz", "--json", cwd=rows_bag))
    assert facts["row_encoding"] in ("row", "arrow", "json")
    assert "rows written by sackli.arrow.write_table" in ok("info", "ev@2.bagz", cwd=rows_bag).decode()
    with sackli.Writer(str(rows_bag / "raw.bag")) as writer:
        writer.write(b"x")
    assert json.loads(ok("info", "raw.bag", "--json", cwd=rows_bag))["row_encoding"] is None
