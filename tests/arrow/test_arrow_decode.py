"""sackli.arrow._decode and ._schema_file: decoding rows with the schema
file (or a given schema), and errors naming the bag and record."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    write_records,
)


# --- Schema files ------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["arrow", "row"])
def test_schema_argument_replaces_schema_file(tmp_path, encoding):
    """schema= decodes "arrow" and "row" rows when there is no schema file."""
    table = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    sackli.arrow.write_table(table, tmp_path / "a.bag", encoding=encoding)
    os.remove(tmp_path / "a.bag.arrow_schema")
    back = sackli.arrow.read_table(str(tmp_path / "a.bag"), decode=encoding, schema=table.schema)
    assert back.equals(table)


def test_decode_arrow_needs_schema_file(tmp_path):
    """decode="arrow" without a schema file raises FileNotFoundError naming
    the schema path it looked for."""
    write_records(tmp_path / "raw.bag", [b"hello", b"world"])
    with pytest.raises(FileNotFoundError, match="raw.bag.arrow_schema") as error:
        sackli.arrow.read_table(str(tmp_path / "raw.bag"), decode="arrow")
    assert error.value.filename == str(tmp_path / "raw.bag.arrow_schema")


def test_decode_with_other_encoding_schema_file(tmp_path):
    """The schema file records the encoding: decoding "json" rows as "arrow"
    (or the other way round) raises ValueError."""
    table = pa.table({"a": [1, 2]})
    sackli.arrow.write_table(table, tmp_path / "j.bag", encoding="json")
    sackli.arrow.write_table(table, tmp_path / "a.bag", encoding="arrow")
    with pytest.raises(ValueError, match="encoding='json', not 'arrow'"):
        sackli.arrow.read_table(str(tmp_path / "j.bag"), decode="arrow")
    with pytest.raises(ValueError, match="encoding='arrow', not 'json'"):
        sackli.arrow.read_table(str(tmp_path / "a.bag"), decode="json")


# --- Errors ------------------------------------------------------------------


def test_decode_arrow_of_arbitrary_bytes_names_bag(tmp_path):
    """decode="arrow" with a schema over records that are not Arrow rows
    raises ValueError naming the bag."""
    path = str(tmp_path / "raw.bag")
    write_records(path, [b"hello", b"world"])
    with pytest.raises(ValueError, match=f"^{path}: records from 0 on are not rows"):
        sackli.arrow.read_table(path, decode="arrow", schema=pa.schema([("a", pa.int64())]))


@pytest.mark.parametrize("batch_size", [None, 2])
def test_decode_json_of_non_json_names_record(tmp_path, batch_size):
    """decode="json" raises ValueError naming the bag and the first record
    that is not a JSON object."""
    path = str(tmp_path / "mixed.bag")
    write_records(path, [b'{"a": 1}', b'{"a": 2}', b"not json", b'{"a": 3}'])
    with pytest.raises(ValueError, match=f"^{path}: record 2 is not JSON"):
        sackli.arrow.read_table(path, decode="json", batch_size=batch_size)
    write_records(tmp_path / "array.bag", [b'{"a": 1}', b"[1]"])
    with pytest.raises(ValueError, match="record 1 is JSON but not an object"):
        sackli.arrow.read_table(str(tmp_path / "array.bag"), decode="json")
