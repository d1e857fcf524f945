"""Which files a read pattern names, and how big they are, through Beam's
file systems (so the same code lists local folders, `gs://` and `s3://`).

A pattern is what `sackli.Reader` accepts (`name@N.ext`, `name@*.ext`, a
comma list, `posix:` paths) or an ordinary Beam glob (`gs://b/dir/*.bagz`).
Nothing here opens a bag: sizes come from listings, so estimating and
splitting never read records.
"""

from __future__ import annotations

import errno
import random
import re
from typing import NamedTuple

from apache_beam.io.filesystems import FileSystems

from .._options import LimitsPlacement, ReaderOptions
from .._format import LIMITS_PREFIX, limits_path_for, without_local_prefix
from .._shard_spec import choose_shard_set, split_shard_entry

__all__ = ["ALLOW", "ALLOW_IF_WILDCARD", "BagFile", "DISALLOW", "check_empty_match_treatment",
           "estimate_pattern_size", "expand_pattern", "split_name"]

# Beam's EmptyMatchTreatment values (apache_beam.io.fileio), by value, so
# that listing needs nothing from fileio.
ALLOW = "ALLOW"
DISALLOW = "DISALLOW"
ALLOW_IF_WILDCARD = "ALLOW_IF_WILDCARD"

_GLOB_CHARS = re.compile(r"[*?\[]")
# Above this many files named one by one, estimates stat a sample.
_MAX_FILES_TO_STAT = 100


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
    if not isinstance(pattern, str):
        raise TypeError(f"file_pattern must be a str or os.PathLike, not {type(pattern).__name__}")
    if not pattern:
        raise ValueError("file_pattern is empty")
    entries = pattern.split(",")
    if not all(entries):
        raise ValueError(f"file_pattern {pattern!r} has an empty entry")
    return [without_local_prefix(entry) for entry in entries]


def _sizes(paths: list[str]) -> dict[str, int]:
    """Sizes of existing files among `paths`, in one match call."""
    sizes: dict[str, int] = {}
    for result in FileSystems.match(paths):
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
) -> list[tuple[str, int]]:
    """The files of `base@count suffix`, listed in one match: all of them
    must exist (or, when `may_be_empty`, none); `*` must find exactly one
    shard count."""
    digits = "?????" if count == "*" else f"{int(count):05d}"
    listing = dict(_listing(f"{_literal(base)}-?????-of-{digits}{_literal(suffix)}"))
    if not listing and may_be_empty:
        return []
    return [(path, listing[path]) for path in choose_shard_set(listing, base, count, suffix, entry)]


def _entry_files(
    entry: str, separate: bool, may_be_empty: bool
) -> list[tuple[str, int]] | list[str]:
    sharded = split_shard_entry(entry)
    if sharded is not None:
        return _shard_set(entry, *sharded, may_be_empty)
    if _GLOB_CHARS.search(entry):
        matched = _listing(entry)
        if not matched:
            if may_be_empty:
                return []
            raise _missing(entry, entry, "no files match")
        if separate:  # a glob like `*.bagz` also lists the `limits.` files
            names = {path for path, _ in matched}
            matched = [
                (path, size) for path, size in matched
                if not _is_limits_of_listed(path, names)
            ]
        return matched
    return [entry]  # a plain path: sized with the others in one match


def _is_limits_of_listed(path: str, names: set[str]) -> bool:
    folder, name = split_name(path)
    return name.startswith(LIMITS_PREFIX) and folder + name[len(LIMITS_PREFIX):] in names


def _resolve(
    pattern: str, options: ReaderOptions, sample: int | None, treatment: str
) -> tuple[list[BagFile], int]:
    """(files, number of files in all): every file of the pattern, or a
    random `sample` of them when more than `sample` need a stat each."""
    separate = options.limits_placement == LimitsPlacement.SEPARATE
    listed: list[tuple[str, int] | str] = []
    optional: set[str] = set()  # plain paths that may be missing
    for entry in _entries(pattern):
        may_be_empty = _may_match_nothing(entry, treatment)
        files = _entry_files(entry, separate, may_be_empty)
        if may_be_empty:
            optional.update(item for item in files if isinstance(item, str))
        listed.extend(files)
    total = len(listed)
    if sample is not None and total > sample:
        listed = random.Random(0).sample(listed, sample)
    to_stat = [item for item in listed if isinstance(item, str)]
    if separate:
        to_stat += [limits_path_for(item if isinstance(item, str) else item[0]) for item in listed]
    sizes = _sizes(to_stat) if to_stat else {}
    files = []
    for item in listed:
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
        files.append(BagFile(path, size))
    return files, total


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
    return _resolve(pattern, options, None, empty_match_treatment)[0]


def estimate_pattern_size(
    pattern: str, options: ReaderOptions, empty_match_treatment: str = DISALLOW
) -> int:
    """Bytes of all files of `pattern`: listed sizes, extrapolated from a
    sample when very many files would each need a stat."""
    files, total = _resolve(pattern, options, _MAX_FILES_TO_STAT, empty_match_treatment)
    if not files:
        return 0
    return round(sum(f.size for f in files) * total / len(files))
