"""Where the Arrow schema file of a bag set is (see
sackli/arrow/_schema_file.py for what it holds): names only, so that code
without pyarrow (`sackli info`) can find it too."""

from __future__ import annotations

import re

from ._shard_spec import expand_file_spec, is_glob, split_shard_entry, strip_local_prefix
from ._storage import object_exists, path_argument

__all__ = ["SUFFIX", "find_schema_file", "schema_path", "set_file_path"]

SUFFIX = ".arrow_schema"
_SHARD_NUMBERING = re.compile(r"-\d{5}-of-(\d{5})(?=[^/]*$)")


def _one_file(path_or_spec: str) -> str:
    """A file of the set `path_or_spec` names (its first entry), or the
    spec itself for `name@N.ext`; `name@*.ext` and a glob are resolved by
    listing (the first file the glob matches)."""
    entry = strip_local_prefix(path_argument(path_or_spec, "file_spec").split(",")[0])
    sharded = split_shard_entry(entry)
    if sharded is None:
        return expand_file_spec(entry)[0] if is_glob(entry) else entry
    if sharded[1] == "*":
        return expand_file_spec(entry)[0]
    base, count, suffix = sharded
    return f"{base}-00000-of-{int(count):05d}{suffix}"


def set_file_path(path_or_spec: str, suffix: str) -> str:
    """Where a file about a whole bag set, named `<set>{suffix}`, is: from a
    shard spec (`x@8.bagz` -> `x-of-00008.bagz{suffix}`) or from the path
    of any of its files (`x-00003-of-00008.bagz` -> the same); `x@*.bagz` is
    resolved by listing (FileNotFoundError when no set matches)."""
    entry = _one_file(path_or_spec)
    return _SHARD_NUMBERING.sub(r"-of-\1", entry, count=1) + suffix


def schema_path(path_or_spec: str) -> str:
    """Where the schema of a bag set is written (`set_file_path` with
    `.arrow_schema`: `x@8.bagz` -> `x-of-00008.bagz.arrow_schema`)."""
    return set_file_path(path_or_spec, SUFFIX)


def _shared_schema_path(path: str) -> str:
    """The name every set of one base shared before schema files were per set."""
    return _SHARD_NUMBERING.sub("", path, count=1) + SUFFIX


def find_schema_file(path_or_spec: str) -> str | None:
    """The schema file of the set: its own, or the older shared one; None
    when there is neither."""
    path = schema_path(path_or_spec)
    if object_exists(path):
        return path
    shared = _shared_schema_path(_one_file(path_or_spec))
    return shared if shared != path and object_exists(shared) else None
