"""File specs: which files a reader opens.

A spec is a comma-separated list of entries. An entry is a path (optionally
prefixed `posix:`), `name@N.ext` (N shards named `name-00000-of-0000N.ext`
...), `name@*.ext` (the one shard set of that name found on disk), or a glob
(`ev*.bag`: the files it matches, sorted; see `expand_glob` here and
sackli/_storage/_globs.py). See docs/format.md, "Shard specs".

Globs never match sackli's own working files unless the pattern names them:
names starting with `.` (hidden files, partial-write folders), `limits.`
(the limits of a SEPARATE bag), ending in `.arrow_schema` or `.sackli_set`
(a bag set's schema and manifest) or holding `-of-pending` (shards of an
unfinished in-place write). Writers refuse a `*` (`refuse_glob`) and take
`?` and `[` literally: a file so named reads back by its name when the
pattern matches itself (`q?.bag`), or with the bracket quoted
(`run[[]1].bag`).
"""

from __future__ import annotations

import errno
import re
from typing import Iterable

from ._format import LIMITS_PREFIX, MAX_SHARDS, without_local_prefix
from ._storage import canonical_path, is_glob, names_starting, path_argument
from ._storage import expand_glob as _expand_glob

__all__ = [
    "choose_shard_set", "existing_shard_sets", "expand_file_spec", "expand_glob", "is_glob",
    "refuse_glob", "shard_name", "split_shard_entry", "strip_local_prefix",
]

# Name starts and ends that mark sackli's own working files (see above): a
# pattern component matches such a name only if it starts or ends the same.
_HIDDEN_STARTS = (".", LIMITS_PREFIX)
_SIDECAR_ENDS = (".arrow_schema", ".sackli_set")
_PENDING = "-of-pending"


def shard_name(base: str, index: int, count: int, suffix: str) -> str:
    """`name-00003-of-00008.ext`: the file name of one shard of a set."""
    return f"{base}-{index:05d}-of-{count:05d}{suffix}"


def strip_local_prefix(path: str) -> str:
    """A path as the engine opens it: a local path without its optional
    `posix:` (or `/posix:`) prefix, or a `gs://` / `s3://` URL in its canonical spelling
    (`/gs://b/k` and pathlib's `/gs:/b/k` are accepted).

    Raises ValueError for URLs of storage sackli cannot reach.
    """
    local = without_local_prefix(path)
    if local is not path:
        return local
    return canonical_path(path)


def _own_file(name: str, pattern: str) -> bool:
    """Whether `name` is one of sackli's working files that `pattern` (one
    component) does not ask for by name."""
    for start in _HIDDEN_STARTS:
        if name.startswith(start) and not pattern.startswith(start):
            return True
    for end in _SIDECAR_ENDS:
        if name.endswith(end) and not pattern.endswith(end):
            return True
    return _PENDING in name and _PENDING not in pattern


def expand_glob(pattern: str) -> list[str]:
    """The files (or objects, for a `gs://` / `s3://` pattern) matching the
    glob `pattern`, sorted, sackli's working files left out (see above).

    Raises FileNotFoundError naming the pattern when none matches.
    """
    return _expand_glob(pattern, _own_file)


def refuse_glob(spec: str, path: str) -> None:
    """Raises ValueError when a writer's `path` (`spec` without its
    `posix:` prefix) holds a `*` other than the count of `name@*.ext`.

    A writer takes its name literally otherwise: `?` and `[` are legal in
    file and object names (`hash#q?.bag`), and a `*` there is almost always
    a reading pattern given to a writer by mistake."""
    sharded = split_shard_entry(path)
    if "*" in (path if sharded is None else sharded[0] + sharded[2]):
        raise ValueError(
            f"{spec}: a writer needs one name, not a glob pattern ('*' matches existing files "
            "when reading; 'name@*.ext' with max_shard_bytes is the one pattern a writer "
            "takes)")


def split_shard_entry(entry: str) -> tuple[str, str, str] | None:
    """(base, count, suffix) of `base@count suffix`, or None for a plain path.

    The `@` that counts is the first one after the last `/`. As in bagz, an
    `@` followed by neither a shard count (1 to MAX_SHARDS) nor `*` is part of a
    literal file name (`user@host.log`, `x@0.bag`).
    """
    at = entry.find("@", entry.rfind("/") + 1)
    if at < 0:
        return None
    match = re.fullmatch(r"(\d+|\*)(.*)", entry[at + 1:], re.DOTALL)
    if match is None:
        return None
    count = match.group(1)
    if count != "*" and not 1 <= int(count) <= MAX_SHARDS:
        return None
    return entry[:at], count, match.group(2)


def choose_shard_set(listed: Iterable[str], base: str, count: str, suffix: str,
                     entry: str) -> list[str]:
    """The shard paths of `base@count suffix` among `listed` paths, in order.

    `count` is a number or `*`. Raises FileNotFoundError when a shard is
    missing or `*` finds none, ValueError when `*` finds sets of several
    counts (an ambiguity is an error, not a guess).
    """
    shape = re.compile(re.escape(base) + r"-(\d{5})-of-(\d{5})" + re.escape(suffix))
    sets: dict[int, set[int]] = {}
    for path in listed:
        match = shape.fullmatch(path)
        if match:
            sets.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    if count == "*":
        if not sets:
            raise FileNotFoundError(errno.ENOENT, f"{entry}: no shards match", entry)
        if len(sets) > 1:
            counts = ", ".join(str(c) for c in sorted(sets))
            raise ValueError(
                f"{entry!r} is ambiguous: shard sets of {counts} shards exist; "
                "name the count instead of '*'"
            )
        (total,) = sets
    else:
        total = int(count)
    present = sets.get(total, set())
    missing = [i for i in range(total) if i not in present]
    if missing:
        raise FileNotFoundError(
            errno.ENOENT,
            f"{entry}: shard {missing[0]} of {total} is missing ({len(missing)} missing in all)",
            shard_name(base, missing[0], total, suffix),
        )
    return [shard_name(base, i, total, suffix) for i in range(total)]


def existing_shard_sets(base: str, suffix: str) -> dict[int, list[str]]:
    """Every shard named `base-NNNNN-of-MMMMMsuffix` in its folder or bucket,
    by count M (none when the folder does not exist)."""
    cut = base.rfind("/") + 1
    folder, prefix = base[:cut], base[cut:]
    try:
        names = sorted(names_starting(folder, prefix, base))
    except FileNotFoundError:
        return {}
    shape = re.compile(re.escape(prefix) + r"-\d{5}-of-(\d{5})" + re.escape(suffix))
    sets: dict[int, list[str]] = {}
    for name in names:
        match = shape.fullmatch(name)
        if match:
            sets.setdefault(int(match.group(1)), []).append(folder + name)
    return sets


def _find_shard_set(base: str, suffix: str, entry: str) -> list[str]:
    """The shards of the one set `base-?????-of-?????suffix` on disk or in
    the bucket."""
    cut = base.rfind("/") + 1
    folder, prefix = base[:cut], base[cut:]
    listed = [folder + name for name in names_starting(folder, prefix, entry)]
    return choose_shard_set(listed, base, "*", suffix, entry)


# A spec without these characters is one plain local path: no list (","), no
# shard set ("@"), no "posix:" prefix or remote URL (":"). Tested with `in`,
# three of which cost half a regular expression's search.


def expand_file_spec(file_spec: str) -> list[str]:
    """The files of `file_spec`, in spec order.

    An entry that is a glob (`ev*.bag`, see `expand_glob`) stands for
    the files it matches, sorted.

    Raises ValueError for a malformed spec or an ambiguous `name@*`,
    FileNotFoundError when `name@*` finds no complete shard set or a glob
    matches nothing.
    """
    file_spec = path_argument(file_spec, "file_spec")
    if not file_spec:
        raise ValueError("file_spec is empty")
    if ("," not in file_spec and "@" not in file_spec and ":" not in file_spec
            and not is_glob(file_spec)):
        return [file_spec]  # one plain local path: the common case, kept cheap
    paths: list[str] = []
    for raw_entry in file_spec.split(","):
        if not raw_entry:
            raise ValueError(f"{file_spec!r} has an empty entry")
        entry = strip_local_prefix(raw_entry)
        sharded = split_shard_entry(entry)
        if sharded is None:
            paths.extend(expand_glob(entry) if is_glob(entry) else [entry])
            continue
        base, count, suffix = sharded
        if is_glob(base + suffix):
            raise ValueError(f"{raw_entry}: a shard spec cannot hold a glob besides '@*'; "
                             "match the shard files instead (e.g. 'name-*-of-*.ext')")
        if count == "*":
            paths.extend(_find_shard_set(base, suffix, raw_entry))
            continue
        n = int(count)
        paths.extend(shard_name(base, i, n, suffix) for i in range(n))
    return paths
