"""WebDataset tar shards as samples, for `sackli convert`.

The format (as webdataset defines it): a tar's regular files in tar order;
a file `dir/key.ext` belongs to the sample `dir/key` (the key is the path up
to the first "." of the file's name), with the field `ext` (lower-cased, as
webdataset's default), and a sample is a run of consecutive files sharing a
key. Shards are read in the order given (a glob's matches sorted).

`scan_tars` reads every header first (no file contents; a `.tar.gz` is
decompressed for it), so that the fields become the columns of one schema
and a problem stops the conversion before anything is written: a file
without an extension, the same field twice in a sample, a tar that does not
open or ends early. `samples` then reads the contents in the same order.
Directories and links are not files of a sample and are passed over.
"""

from __future__ import annotations

import dataclasses
import posixpath
import tarfile
import zlib
from typing import Iterator

__all__ = ["TarScan", "WEBDATASET_SUFFIXES", "samples", "scan_tars"]

WEBDATASET_SUFFIXES = (".tar", ".tar.gz", ".tgz")
# What a damaged or truncated tar (or its gzip) raises while it is read.
_TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


@dataclasses.dataclass
class TarScan:
    """What the headers say: the fields found in any sample (sorted) and
    the number of samples."""

    fields: list[str]
    num_samples: int


def _key_and_field(name: str) -> tuple[str, str] | None:
    folder, base = posixpath.split(name)
    key, dot, field = base.partition(".")
    if not dot or not key or not field:
        return None
    return posixpath.join(folder, key), field.lower()


def _members(path: str) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo, str, str]]:
    """(tar, member, key, field) of each regular file of one tar, in tar
    order; ValueError naming the tar for one that is damaged, and naming
    the file for a name without an extension."""
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                parts = _key_and_field(member.name)
                if parts is None:
                    raise ValueError(
                        f"{path}: {member.name!r} has no extension, so it belongs to no "
                        "WebDataset sample (files are named key.ext)")
                yield tar, member, parts[0], parts[1]
    except _TAR_ERRORS as error:
        raise ValueError(f"{path}: not a readable tar file (damaged or cut short: "
                         f"{error})") from None


def scan_tars(paths: list[str]) -> TarScan:
    """The fields and number of samples of the tars at `paths`; ValueError
    naming the tar and the file for a field twice in one sample."""
    fields: set[str] = set()
    count = 0
    for path in paths:
        key = None
        seen: set[str] = set()
        for _, member, member_key, field in _members(path):
            if member_key != key:
                key, seen = member_key, set()
                count += 1
            if field in seen:
                raise ValueError(f"{path}: {member.name!r}: sample {key!r} has a second "
                                 f"{field!r} file")
            seen.add(field)
            fields.add(field)
    return TarScan(sorted(fields), count)


def samples(paths: list[str]) -> Iterator[tuple[str, dict[str, bytes]]]:
    """(key, {field: bytes}) of each sample of the tars, in order (a
    sample never spans two tars)."""
    for path in paths:
        key: str | None = None
        fields: dict[str, bytes] = {}
        for tar, member, member_key, field in _members(path):
            if member_key != key:
                if key is not None:
                    yield key, fields
                key, fields = member_key, {}
            try:
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
            except _TAR_ERRORS as error:
                raise ValueError(f"{path}: {member.name!r} does not read ({error})") from None
            fields[field] = data
        if key is not None:
            yield key, fields
