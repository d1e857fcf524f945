"""Line-oriented record files: JSON Lines and newline-delimited text.

JSON Lines: one JSON value per line. A record is written as a JSON string when
it is valid UTF-8, else as `{"base64": "<standard base64>"}`. Reading maps a
JSON string to its UTF-8 bytes, a `{"base64": ...}` object to the decoded
bytes, and any other JSON value (an object, a number...) to the line's own
text, so a JSON Lines dataset of objects becomes one JSON document per record.

Text: each line, without its `\\n`, is one record, bytes as they are.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Iterator

from .._engine import CorruptionError
from ._files import RecordFileWriter, open_binary

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
        return json.dumps({"base64": base64.b64encode(record).decode("ascii")})
    return json.dumps(text, ensure_ascii=False)


def record_from_json(line: bytes) -> bytes:
    """The record a JSON Lines line stands for (see the module docstring).

    Raises ValueError when the line is not JSON or its base64 is invalid.
    """
    value = json.loads(line)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and value.keys() == {"base64"} and isinstance(value["base64"], str):
        return base64.b64decode(value["base64"], validate=True)
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


def read_json_lines(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Iterates over the records of a JSON Lines file; blank lines are skipped.

    Raises sackli.CorruptionError naming the file and line for a line that is
    not valid JSON.
    """
    name = os.fspath(path)
    for number, line in _lines(name):
        if not line.strip():
            continue
        try:
            yield record_from_json(line)
        except (ValueError, binascii.Error) as error:
            raise CorruptionError(f"{name}: line {number} is not a JSON Lines record: {error}") from None


class JsonLinesWriter(RecordFileWriter):
    """Writes records as JSON Lines (`record_to_json`, one per line)."""

    def _encode(self, record: bytes) -> bytes:
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
