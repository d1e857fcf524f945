"""Line-oriented record files: JSON Lines and newline-delimited text.

JSON Lines: one JSON value per line. A record that is UTF-8 text is written
as a JSON string; reading maps a JSON string to its UTF-8 bytes and any
other JSON value (an object, a number...) to the line's own text, so a JSON
Lines dataset of objects becomes one JSON document per record.

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
from typing import Iterator

from .._engine import CorruptionError
from ._files import DEFAULT_GZIP_LEVEL, RecordFileWriter, open_binary

__all__ = [
    "JsonLinesWriter",
    "TextLinesWriter",
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


def record_from_json(line: bytes, base64: bool = False) -> bytes:
    """The record a JSON Lines line stands for (see the module docstring);
    with `base64`, a `{"base64": ...}` object stands for the bytes it holds.

    Raises ValueError when the line is not JSON or its base64 is invalid.
    """
    value = json.loads(line)
    if isinstance(value, str):
        return value.encode("utf-8")
    if (base64 and isinstance(value, dict) and value.keys() == {"base64"}
            and isinstance(value["base64"], str)):
        return base64_codec.b64decode(value["base64"], validate=True)
    return line.strip()


def _lines(path: str) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, line without its newline) of a file."""
    with open_binary(path, "rb") as stream:
        for number, line in enumerate(stream, start=1):
            yield number, line[:-1] if line.endswith(b"\n") else line


def read_text_lines(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Iterates over the lines of a text file (gzip if named `*.gz`), each
    without its trailing `\\n`, as records."""
    for _, line in _lines(os.fspath(path)):
        yield line


def read_json_lines(path: str | os.PathLike[str], base64: bool = False) -> Iterator[bytes]:
    """Iterates over the records of a JSON Lines file; blank lines are skipped.
    With `base64`, `{"base64": ...}` objects are decoded (see the module
    docstring).

    Raises sackli.CorruptionError naming the file and line for a line that is
    not valid JSON.
    """
    name = os.fspath(path)
    for number, line in _lines(name):
        if not line.strip():
            continue
        try:
            yield record_from_json(line, base64)
        except (ValueError, binascii.Error) as error:
            raise CorruptionError(f"{name}: line {number} is not a JSON Lines record: {error}") from None


class JsonLinesWriter(RecordFileWriter):
    """Writes records as JSON Lines, one per line: text records as JSON
    strings; others as `{"base64": ...}` with `base64=True`, else ValueError
    naming the record (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], gzip_level: int = DEFAULT_GZIP_LEVEL,
                 name: str | None = None, base64: bool = False) -> None:
        super().__init__(path, gzip_level, name)
        self._base64 = base64

    def _encode(self, record: bytes) -> bytes:
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
