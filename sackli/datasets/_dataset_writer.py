"""`DatasetWriter`: writes one dataset folder (a shard) as `bags` 0.5.1 does.

The folder holds `spec.json`, `refs.bag` and one `<field>.bag` per field,
byte-identical to `bags.DatasetWriter`'s for the same datapoints. A local
folder is written in a hidden folder beside the target
(`.<name>.sackli-partial-<tag>`) and renamed onto the target by `close()`; a
remote one (`gs://`, `s3://`) gets each object whole on `close()`, spec.json
last. Either way a reader never sees a shard with some fields missing or
short, and a `with` block that raises leaves no shard.

A local write keeps the journal `sackli-write.json` in its hidden folder
from the start: a process killed before `close()` leaves the folder, and
`sackli.recover(directory)` finishes the shard with every datapoint that
reached the disk (see _recover).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Mapping

from ._bag import BagWriter
from ._closing import DiscardsOnError
from ._concurrent import concurrently
from ._builtin_codecs import encoders as builtin_encoders, one_argument
from .._sets import JOURNAL, partial_folder_prefix, write_journal
from .._storage import folder_path, join_path, write_destination, write_object
from ._field_encoder import FieldEncoder
from ._field_files import COMPRESSION_KEY, field_file, parse_compression
from ._shard_folders import SPEC_FILE
from ._recover import dataset_journal
from ._refs import pack_refs
from ._spec import FieldType, ShardFolder, parse_spec, spec_json

__all__ = ["DatasetWriter", "encoder_table"]

_LIMIT_BYTES = 8
# The most a zstd frame adds to a value, beyond 3 bytes per 128 KiB block
# (counted apart): incompressible data goes in raw blocks, after the frame
# header (magic and at most 14 bytes), plus a checksum (4).
_ZSTD_FRAME_BOUND = 32


def encoder_table(fields: Mapping[str, FieldType], encoders: Mapping[str, Any] | None
                  ) -> Mapping[str, Any]:
    """The encoders by type name (`encoders`, or the built-in ones for None);
    ValueError naming a field whose type none encodes."""
    table = builtin_encoders if encoders is None else encoders
    for field, ftype in fields.items():
        if ftype.dtype not in table:
            raise ValueError(f"field {field!r}: no encoder for type {ftype.dtype!r}")
    return table


class DatasetWriter(ShardFolder, DiscardsOnError):
    """Writes a dataset folder: `append(datapoint)` one dict at a time.

    Args:
      directory: the folder to create; it must not exist (its parents are
        created). A `gs://bucket/prefix` or `s3://bucket/prefix` is written
        to that bucket; it must not hold a spec.json yet.
      spec: field name -> type, e.g. `{"image": "jpeg", "label": "int(8)",
        "clips": "mp4[]"}`; a `[]` suffix makes a list field.
      encoders: type name -> `encode(value, *args) -> bytes`; None for the
        built-in `sackli.datasets.encoders`.
      compression: a sackli extension: field -> `"zstd"` or `"zstd(LEVEL)"`
        stores those fields as `<field>.bagz` (zstd per value) and records
        it in spec.json; such a dataset is readable by sackli only. None
        (the default) writes exactly what `bags` writes.
      durable: fsync every file, then the folder, before the rename that
        publishes the shard, and the parent folder after it: a `close()`
        that returned survives power loss (a sackli extension).
      record_checksums: give every raw bag of the shard a CRC-32C sidecar
        (`<name>.crc32c`, which `bags` ignores), so that sackli's readers
        raise CorruptionError for a damaged value instead of returning it
        (a sackli extension; compressed fields are checked by zstd).

    Raises:
      FileExistsError: `directory` exists.
      ValueError / TypeError: a malformed spec, or a type without an encoder.

    Not thread-safe. Example:
      >>> with DatasetWriter("ds/000000", {"label": "int(8)", "words": "utf8[]"}) as writer:
      ...     writer.append({"label": 3, "words": ["a", "b"]})
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        spec: Mapping[str, str],
        encoders: Mapping[str, Any] | None = None,
        compression: Mapping[str, str] | None = None,
        *,
        durable: bool = False,
        record_checksums: bool = False,
    ) -> None:
        self._directory = folder_path(directory)
        self._durable = durable
        self._fields = parse_spec(spec)
        self._compression = parse_compression(compression, self._fields, self._directory)
        self._raw_spec: dict[str, Any] = dict(spec)
        if compression:
            self._raw_spec[COMPRESSION_KEY] = dict(compression)
        encoders = encoder_table(self._fields, encoders)
        # Decided once, where the path enters: a local folder is staged in a
        # hidden folder with a journal and renamed; a remote one's objects
        # appear one by one, spec.json last (what makes it a shard).
        self._destination = write_destination(self._directory)
        if self._destination.occupied(SPEC_FILE):
            raise FileExistsError(f"{self._directory}: already exists")
        self._partial = self._destination.staging_folder(self._hidden_prefix())
        self._closed = False
        try:
            if self._destination.keeps_unfinished:
                # Before any record can reach the disk: what `sackli.recover`
                # needs to finish the shard after a crash.
                write_journal(self._partial,
                              dataset_journal(self._directory, self._raw_spec, durable))
            self._refs = BagWriter(join_path(self._partial, "refs.bag"), durable=durable,
                                   record_checksums=record_checksums)
            self._writers = {
                field: BagWriter(join_path(self._partial, self._field_file(field)),
                                 self._compression.get(field), durable=durable,
                                 record_checksums=record_checksums)
                for field in self._fields}
        except BaseException:
            self._destination.discard_folder(self._partial)
            raise
        # (encoder, writer, most bytes a record adds to the file beyond its
        # own) of each field, in field order.
        self._columns = [
            (FieldEncoder(field, ftype, one_argument(encoders[ftype.dtype], ftype.args),
                          self._field_path(field)), self._writers[field],
             _LIMIT_BYTES + (_ZSTD_FRAME_BOUND if field in self._compression else 0))
            for field, ftype in self._fields.items()]
        # `size`, kept up to date cheaply: exact for raw fields, at least the
        # size for compressed ones (see size_at_most).
        self._size_bound = _LIMIT_BYTES * (1 + len(self._fields))

    def _hidden_prefix(self) -> str:
        # The hidden name sackli's writers use for files: `.<name>.sackli-partial-<tag>`,
        # glob characters of the name percent-encoded as in every writer's folder
        # (_unfinished.make_write_folder): the bags in it are sackli.Writers, which
        # refuse a path holding a glob pattern. The destination makes it as bags
        # makes a shard folder (0777 less the umask), not 0700.
        parent, name = os.path.split(os.path.abspath(self._directory))
        for character in "%*?[":
            name = name.replace(character, f"%{ord(character):02X}")
        return partial_folder_prefix(os.path.join(parent, name))

    @property
    def size(self) -> int:
        """Bytes of the bag files once closed (spec.json excluded, as in `bags`)."""
        if not self._compression:
            return self._size_bound  # exact without compressed fields
        return self._refs.size + sum(writer.size for writer in self._writers.values())

    @property
    def size_at_most(self) -> int:
        """An upper bound of `size` that costs nothing to read: `size` itself
        without compressed fields, else `size` with each compressed value
        counted raw plus the most a zstd frame adds. A sharded writer asks
        for the exact size (which waits for compression) only once this
        bound reaches its shard size."""
        return self._size_bound

    @property
    def closed(self) -> bool:
        """Whether `close()` was called."""
        return self._closed

    def __len__(self) -> int:
        return len(self._refs)

    def append(self, datapoint: Mapping[str, Any], flush: bool = True) -> int:
        """Appends one datapoint (a dict with exactly the spec's fields) and
        returns its index. `flush` is accepted for `bags` compatibility.

        Every value is encoded before anything is written, so a datapoint
        that fails (a missing or extra field, a value an encoder rejects)
        raises and leaves the writer as it was.
        """
        if self._closed:
            raise ValueError(f"{self._directory}: the DatasetWriter is closed")
        self._check_fields(datapoint)
        encoded = [encode(datapoint[encode.field]) for encode, _, _ in self._columns]
        refs: list[Any] = []
        added = 0
        # The encoders checked that every value is bytes: append unchecked.
        for (encode, writer, per_record), value in zip(self._columns, encoded):
            if encode.ftype[0]:  # a list field (an index is quicker than .is_list)
                refs.append([len(writer), len(value)] if value else [])
                writer.extend_checked(value)
                nbytes, count = sum(map(len, value)), len(value)
            else:
                refs.append(writer.append_checked(value))
                nbytes, count = len(value), 1
            # 3 bytes per 128 KiB block of a zstd frame stay under 1/1024.
            added += nbytes + (nbytes >> 10 if per_record > _LIMIT_BYTES else 0) + per_record * count
        record = pack_refs(refs)
        self._size_bound += added + len(record) + _LIMIT_BYTES
        return self._refs.append_checked(record)

    def _check_fields(self, datapoint: Mapping[str, Any]) -> None:
        if type(datapoint) is not dict and not isinstance(datapoint, Mapping):
            raise TypeError(
                f"{self._directory}: a datapoint must be a dict, not {type(datapoint).__name__}")
        if datapoint.keys() == self._fields.keys():
            return
        missing = [repr(field) for field in self._fields if field not in datapoint]
        extra = [repr(field) for field in datapoint if field not in self._fields]
        raise ValueError(
            f"{self._directory}: the datapoint does not match the spec "
            f"(missing fields: {', '.join(missing) or 'none'}; "
            f"unknown fields: {', '.join(extra) or 'none'})")

    def _field_file(self, field: str) -> str:
        return field_file(field, field in self._compression)

    def _field_path(self, field: str) -> str:
        return join_path(self._directory, self._field_file(field))

    def flush(self) -> None:
        """Hands what was written so far to the operating system (the folder
        appears at `directory` on `close()`). Locally, every datapoint
        appended before a `flush()` survives a crash of the process:
        `sackli.recover(directory)` completes the shard with them."""
        # The values before the refs that point at them: a crash during the
        # flush then leaves no ref to a value that is not on disk.
        for writer in self._writers.values():
            writer.flush()
        self._refs.flush()

    def close(self) -> None:
        """Finishes every file and writes spec.json, then (locally) renames
        the folder onto `directory`. Idempotent.

        Raises FileExistsError (and discards the write) if a local
        `directory` was created meanwhile.
        """
        if self._closed:
            return
        self._closed = True
        try:
            # A remote file's close finishes its upload: overlapped.
            concurrently([self._refs.close, *(w.close for w in self._writers.values())],
                         self._destination.parallel_opens)
            # Last: a remote shard counts as written once spec.json exists.
            # Durable: each bag synced itself and the partial folder; spec.json
            # syncs itself and the folder again, then the rename is synced.
            write_object(join_path(self._partial, SPEC_FILE), spec_json(self._raw_spec),
                        durable=self._durable)
            self._destination.publish_folder(self._partial, durable=self._durable,
                                             journal=JOURNAL)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Stops writing and deletes the partial folder; no shard appears
        (remote field objects already closed stay, but without spec.json
        no reader takes them for a shard)."""
        self._closed = True
        for writer in [self._refs, *self._writers.values()]:
            if not writer.closed:
                writer.discard()
        self._destination.discard_folder(self._partial)

    def __del__(self) -> None:
        # Dropped without close() (an exception outside `with`): publishing
        # here would pass a write cut short for a complete one. A local
        # write keeps what was appended for `sackli.recover`, as a crash
        # after a flush does; a remote one is discarded by its bags.
        if (getattr(self, "_closed", True) or not self._destination.keeps_unfinished
                or not hasattr(self, "_writers")):
            return
        self._closed = True
        warnings.warn(
            f"sackli.datasets.DatasetWriter({self._directory!r}) was not closed: nothing was "
            f"published; the datapoints appended so far are kept in {self._partial}: "
            f"`sackli recover {self._directory}` completes them", ResourceWarning, source=self)
        try:
            # The values before the refs that point at them (see flush).
            for writer in [*self._writers.values(), self._refs]:
                writer.abandon()
        except Exception:  # nothing can report from here; the files stay
            pass

    def __repr__(self) -> str:
        return f"<sackli.datasets.DatasetWriter({self._directory!r}): {len(self)} datapoints>"
