"""Line-oriented record files: JSON Lines and newline-delimited text.

JSON Lines: one JSON value per line, read and written two ways.

- As text (the default): a record that is UTF-8 text is written as a JSON
  string; reading maps a JSON string to its UTF-8 bytes and any other JSON
  value (an object, a number...) to the line's own text.
- As JSON texts (`json_texts=True`): each record is one JSON text, written
  as it is, and reading keeps every line's JSON text, a string's quotes
  included. Nothing is ambiguous then: `"42"` and `42` stay apart, so a
  file of objects, numbers, null and lists gives back the same values.
  `holds_only_strings` tells which way suits a file: `sackli convert` reads
  a file of strings only as text (records are the strings) and any other
  file as JSON texts, and marks the bag so (sackli/cli/_json_records.py).

Records that are not text have no JSON form. Writing one is an error unless
the `base64` convention is asked for (`base64=True`, `sackli convert
--jsonl-base64`): then it is written as `{"base64": "<standard base64>"}`,
and reading with the same option turns such an object back into those
bytes. The convention is opt-in on both sides, so a user's own
`{"base64": ...}` objects are never rewritten.

Text: each line, without its `\\n`, is one record, bytes as they are.
"""

from __future__ import annotations

import base64 as base64_codec
import binascii
import json
import os
from typing import BinaryIO, Iterable, Iterator

from .. import CorruptionError
from ._files import DEFAULT_GZIP_LEVEL, RecordFileWriter, display_name, open_binary

__all__ = [
    "JsonLinesWriter",
    "TextLinesWriter",
    "holds_only_strings",
    "json_text_line",
    "record_from_json",
    "record_to_json",
    "read_json_lines",
    "read_text_lines",
]


def record_to_json(record: bytes) -> str:
    """One record as a JSON value on one line: a string when the record is
    UTF-8, else `{"base64": ...}`."""
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError:
        return json.dumps({"base64": base64_codec.b64encode(record).decode("ascii")})
    return json.dumps(text, ensure_ascii=False)


def record_from_json(line: bytes, base64: bool = False, json_texts: bool = False) -> bytes:
    """The record a JSON Lines line stands for (see the module docstring);
    with `base64`, a `{"base64": ...}` object stands for the bytes it holds;
    with `json_texts`, every line stands for its own JSON text.

    Raises ValueError when the line is not JSON or its base64 is invalid.
    """
    value = json.loads(line)
    if json_texts:
        return line.strip()
    if isinstance(value, str):
        return value.encode("utf-8")
    if (base64 and isinstance(value, dict) and value.keys() == {"base64"}
            and isinstance(value["base64"], str)):
        return base64_codec.b64decode(value["base64"], validate=True)
    return line.strip()


def _lines(path: str | os.PathLike[str] | BinaryIO) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line without its newline) of a file, or of an
    open binary stream (`sackli convert` counts the bytes it reads)."""
    with open_binary(path, "rb") as stream:
        for number, line in enumerate(stream, start=1):
            yield number, line[:-1] if line.endswith(b"\n") else line


def read_text_lines(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Iterates over the lines of a text file (gzip if named `*.gz`), each
    without its trailing `\\n`, as records."""
    for _, line in _lines(path):
        yield line


def holds_only_strings(paths: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether every value in these JSON Lines files is a JSON string (True
    for files without any value). Reads up to the first value that is not
    (a line that does not start with `"`), so a file of objects costs one
    line; the lines are not parsed (reading them does that)."""
    for path in paths:
        for _, line in _lines(os.fspath(path)):
            start = line.lstrip()
            if start and not start.startswith(b'"'):
                return False
    return True


def read_json_lines(path: str | os.PathLike[str], base64: bool = False,
                    json_texts: bool = False) -> Iterator[bytes]:
    """Iterates over the records of a JSON Lines file; blank lines are skipped.
    With `base64`, `{"base64": ...}` objects are decoded; with `json_texts`,
    each record is its line's JSON text, strings too (see the module
    docstring).

    Raises sackli.CorruptionError naming the file and line for a line that is
    not valid JSON.
    """
    name = display_name(path)
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            yield record_from_json(line, base64, json_texts)
        except (ValueError, binascii.Error) as error:
            raise CorruptionError(f"{name}: line {number} is not a JSON Lines record: {error}") from None


def json_text_line(record: bytes) -> bytes:
    """A record that is a JSON text as one line: as it is, unless it spans
    lines (whitespace between tokens), then written compactly. ValueError
    when it is not JSON."""
    value = json.loads(record)
    if b"\n" in record or b"\r" in record:
        return json.dumps(value, ensure_ascii=False).encode("utf-8") + b"\n"
    return record.strip() + b"\n"


class JsonLinesWriter(RecordFileWriter):
    """Writes records as JSON Lines, one per line: text records as JSON
    strings; others as `{"base64": ...}` with `base64=True`, else ValueError
    naming the record. With `json_texts=True` each record is a JSON text,
    written as the value it is (ValueError for one that is not JSON). See
    the module docstring."""

    def __init__(self, path: str | os.PathLike[str], gzip_level: int = DEFAULT_GZIP_LEVEL,
                 name: str | None = None, base64: bool = False,
                 json_texts: bool = False) -> None:
        super().__init__(path, gzip_level, name)
        self._base64 = base64
        self._json_texts = json_texts

    def _encode_json_text(self, record: bytes) -> bytes:
        try:
            return json_text_line(record)
        except ValueError as error:  # UnicodeDecodeError too
            raise ValueError(
                f"{self.name}: record {self.records_written} is not JSON text ({error}), though "
                "the bag is marked as holding JSON texts; write every record as a JSON string "
                "with --decode raw (json_texts=False)") from None

    def _encode(self, record: bytes) -> bytes:
        if self._json_texts:
            return self._encode_json_text(record)
        if not self._base64:
            try:
                record.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(
                    f"{self.name}: record {self.records_written} is not UTF-8 text, which JSON "
                    "Lines cannot hold as it is; write it as {\"base64\": ...} with "
                    "--jsonl-base64 (base64=True) and read it back the same way, or use "
                    ".tfrecord") from None
        return record_to_json(record).encode("utf-8") + b"\n"


class TextLinesWriter(RecordFileWriter):
    """Writes records as lines of text; a record holding `\\n` is refused
    (ValueError), since it would read back as two records."""

    def _encode(self, record: bytes) -> bytes:
        if b"\n" in record:
            raise ValueError(
                f"{self.name}: record {self.records_written} contains a newline and "
                "cannot be written as one line of text; use .jsonl or .tfrecord"
            )
        return record + b"\n"
