"""sackli: fast, safe reading and writing of Bagz record files.

A bag is a sequence of byte records with fast random access, optional
per-record zstd compression and sharding; sackli reads and writes files
byte-compatible with Google's `bagz`.

    >>> import sackli
    >>> with sackli.Writer("data.bagz") as writer:
    ...     writer.write(b"hello")
    >>> sackli.Reader("data.bagz")[0]
    b'hello'

The core's internal interface: the private modules of the core (the
modules directly in `sackli/`) that sackli's other packages may import,
each documented in its docstring: `_engine` (the compiled engine: every
part's bindings), `_bulk` (records in bulk, batch sizes, reader and writer
options) and `_sets` (bag file names, shard specs and sets, unfinished
writes). Public names come from `sackli` itself.
Internal interface: _engine, _bulk, _sets
"""

from ._bucket_clean import CleanReport, Cleaned, clean
from ._engine import CorruptionError, EngineError, RecordTooLargeError
from ._epoch_position import epoch_position
from ._epoch_stream import EpochStream
from ._index import Index, MultiIndex
from ._index_stream import IndexStream
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
from ._storage import UncachedReadWarning
from ._version import __version__, zstd_version
from ._writer import Writer

CorruptionError.__module__ = EngineError.__module__ = RecordTooLargeError.__module__ = "sackli"
SkippedRecord.__module__ = SkippedRecords.__module__ = "sackli"
CorruptionError.__doc__ = (
    "A bag file is corrupt: bad limits, a truncated file, an undecodable record. "
    "A ValueError; the message names the file and byte offset."
)
RecordTooLargeError.__doc__ = (
    "A record, map value or dataset field decodes to more than the reader's "
    "max_record_bytes (or the map's max_value_bytes). A ValueError; the message "
    "names the file, the record (or key) and the size."
)
EngineError.__doc__ = (
    "An unexpected failure inside the C++ engine (a bug: please report it). "
    "A RuntimeError."
)

__all__ = [
    "AccessPattern",
    "CachePolicy",
    "CleanReport",
    "Cleaned",
    "CompressionAutoDetect",
    "CompressionNone",
    "CompressionZstd",
    "CorruptionError",
    "EngineError",
    "EpochStream",
    "Index",
    "IndexStream",
    "LimitsPlacement",
    "LimitsStorage",
    "MultiIndex",
    "Reader",
    "RecordTooLargeError",
    "RecoveryReport",
    "ShardedWriter",
    "ShardingLayout",
    "SkippedRecord",
    "SkippedRecords",
    "UncachedReadWarning",
    "Writer",
    "clean",
    "epoch_position",
    "recover",
    "shard_indices",
    "zstd_version",
]
