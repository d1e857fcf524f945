"""Options of readers and writers: enums, compression choices, option sets.

Every class here is immutable, validated on construction and picklable, so
options travel with readers into worker processes.

This is the one layer that validates options, with the messages users see:
each option is checked once, here, when its object is constructed, so a
mistake is reported where it was made, not when a file opens. Below it the
bindings (native/python/bagz/options.cc) only convert the values into the
engine's types. Two bounds are the engine's own facts and come from it
rather than being copied: the zstd level range (libzstd's: one engine
function, `CheckZstdLevel`, holds that rule and its message, and serves
both CompressionZstd here and the engine's C++ callers) and the largest
thread count (`_engine.MAX_PARALLELISM`).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import Any, Union

from . import _engine
from ._storage import DEFAULT_REMOTE_PARALLELISM as _DEFAULT_REMOTE_PARALLELISM, check_cache_dir

__all__ = [
    "AccessPattern",
    "CachePolicy",
    "Compression",
    "CompressionAutoDetect",
    "CompressionNone",
    "CompressionZstd",
    "LimitsPlacement",
    "LimitsStorage",
    "ReaderOptions",
    "ShardingLayout",
    "WriterOptions",
]

# The pool never grows beyond this many threads.
_MAX_PARALLELISM = _engine.MAX_PARALLELISM
# ValueError unless a zstd level is within libzstd's range (e.g. "zstd level
# 99 is outside [-131072, 22]").
check_zstd_level = _engine.check_zstd_level


class ShardingLayout(enum.IntEnum):
    """How the records of a sharded bag are numbered across its shards."""

    CONCATENATED = 0
    """Shard 0's records first, then shard 1's, and so on."""
    INTERLEAVED = 1
    """Record g is record g // S of shard g % S (S shards)."""


class LimitsPlacement(enum.IntEnum):
    """Where a bag file keeps its limits (the end offset of every record)."""

    TAIL = 0
    """At the end of the bag file itself."""
    SEPARATE = 1
    """In `limits.<name>` beside the bag file."""


class LimitsStorage(enum.IntEnum):
    """Where a reader keeps the limits while it is open."""

    ON_DISK = 0
    """Read from the file when needed: local files through their mapping (or
    `pread`), nothing kept; remote objects (`s3://`, `gs://`) a page of 4096
    limits (32 KiB) at a time, each page fetched once on first use and kept
    while the reader is open. Opening costs no limits request, and a reader
    of some records (a Beam range, a lookup) downloads only the pages around
    them."""
    IN_MEMORY = 1
    """Loaded once when the reader opens, in one read (one request for a
    remote object): best when most records of a remote file will be read by
    this one reader."""


class AccessPattern(enum.IntEnum):
    """A hint to the operating system about how records will be read."""

    SYSTEM = 0
    """No hint."""
    RANDOM = 1
    """Random access: no read-ahead by the kernel."""
    SEQUENTIAL = 2
    """Sequential scans: aggressive read-ahead by the kernel."""


class CachePolicy(enum.IntEnum):
    """How local reads use the operating system's page cache."""

    SYSTEM = 0
    """Memory-map the files; the kernel caches pages as it likes."""
    DROP_AFTER_READ = 1
    """Read with pread and tell the kernel to drop what was read."""
    DIRECT_IO = 2
    """Bypass the page cache: O_DIRECT with aligned reads on Linux (a
    ValueError when the file system refuses it), F_NOCACHE on macOS; a
    ValueError on a platform with neither (docs/platforms.md)."""


@dataclasses.dataclass(frozen=True)
class CompressionAutoDetect:
    """Compress records of files named `*.bagz` with zstd; others stay raw.

    Detection looks at each file's own name, also within a sharded spec.
    """

    _mode = 0


@dataclasses.dataclass(frozen=True)
class CompressionNone:
    """Records are stored raw, whatever the file is called."""

    _mode = 1


@dataclasses.dataclass(frozen=True)
class CompressionZstd:
    """Every non-empty record is one zstd frame, whatever the file is called.

    Args:
      level: zstd compression level (used when writing).
      dictionary: a zstd dictionary (`bytes`, or `str` taken as UTF-8), or
        empty for none. It is not stored in the file: readers must be given
        the same one. Frames written with a dictionary carry a checksum, so
        reading them with the wrong dictionary fails instead of returning
        wrong bytes.
      literals: how each frame stores its literals (the bytes no match
        covers), when writing: "huffman" (zstd's default, the bytes `bagz`
        writes) or "raw" (stored as they are: compresses small binary
        records several times faster for about the same size, but text
        grows). Both are ordinary zstd frames any reader decodes.
    """

    level: int = 3
    dictionary: bytes = b""
    literals: str = "huffman"
    _mode = 2

    def __post_init__(self) -> None:
        if isinstance(self.level, bool) or not isinstance(self.level, int):
            raise TypeError(f"level must be an int, not {type(self.level).__name__}")
        check_zstd_level(self.level)
        dictionary = self.dictionary
        if isinstance(dictionary, str):
            dictionary = dictionary.encode("utf-8")
        elif isinstance(dictionary, (bytearray, memoryview)):
            dictionary = bytes(dictionary)
        elif not isinstance(dictionary, bytes):
            raise TypeError(
                f"dictionary must be bytes or str, not {type(dictionary).__name__}"
            )
        object.__setattr__(self, "dictionary", dictionary)
        if self.literals not in _ZSTD_LITERALS:
            raise ValueError(
                f"literals must be one of {', '.join(map(repr, _ZSTD_LITERALS))}, "
                f"not {self.literals!r}")

    def __repr__(self) -> str:
        shown = f", dictionary=<{len(self.dictionary)} bytes>" if self.dictionary else ""
        if self.literals != "huffman":
            shown += f", literals={self.literals!r}"
        return f"CompressionZstd(level={self.level}{shown})"


# CompressionZstd.literals: Huffman-coded (zstd's default) or stored raw.
_ZSTD_LITERALS = ("huffman", "raw")


Compression = Union[CompressionAutoDetect, CompressionNone, CompressionZstd]


def stores_raw(compression: Compression, path: str) -> bool:
    """Whether the bag at `path`, written or read with `compression`, stores
    its records raw (the ones a CRC-32C sidecar checks): by its suffix for
    `CompressionAutoDetect`, as the engine's codec decides."""
    if isinstance(compression, CompressionAutoDetect):
        return not _engine.has_zstd_suffix(path)
    return isinstance(compression, CompressionNone)
_COMPRESSIONS = (CompressionAutoDetect, CompressionNone, CompressionZstd)


def _check_enum(name: str, value: Any, enum_type: type[enum.IntEnum]) -> enum.IntEnum:
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str) and value in enum_type.__members__:
        return enum_type[value]
    raise TypeError(
        f"{name} must be a {enum_type.__name__} "
        f"({', '.join(enum_type.__members__)}), not {value!r}"
    )


def _check_compression(value: Any) -> Compression:
    if not isinstance(value, _COMPRESSIONS):
        raise TypeError(
            "compression must be CompressionAutoDetect(), CompressionNone() or "
            f"CompressionZstd(...), not {value!r}"
        )
    return value


def _check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, not {value}")
    return value


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")
    return value


# os.cpu_count() reads /sys on every call (microseconds): once is enough.
_CORES = max(1, min(os.cpu_count() or 1, 32))


def _default_parallelism() -> int:
    return _CORES


# Requests in flight to an object store: a ranged GET spends most of its time
# waiting for its first byte (tens of milliseconds), not on this machine's
# cores, so the default is the same on 2 cores and on 64 (docs/cloud.md).
# The storage layer's default (its batches' request pool), so readers and
# the objects opened without a reader (maps) agree.
DEFAULT_REMOTE_PARALLELISM = _DEFAULT_REMOTE_PARALLELISM


# The default cap on one decoded record (ReaderOptions.max_record_bytes), and
# on one value of a sackli.maps map or field of a sackli.datasets datapoint:
# far above any record a dataset stores, and far below what a decompression
# bomb asks for (docs/errors.md, Limits).
DEFAULT_MAX_RECORD_BYTES = 4 << 30


def engine_byte_cap(name: str, value: Any) -> int:
    """A max_record_bytes-style option (an int >= 0, or None for no cap),
    checked, as the engine takes it."""
    if value is None:
        return _engine.UNLIMITED_RECORD_BYTES
    return _check_int(name, value, 0, _engine.UNLIMITED_RECORD_BYTES - 1)


def _state_without_engine_options(options: Any) -> dict[str, Any]:
    """Pickled state of an options object: its fields (the bindings' options
    object is rebuilt on unpickling)."""
    state = dict(options.__dict__)
    state.pop("_engine_options", None)
    return state


def _restore_state(options: Any, state: dict[str, Any]) -> None:
    options.__dict__.update(state)
    options.__post_init__()


def _set_checked(options: Any, name: str, checked: Any) -> None:
    """Stores a validated (possibly converted) field of a frozen dataclass."""
    if checked is not getattr(options, name):
        object.__setattr__(options, name, checked)


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
    """How a `Reader` opens and reads a bag. Available as `Reader.Options`.

    Args:
      sharding_layout: how records are numbered across shards.
      limits_placement: where the files keep their limits.
      compression: how records are stored; by default by each file's suffix.
      limits_storage: read limits from the file when needed (remote files: a
        page at a time, kept once fetched), or load them all once at open.
      max_parallelism: threads one batch read may use (the caller included).
      remote_parallelism: requests one batch read of `gs://` or `s3://`
        objects keeps in flight (opening a shard set too). Object stores
        answer many requests at once, each after tens of milliseconds, so
        this is sized for latency, not cores (docs/cloud.md).
      access_pattern: a hint to the OS about the access pattern.
      cache_policy: how reads use the page cache.
      read_ahead_bytes: how far iterators read ahead in the background
        (0: no background read-ahead).
      cache_dir: a local folder where what is fetched from `gs://` and
        `s3://` objects is kept, so that later reads (by any process of the
        host) come from local disk (docs/cache.md). None: the folder
        `SACKLI_CACHE_DIR` names when the reader opens, or no cache. Local
        files are never cached.
      cache_max_bytes: the cache's budget in bytes: the least recently used
        blocks are evicted to stay within it. None: `SACKLI_CACHE_MAX_BYTES`,
        else 10 GiB.
      max_record_bytes: the most one record may decode to (default 4 GiB,
        `DEFAULT_MAX_RECORD_BYTES`; None: no cap). A larger record raises
        sackli.RecordTooLargeError, naming the file, the record and its
        size, before anything is allocated for it: a small `.bagz` file
        whose frames decode to gigabytes (a decompression bomb) cannot
        exhaust memory.
      shared_cache: whether the cache folder is shared with other users
        (docs/cache.md). False: a private cache, refused (PermissionError)
        in a folder another user owns or that others can write; what it
        creates is 0700/0600. True: such a folder is used, and what the
        cache creates gets the folder's group permissions. None:
        `SACKLI_SHARED_CACHE` (1 or 0) when the reader opens, else False.
    """

    sharding_layout: ShardingLayout = ShardingLayout.CONCATENATED
    limits_placement: LimitsPlacement = LimitsPlacement.TAIL
    compression: Compression = dataclasses.field(default_factory=CompressionAutoDetect)
    limits_storage: LimitsStorage = LimitsStorage.ON_DISK
    max_parallelism: int = dataclasses.field(default_factory=_default_parallelism)
    access_pattern: AccessPattern = AccessPattern.SYSTEM
    cache_policy: CachePolicy = CachePolicy.SYSTEM
    read_ahead_bytes: int = 1 << 20
    cache_dir: Union[str, None] = None
    cache_max_bytes: Union[int, None] = None
    remote_parallelism: int = DEFAULT_REMOTE_PARALLELISM
    max_record_bytes: Union[int, None] = DEFAULT_MAX_RECORD_BYTES
    shared_cache: Union[bool, None] = None

    def __post_init__(self) -> None:
        _set_checked(self, "sharding_layout", _check_enum("sharding_layout", self.sharding_layout, ShardingLayout))
        _set_checked(self, "limits_placement", _check_enum("limits_placement", self.limits_placement, LimitsPlacement))
        _set_checked(self, "compression", _check_compression(self.compression))
        _set_checked(self, "limits_storage", _check_enum("limits_storage", self.limits_storage, LimitsStorage))
        _set_checked(self, "max_parallelism", _check_int("max_parallelism", self.max_parallelism, 1, _MAX_PARALLELISM))
        _set_checked(self, "access_pattern", _check_enum("access_pattern", self.access_pattern, AccessPattern))
        _set_checked(self, "cache_policy", _check_enum("cache_policy", self.cache_policy, CachePolicy))
        _set_checked(self, "read_ahead_bytes", _check_int("read_ahead_bytes", self.read_ahead_bytes, 0))
        if self.cache_dir is not None:
            _set_checked(self, "cache_dir", check_cache_dir(self.cache_dir))
        if self.cache_max_bytes is not None:
            _check_int("cache_max_bytes", self.cache_max_bytes, 1)
        if self.shared_cache is not None:
            _check_bool("shared_cache", self.shared_cache)
        _set_checked(self, "remote_parallelism",
                     _check_int("remote_parallelism", self.remote_parallelism, 1, _MAX_PARALLELISM))
        engine_max_record_bytes = engine_byte_cap("max_record_bytes", self.max_record_bytes)
        # What the engine's open takes, built once per options object (not a
        # field: no part of equality, repr or replace(); not pickled).
        object.__setattr__(self, "_engine_options", _engine.ReaderBindingOptions(
            **_engine_compression(self.compression),
            sharding_layout=int(self.sharding_layout),
            limits_placement=int(self.limits_placement),
            limits_storage=int(self.limits_storage),
            max_parallelism=self.max_parallelism,
            remote_parallelism=self.remote_parallelism,
            access_pattern=int(self.access_pattern),
            cache_policy=int(self.cache_policy),
            max_record_bytes=engine_max_record_bytes,
        ))

    __getstate__ = _state_without_engine_options
    __setstate__ = _restore_state


@dataclasses.dataclass(frozen=True)
class WriterOptions:
    """How a `Writer` writes a bag file. Available as `Writer.Options`.

    Args:
      limits_placement: TAIL appends the limits to the file on close;
        SEPARATE leaves them in `limits.<name>` beside it.
      compression: how records are stored; by default zstd level 3 for files
        named `*.bagz`, raw otherwise.
      max_parallelism: threads that compress records in the background
        (records of 16 MiB or more are compressed by the calling thread).
      atomic: True (the default): the bag is written under a hidden
        temporary name and renamed onto its path by `close()`, so readers
        see the old file or the whole new one. False: it is written into
        its path as bagz does; with SEPARATE placement every `flush()` makes
        the records so far readable there, for readers that follow a
        growing bag, and a crash leaves a bag that `sackli.recover`
        completes. Local paths only (`gs://` and `s3://` objects appear
        whole when their upload completes).
      durable: fsync every file before the rename that publishes it, and
        its folder after: a `close()` that returned survives a power cut,
        not only a crash of the process. The modes are compared in
        docs/usage.md (Write modes).
      checksum: True (the default): every zstd frame carries zstd's content
        checksum, which every reader (sackli's, bagz's, any zstd decoder)
        verifies, so a damaged record raises `CorruptionError` instead of
        returning wrong bytes. False: frames without it, as `bagz` writes
        them (4 bytes smaller each; a damaged record may then decode to
        wrong bytes). Raw records (`*.bag`) are not affected; frames
        with a dictionary always carry it.
      record_checksums: False (the default): raw records (`*.bag`) carry no
        check, as in bagz. True: every record is checked when it is read.
        A raw bag gets a CRC-32C sidecar, `<name>.crc32c` beside it
        (docs/format.md), which every sackli reader, `sackli verify`, the
        Beam source and `sackli.datasets` use when it is there; the bag
        itself stays byte for byte what bagz writes, and bagz reads it
        (ignoring the sidecar). A compressed bag needs no sidecar: its
        frames' content checksums check it (`checksum=True`, which True
        here requires).
    """

    limits_placement: LimitsPlacement = LimitsPlacement.TAIL
    compression: Compression = dataclasses.field(default_factory=CompressionAutoDetect)
    max_parallelism: int = dataclasses.field(default_factory=_default_parallelism)
    atomic: bool = True
    durable: bool = False
    checksum: bool = True
    record_checksums: bool = False

    def __post_init__(self) -> None:
        _set_checked(self, "limits_placement", _check_enum("limits_placement", self.limits_placement, LimitsPlacement))
        _set_checked(self, "compression", _check_compression(self.compression))
        _set_checked(self, "max_parallelism", _check_int("max_parallelism", self.max_parallelism, 1, _MAX_PARALLELISM))
        _check_bool("atomic", self.atomic)
        _check_bool("durable", self.durable)
        _check_bool("checksum", self.checksum)
        _check_bool("record_checksums", self.record_checksums)
        object.__setattr__(self, "_engine_options", _engine.WriterBindingOptions(
            **_engine_compression(self.compression),
            limits_placement=int(self.limits_placement),
            max_parallelism=self.max_parallelism,
            atomic=self.atomic,
            durable=self.durable,
            checksum=self.checksum,
            record_checksums=self.record_checksums,
        ))

    __getstate__ = _state_without_engine_options
    __setstate__ = _restore_state


# Options are immutable, and validating a new set costs more than opening a
# small bag: the defaults, and the same keyword overrides given again (e.g. on
# every open), resolve to one shared instance.
_RESOLVED: dict[Any, Any] = {}  # by _resolved_key
_FIELDS: dict[type, frozenset[str]] = {}


def _resolved_key(options_type: type, overrides: dict[str, Any]) -> Any:
    """The key of `options_type(**overrides)` in _RESOLVED. Values go in with
    their type: True == 1, but max_parallelism=True is an error."""
    if not overrides:
        return options_type
    if len(overrides) == 1:  # e.g. sharding_layout=...: no sorting needed
        ((name, value),) = overrides.items()
        return (options_type, name, type(value), value)
    return (options_type, *sorted((k, type(v), v) for k, v in overrides.items()))


def with_overrides(options_type: type, options: Any, overrides: dict[str, Any]) -> Any:
    """`options` (or the defaults) with `overrides` applied, validated."""
    key = None
    if options is None:
        # The defaults, or overrides seen before (the same keywords given on
        # every open), come from the cache first: they were validated when
        # they went in. Opening a small bag costs a few microseconds; this
        # lookup a fraction of one.
        key = _resolved_key(options_type, overrides)
        try:
            cached = _RESOLVED.get(key)
        except TypeError:  # an unhashable value: nothing to share
            key = cached = None
        if cached is not None:
            return cached
    if options is not None and not isinstance(options, options_type):
        raise TypeError(
            f"options must be a {options_type.__qualname__}, not {type(options).__name__}"
        )
    if options is not None and not overrides:
        return options
    fields = _FIELDS.get(options_type)
    if fields is None:
        fields = _FIELDS[options_type] = frozenset(f.name for f in dataclasses.fields(options_type))
    if not fields.issuperset(overrides):
        unknown = sorted(set(overrides) - fields)
        raise TypeError(
            f"unknown option(s) {', '.join(unknown)}; "
            f"{options_type.__qualname__} has {', '.join(sorted(fields))}"
        )
    if options is not None:
        return dataclasses.replace(options, **overrides)
    resolved = options_type(**overrides)
    if key is not None:
        if len(_RESOLVED) >= 256:
            _RESOLVED.clear()
        _RESOLVED[key] = resolved
    return resolved


def _engine_compression(compression: Compression) -> dict[str, Any]:
    """The compression fields of the engine's options objects."""
    if isinstance(compression, CompressionZstd):
        return {"compression_mode": compression._mode, "level": compression.level,
                "dictionary": compression.dictionary,
                "raw_literals": compression.literals == "raw"}
    return {"compression_mode": compression._mode, "level": 3, "dictionary": b"",
            "raw_literals": False}
