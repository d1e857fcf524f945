"""What a `sackli.Reader` that failed to open says about the way out: the
same error (same type, same file), its message extended by a hint.

- A file that is recognisably something else (Parquet, Arrow IPC, a map,
  JSON Lines...; `sackli._sniff`, which the command line uses too): what it
  is and the call or command that converts or opens it.
- A folder: a `sackli.datasets` folder names the dataset reader that opens
  it; a folder of bags names the glob or `name@N.ext` that reads them; a
  folder of Parquet files names the conversion.
- A shard spec `name@N.ext` whose shards are missing while sets of other
  counts exist (locally or in the bucket): names those (`name@4.ext`).
- A remote path that names no object but is a dataset's prefix: as for a
  local dataset folder.

Hints are computed only once the open has failed (a successful open makes
no extra request), and a hint that cannot be computed (a listing that
fails) leaves the error as it was.
"""

from __future__ import annotations

import os
import re

from ._engine import CorruptionError
from ._format import LIMITS_PREFIX
from ._shard_spec import existing_shard_sets, split_shard_entry, strip_local_prefix
from ._sniff import Kind, describe, sniff_folder, sniffed_kind
from ._storage import is_file, is_remote, join_path

__all__ = ["DATASET_SPEC_FILE", "FIRST_DATASET_SHARD", "with_open_hint"]

# How `sackli.datasets` lays out a dataset (sackli/datasets/_recognise.py;
# the core cannot import the package above it, a test keeps the two equal):
# a dataset shard folder holds spec.json, a sharded dataset 000000/spec.json.
DATASET_SPEC_FILE = "spec.json"
FIRST_DATASET_SHARD = "000000"
# The bag files of a folder that a hint names: shard files by their set.
_SHARD_FILE = re.compile(r"(.+)-\d{5}-of-(\d{5})(\.bagz?)")


def with_open_hint(error: BaseException, spec: str, paths: list[str]) -> BaseException:
    """`error` (raised opening `spec`, whose files are `paths`) with a hint
    in its message when one is known, else `error` itself. What a file or
    folder is leads the message: a folder's "Is a directory" it replaces, a
    CorruptionError's own words (with their byte offset) follow it; other
    hints are added after the message."""
    try:
        hint = _hint(error, spec, paths)
    except (OSError, ValueError):
        return error  # a listing or probe that failed: no hint, the error stands
    if hint is None:
        return error
    text, replaces = hint
    if isinstance(error, OSError):
        message = text if replaces else f"{error.strerror or error}; {text}"
        extended = type(error)(error.errno, message, error.filename)
    else:
        extended = type(error)(f"{text} (as a bag: {error})" if replaces else f"{error}; {text}")
    extended.__dict__.update(error.__dict__)
    return extended


def _hint(error: BaseException, spec: str, paths: list[str]) -> tuple[str, bool] | None:
    """The hint for `error` and whether it replaces the message."""
    if isinstance(error, IsADirectoryError):
        # A folder given as a bag (not a SEPARATE bag's limits file that is one).
        return _replacing(_folder_hint(error.filename)) if error.filename in paths else None
    if isinstance(error, CorruptionError):
        found = sniffed_kind(paths)  # local files only: no request
        return None if found is None else (describe(*found, python=True), True)
    if isinstance(error, FileNotFoundError):
        counts = _other_counts_hint(spec, error.filename)
        return (counts, False) if counts else _replacing(_remote_dataset_hint(spec))
    return None


def _replacing(text: str | None) -> tuple[str, bool] | None:
    return None if text is None else (text, True)


def _dataset_kind(folder: str) -> Kind | None:
    """What the folder (or remote prefix) `folder` is when it is a
    `sackli.datasets` dataset (up to two metadata requests when remote)."""
    if is_file(join_path(folder, DATASET_SPEC_FILE)):
        what, reader = "a sackli.datasets folder (one dataset shard)", "DatasetReader"
    elif is_file(join_path(join_path(folder, FIRST_DATASET_SHARD), DATASET_SPEC_FILE)):
        what, reader = "a sackli.datasets folder (a sharded dataset)", "ShardedDatasetReader"
    else:
        return None
    return Kind(what, f"read it with sackli info {folder} (or cat, head, count, verify)",
                f"open it with sackli.datasets.{reader}({folder!r})")


def _folder_hint(folder: str) -> str | None:
    """What a local folder given as a bag is, and how to open it."""
    kind = _dataset_kind(folder) or sniff_folder(folder) or _bag_folder_kind(folder)
    return None if kind is None else describe(folder, kind, python=True)


def _bag_folder_kind(folder: str) -> Kind:
    """A folder that is not a dataset: the specs that read the bags in it
    (its shard sets by name, else a glob per bag suffix), or, without bags,
    what a folder is not."""
    # Not hidden files (unfinished writes) nor the limits of SEPARATE bags.
    names = sorted(name for name in os.listdir(folder)
                   if not name.startswith((".", LIMITS_PREFIX)))
    sets = sorted({f"{m.group(1)}@{int(m.group(2))}{m.group(3)}"
                   for m in map(_SHARD_FILE.fullmatch, names) if m})
    specs = [join_path(folder, name) for name in sets[:3]]
    if not specs:
        suffixes = sorted({suffix for name in names for suffix in (".bag", ".bagz")
                           if name.endswith(suffix)})
        specs = [join_path(folder, "*" + suffix) for suffix in suffixes]
    if not specs:
        return Kind("a folder without bags", "a bag is a file: name one, a glob of files "
                    f"({join_path(folder, '*.bag')!r}) or a shard set "
                    f"({join_path(folder, 'name@*.bagz')!r})")
    quoted = " or ".join(repr(spec) for spec in specs)
    return Kind("a folder of bags", f"read them with {quoted}",
                f"open them with sackli.Reader({specs[0]!r})"
                + (f" (or {' or '.join(repr(s) for s in specs[1:])})" if len(specs) > 1 else ""))


def _other_counts_hint(spec: str, missing: object) -> str | None:
    """For the `name@N.ext` entry of `spec` whose shard `missing` is not
    there: the shard sets of that name with other counts (one listing of
    the folder or bucket prefix), None when there are none."""
    if not isinstance(missing, str):
        return None
    for raw_entry in spec.split(","):
        sharded = split_shard_entry(strip_local_prefix(raw_entry))
        if sharded is None or sharded[1] == "*":
            continue
        base, count, suffix = sharded
        total = int(count)
        if not (missing.startswith(base + "-") and missing.endswith(f"-of-{total:05d}{suffix}")):
            continue
        others = {n: files for n, files in existing_shard_sets(base, suffix).items() if n != total}
        if not others:
            return None
        named = ", ".join(f"{base}@{n}{suffix}" + _present(files, n)
                          for n, files in sorted(others.items()))
        shard = int(missing[len(base) + 1:len(base) + 6])  # name-SSSSS-of-NNNNN.ext
        return (f"{raw_entry} has no shard {shard} of {total}, "
                f"but shard sets of other counts exist: {named}")
    return None


def _present(files: list[str], count: int) -> str:
    """` (3 of 4 shards)` for an incomplete set, '' for a whole one."""
    return "" if len(files) == count else f" ({len(files)} of {count} shards)"


def _remote_dataset_hint(spec: str) -> str | None:
    """A remote `spec` that names no object but a dataset's prefix: how
    to open the dataset (a local folder raises IsADirectoryError instead)."""
    path = strip_local_prefix(spec)
    if "," in spec or not is_remote(path) or split_shard_entry(path) is not None:
        return None
    kind = _dataset_kind(path.rstrip("/"))
    return None if kind is None else describe(path.rstrip("/"), kind, python=True)
