"""Record file formats other than Bagz, read and written as streams of records.

Each module turns one format into an iterator of `bytes` records (reading)
and a writer with `write_many` / `close` (writing), so the command line, the
Beam and the Arrow bridges share one implementation:

- `tfrecord`: TFRecord files (length, masked CRC32C of the length, data,
  masked CRC32C of the data), optionally gzip-compressed (`*.gz`).
- `_files`: opening files, through gzip for `*.gz` (zlib-ng when installed).
- `lines`: JSON Lines (one JSON value per line; records are strings' text,
  or JSON texts) and newline-delimited text.

Other packages import only this module and the public `lines` and
`tfrecord`.
Internal interface: none
"""

from ._files import DEFAULT_GZIP_LEVEL, gzip_library
from .lines import (
    JsonLinesWriter, TextLinesWriter, holds_only_strings, read_json_lines, read_text_lines,
)
from .tfrecord import TFRecordWriter, masked_crc32c, read_tfrecords

__all__ = [
    "DEFAULT_GZIP_LEVEL",
    "JsonLinesWriter",
    "TFRecordWriter",
    "TextLinesWriter",
    "gzip_library",
    "holds_only_strings",
    "masked_crc32c",
    "read_json_lines",
    "read_text_lines",
    "read_tfrecords",
]
