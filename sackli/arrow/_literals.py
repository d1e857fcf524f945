"""How write_table stores zstd literals in row-encoded `.bagz` shards.

zstd Huffman-codes each frame's literals (the bytes no match covers). For
short rows of mostly binary data, building a Huffman table per frame takes
most of the compression time and saves next to nothing; for text-heavy rows
it saves a lot. So, unless the caller chose a compression, a sample of the
first rows is compressed both ways and literals are stored raw when Huffman
coding would save less than `RAW_LITERALS_MAX_SAVING` of the size.
"""

from __future__ import annotations

import dataclasses

from .. import CompressionAutoDetect, CompressionZstd
from .._bulk import WriterOptions
from .._engine import zstd_packed_size
from ._encode import Packed

__all__ = ["RAW_LITERALS_MAX_SAVING", "SAMPLE_ROWS", "huffman_saving", "with_chosen_literals"]

# Rows of the sample: enough to be representative, a few milliseconds.
SAMPLE_ROWS = 1000
# Huffman literals must save at least this fraction of the raw-literal size.
RAW_LITERALS_MAX_SAVING = 0.03
# The level CompressionAutoDetect writes `.bagz` files with: CompressionZstd's.
_DEFAULT_LEVEL = CompressionZstd().level


def huffman_saving(sample: Packed, level: int = _DEFAULT_LEVEL) -> float:
    """The fraction of the size Huffman-coded literals save over raw ones
    on `sample`'s records (0 for an empty sample)."""
    data, offsets = sample
    raw = zstd_packed_size(data, offsets, level, True)
    if raw == 0:
        return 0.0
    return 1.0 - zstd_packed_size(data, offsets, level, False) / raw


def with_chosen_literals(options: WriterOptions | None, bagz_suffix: bool,
                         first_rows: Packed | None) -> WriterOptions:
    """`options` (default ones when None), with raw zstd literals when the
    caller left compression to the file suffix, the files are `.bagz`
    (`bagz_suffix`) and Huffman coding saves too little on the first rows (up to
    SAMPLE_ROWS of `first_rows`, encoded records); otherwise unchanged."""
    chosen = options or WriterOptions()
    if (first_rows is None or not isinstance(chosen.compression, CompressionAutoDetect)
            or not bagz_suffix):
        return chosen
    data, offsets = first_rows
    sample = (data, offsets[:SAMPLE_ROWS + 1])
    if huffman_saving(sample) >= RAW_LITERALS_MAX_SAVING:
        return chosen
    return dataclasses.replace(
        chosen, compression=CompressionZstd(literals="raw"))
