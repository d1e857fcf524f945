"""sackli: fast, safe reading and writing of Bagz record files.

A bag is a sequence of byte records with fast random access, optional
per-record zstd compression and sharding; sackli reads and writes files
byte-compatible with Google's `bagz`.

    >>> import sackli
    >>> with sackli.Writer("data.bagz") as writer:
    ...     writer.write(b"hello")
    >>> sackli.Reader("data.bagz")[0]
    b'hello'
"""

from ._engine import CorruptionError
from ._index import Index, MultiIndex
from ._options import (
    AccessPattern,
    CachePolicy,
    CompressionAutoDetect,
    CompressionNone,
    CompressionZstd,
    LimitsPlacement,
    LimitsStorage,
    ShardingLayout,
)
from ._reader import Reader
from ._recover import RecoveryReport, recover
from ._shard_indices import shard_indices
from ._shard_writer import ShardedWriter
from ._skipping import SkippedRecord, SkippedRecords
from ._version import __version__, zstd_version
from ._writer import Writer

CorruptionError.__module__ = "sackli"
SkippedRecord.__module__ = SkippedRecords.__module__ = "sackli"
CorruptionError.__doc__ = (
    "A bag file is corrupt: bad limits, a truncated file, an undecodable record. "
    "A ValueError; the message names the file and byte offset."
)

__all__ = [
    "AccessPattern",
    "CachePolicy",
    "CompressionAutoDetect",
    "CompressionNone",
    "CompressionZstd",
    "CorruptionError",
    "Index",
    "LimitsPlacement",
    "LimitsStorage",
    "MultiIndex",
    "Reader",
    "RecoveryReport",
    "ShardedWriter",
    "ShardingLayout",
    "SkippedRecord",
    "SkippedRecords",
    "Writer",
    "recover",
    "shard_indices",
    "zstd_version",
]
