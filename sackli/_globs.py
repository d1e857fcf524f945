"""Globs in file specs: `ev*.bag`, `day?/x.bag`, `gs://b/logs/part-[0-4]*.bagz`.

An entry of a spec is a glob when one of its path components holds `*`, `?`
or a bracket set `[...]` (closed by `]` in the same component; a lone `[` is
an ordinary character). `name@*.ext` is not a glob: `_shard_spec` reads it as
the one shard set of that name before it gets here.

Matching follows the shell (Python's `fnmatch`, case-sensitive), per
component: `*` and `?` never match `/`, and `[*]` matches a literal `*`.
The matches are files (objects on a bucket), never folders, sorted as
strings. sackli's own working files are never matched unless the pattern
names them: names starting with `.` (hidden files, partial-write folders),
`limits.` (the limits of a SEPARATE bag), ending in `.arrow_schema` or
`.sackli_set` (a bag set's schema and manifest) or holding `-of-pending`
(shards of an unfinished in-place write).

Writers refuse a `*` (`refuse_glob`) and take `?` and `[` literally: a file
so named reads back by its name when the pattern matches itself (`q?.bag`),
or with the bracket quoted (`run[[]1].bag`).
"""

from __future__ import annotations

import errno
import fnmatch
import os

from ._format import LIMITS_PREFIX

__all__ = ["expand_glob", "is_glob", "refuse_glob"]

# Name starts and ends that mark sackli's own working files (see above): a
# pattern component matches such a name only if it starts or ends the same.
_HIDDEN_STARTS = (".", LIMITS_PREFIX)
_SIDECAR_ENDS = (".arrow_schema", ".sackli_set")
_PENDING = "-of-pending"


def _closes_bracket(component: str, start: int) -> bool:
    """Whether the `[` at `start` opens a set that `]` closes (fnmatch's
    rule: `[!]...]` and `[]...]` take the first `]` as a member)."""
    end = start + 1
    if end < len(component) and component[end] == "!":
        end += 1
    if end < len(component) and component[end] == "]":
        end += 1
    return component.find("]", end) >= 0


def _component_is_glob(component: str) -> bool:
    if "*" in component or "?" in component:
        return True
    start = component.find("[")
    while start >= 0:
        if _closes_bracket(component, start):
            return True
        start = component.find("[", start + 1)
    return False


def is_glob(entry: str) -> bool:
    """Whether the path or URL `entry` is a pattern (see the module docstring)."""
    if "*" in entry or "?" in entry:
        return True
    return "[" in entry and any(_component_is_glob(part) for part in entry.split("/"))


def refuse_glob(spec: str, path: str) -> None:
    """Raises ValueError when a writer's `path` (`spec` without its
    `posix:` prefix) holds a `*` other than the count of `name@*.ext`.

    A writer takes its name literally otherwise: `?` and `[` are legal in
    file and object names (`hash#q?.bag`), and a `*` there is almost always
    a reading pattern given to a writer by mistake."""
    from ._shard_spec import split_shard_entry  # which imports this module

    sharded = split_shard_entry(path)
    if "*" in (path if sharded is None else sharded[0] + sharded[2]):
        raise ValueError(
            f"{spec}: a writer needs one name, not a glob pattern ('*' matches existing files "
            "when reading; 'name@*.ext' with max_shard_bytes is the one pattern a writer "
            "takes)")


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


def _matches(name: str, pattern: str) -> bool:
    """Whether one path component `name` matches one pattern component."""
    if not _component_is_glob(pattern):
        return name == pattern
    return bool(name) and fnmatch.fnmatchcase(name, pattern) and not _own_file(name, pattern)


def _split_at_first_glob(parts: list[str]) -> int:
    return next(i for i, part in enumerate(parts) if _component_is_glob(part))


def _local_names(folder: str, pattern: str, last: bool) -> list[str]:
    """Names in `folder` ('' for the current one) matching the component
    `pattern`: files when `last`, else folders."""
    if not _component_is_glob(pattern):
        candidates = [pattern]
    else:
        try:
            candidates = [name for name in os.listdir(folder or ".") if _matches(name, pattern)]
        except OSError:  # a missing or unreadable folder matches nothing, as in a shell
            return []
    test = os.path.isfile if last else os.path.isdir
    return [name for name in candidates if test(folder + name)]


def _local_matches(pattern: str) -> list[str]:
    """The local files matching `pattern`, folder by folder."""
    parts = pattern.split("/")
    first = _split_at_first_glob(parts)
    found = ["/".join(parts[:first]) + "/" if first else ""]
    for depth, part in enumerate(parts[first:], start=first):
        last = depth == len(parts) - 1
        found = [folder + name + ("" if last else "/")
                 for folder in found for name in _local_names(folder, part, last)]
    return found


def _remote_matches(pattern: str) -> list[str]:
    """The objects matching the URL `pattern`, from one listing of the
    literal prefix before its first glob character."""
    from ._storage import list_objects

    scheme, _, rest = pattern.partition("://")
    bucket, _, key = rest.partition("/")
    if _component_is_glob(bucket):
        raise ValueError(f"{pattern}: the bucket name cannot be a glob; only object names can")
    root = f"{scheme}://{bucket}/"
    parts = key.split("/")
    first = _split_at_first_glob(parts)
    folder = "".join(part + "/" for part in parts[:first])
    literal = parts[first][:min((i for i, c in enumerate(parts[first]) if c in "*?["), default=0)]
    found = []
    for url, _ in list_objects(root + folder + literal):
        names = url[len(root + folder):].split("/")
        if len(names) == len(parts) - first and all(map(_matches, names, parts[first:])):
            found.append(url)
    return found


def expand_glob(pattern: str) -> list[str]:
    """The files (or objects, for a `gs://` / `s3://` pattern) matching the
    glob `pattern`, sorted.

    Raises FileNotFoundError naming the pattern when none matches.
    """
    from ._storage import is_remote

    remote = is_remote(pattern)
    found = _remote_matches(pattern) if remote else _local_matches(pattern)
    if not found:
        hint = ""
        if not remote and os.path.exists(pattern):  # `run[1].bag`, named before globs
            hint = "; to name the file of that very name, write '[' as '[[]', '*' as '[*]'"
        raise FileNotFoundError(errno.ENOENT, f"{pattern}: no file matches{hint}", pattern)
    return sorted(found)
