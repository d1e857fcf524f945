"""Which files a read pattern names, and how big they are, through Beam's
file systems (so the same code lists local folders, `gs://` and `s3://`).

A pattern is what `sackli.Reader` accepts (`name@N.ext`, `name@*.ext`, a
comma list, `posix:` paths) or an ordinary Beam glob (`gs://b/dir/*.bagz`).
Nothing here opens a bag: sizes come from listings, so estimating and
splitting never read records.
"""

from __future__ import annotations

import errno
import functools
import re
from typing import Container, NamedTuple

from apache_beam.io.filesystems import FileSystems

from .. import LimitsPlacement
from .._bulk import ReaderOptions
from .._sets import (
    LIMITS_PREFIX, choose_shard_set, limits_path_for, split_shard_entry,
    without_local_prefix,
)
from .._storage import in_parallel, is_remote, path_argument

__all__ = ["ALLOW", "ALLOW_IF_WILDCARD", "BagFile", "DISALLOW", "check_empty_match_treatment",
           "estimate_pattern_size", "expand_pattern", "split_name"]

# Beam's EmptyMatchTreatment values (apache_beam.io.fileio), by value, so
# that listing needs nothing from fileio.
ALLOW = "ALLOW"
DISALLOW = "DISALLOW"
ALLOW_IF_WILDCARD = "ALLOW_IF_WILDCARD"

_GLOB_CHARS = re.compile(r"[*?\[]")


class BagFile(NamedTuple):
    """One bag file of a pattern: its path and its size in bytes (with its
    `limits.` file's for SEPARATE placement), which bounds the positions of
    its records (see `_source`)."""

    path: str
    size: int


def check_empty_match_treatment(treatment: object) -> str:
    """`treatment` if it is one of Beam's `EmptyMatchTreatment` values,
    else ValueError."""
    if treatment not in (ALLOW, DISALLOW, ALLOW_IF_WILDCARD):
        raise ValueError(
            "empty_match_treatment must be EmptyMatchTreatment.ALLOW, DISALLOW or "
            f"ALLOW_IF_WILDCARD, not {treatment!r}"
        )
    return str(treatment)


def _may_match_nothing(entry: str, treatment: str) -> bool:
    """Beam's rule: ALLOW lets any entry name no file, ALLOW_IF_WILDCARD
    only entries with a `*` (`name@*.bagz` included)."""
    return treatment == ALLOW or (treatment == ALLOW_IF_WILDCARD and "*" in entry)


def split_name(path: str) -> tuple[str, str]:
    """(folder with its trailing '/', file name) of a local path or URL."""
    cut = path.rfind("/") + 1
    return path[:cut], path[cut:]


def _entries(pattern: str) -> list[str]:
    pattern = path_argument(pattern, "file_pattern")
    if not pattern:
        raise ValueError("file_pattern is empty")
    entries = pattern.split(",")
    if not all(entries):
        raise ValueError(f"file_pattern {pattern!r} has an empty entry")
    return [without_local_prefix(entry) for entry in entries]


def _sizes(paths: list[str], at_once: int) -> dict[str, int]:
    """Sizes of existing files among `paths`: local ones in one match call;
    remote ones a match each (a metadata request, which Beam's file
    systems make one after another), `at_once` of them concurrently."""
    local = [path for path in paths if not is_remote(path)]
    remote = [path for path in paths if is_remote(path)]
    results = FileSystems.match(local) if local else []
    for matched in in_parallel([functools.partial(FileSystems.match, [path]) for path in remote],
                               at_once):
        results.extend(matched)
    sizes: dict[str, int] = {}
    for result in results:
        for metadata in result.metadata_list:
            sizes[metadata.path] = metadata.size_in_bytes
    return sizes


def _missing(entry: str, path: str, why: str) -> FileNotFoundError:
    return FileNotFoundError(errno.ENOENT, f"{entry}: {why}", path)


def _listing(pattern: str) -> list[tuple[str, int]]:
    """(path, size) of every file matching the glob `pattern`, sorted."""
    # Beam's local file system finds nothing for a glob without a folder.
    bare = "/" not in pattern
    listed = sorted(
        (metadata.path, metadata.size_in_bytes)
        for result in FileSystems.match(["./" + pattern if bare else pattern])
        for metadata in result.metadata_list
    )
    return [(path[2:], size) for path, size in listed] if bare else listed


def _literal(text: str) -> str:
    """`text` as a glob that matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _shard_set(
    entry: str, base: str, count: str, suffix: str, may_be_empty: bool
) -> tuple[list[tuple[str, int]], str]:
    """(files, the glob listed): the files of `base@count suffix`, listed in
    one match: all of them must exist (or, when `may_be_empty`, none); `*`
    must find exactly one shard count."""
    digits = "?????" if count == "*" else f"{int(count):05d}"
    glob = f"{_literal(base)}-?????-of-{digits}{_literal(suffix)}"
    listing = dict(_listing(glob))
    if not listing and may_be_empty:
        return [], glob
    chosen = choose_shard_set(listing, base, count, suffix, entry)
    return [(path, listing[path]) for path in chosen], glob


def _entry_files(
    entry: str, separate: bool, may_be_empty: bool
) -> tuple[list[tuple[str, int]] | list[str], dict[str, int]]:
    """(files, sizes listed): a glob's or shard set's files come with the
    sizes their listing gave; a plain path comes alone, to be sized with the
    others in one match. With SEPARATE placement, `sizes listed` also holds
    the sizes of the `limits.` files a listing of the same glob in their
    name found (one listing, however many files), so that they need no
    stat each either."""
    sharded = split_shard_entry(entry)
    if sharded is not None:
        files, glob = _shard_set(entry, *sharded, may_be_empty)
        listed = dict(files)
    elif _GLOB_CHARS.search(entry):
        glob = entry
        matched = _listing(entry)
        if not matched:
            if may_be_empty:
                return [], {}
            raise _missing(entry, entry, "no files match")
        listed = dict(matched)
        files = matched
        if separate:  # a glob like `*.bagz` also lists the `limits.` files
            files = [(path, size) for path, size in matched
                     if not _is_limits_of_listed(path, listed)]
    else:
        return [entry], {}  # a plain path: sized with the others in one match
    if separate and any(limits_path_for(path) not in listed for path, _ in files):
        # The limits of `dir/name*` match `dir/limits.name*`; those this
        # misses (a `**` in the glob's last part) are stat'ed with the plain
        # paths.
        listed.update(_listing(limits_path_for(glob)))
    return files, listed


def _is_limits_of_listed(path: str, names: Container[str]) -> bool:
    folder, name = split_name(path)
    return name.startswith(LIMITS_PREFIX) and folder + name[len(LIMITS_PREFIX):] in names


def _resolve(pattern: str, options: ReaderOptions, treatment: str) -> list[BagFile]:
    """Every file of the pattern with its size: the sizes listings gave,
    and one match call for the rest (plain paths, limits files no listing
    found)."""
    separate = options.limits_placement == LimitsPlacement.SEPARATE
    files_listed: list[tuple[str, int] | str] = []
    sizes: dict[str, int] = {}  # every size the listings returned
    optional: set[str] = set()  # plain paths that may be missing
    for entry in _entries(pattern):
        may_be_empty = _may_match_nothing(entry, treatment)
        files, listed = _entry_files(entry, separate, may_be_empty)
        if may_be_empty:
            optional.update(item for item in files if isinstance(item, str))
        files_listed.extend(files)
        sizes.update(listed)
    to_stat = [item for item in files_listed if isinstance(item, str)]
    if separate:
        to_stat += [
            limits for limits in (limits_path_for(item if isinstance(item, str) else item[0])
                                  for item in files_listed)
            if limits not in sizes
        ]
    if to_stat:
        sizes.update(_sizes(to_stat, options.remote_parallelism))
    result = []
    for item in files_listed:
        path, size = (item, sizes.get(item)) if isinstance(item, str) else item
        if size is None and path in optional:
            continue
        if size is None:
            raise _missing(path, path, "the file does not exist")
        if separate:
            limits = limits_path_for(path)
            if limits not in sizes:
                raise _missing(path, limits, "its limits file does not exist")
            size += sizes[limits]
        result.append(BagFile(path, size))
    return result


def expand_pattern(
    pattern: str, options: ReaderOptions, empty_match_treatment: str = DISALLOW
) -> list[BagFile]:
    """Every file of `pattern` with its size, in pattern order.

    Raises FileNotFoundError (naming the path) when a named file, a shard of
    a set or a SEPARATE limits file is missing or a glob matches nothing,
    ValueError for a malformed or ambiguous pattern. `empty_match_treatment`
    (Beam's) lets entries that name no file at all (a glob or `name@*` that
    matches nothing, a missing plain path, a `name@N` set with no shard)
    give no files instead; a set missing only some shards is still an error.
    """
    return _resolve(pattern, options, empty_match_treatment)


def estimate_pattern_size(
    pattern: str, options: ReaderOptions, empty_match_treatment: str = DISALLOW
) -> int:
    """Bytes of all files of `pattern`, exactly: the sizes the listings
    returned (no stat per listed file), plain paths sized in one match."""
    return sum(f.size for f in _resolve(pattern, options, empty_match_treatment))
