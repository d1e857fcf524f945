"""Globs over files and objects: `ev*.bag`, `day?/x.bag`,
`gs://b/logs/part-[0-4]*.bagz`.

A path component is a glob when it holds `*`, `?` or a bracket set `[...]`
(closed by `]` in the same component; a lone `[` is an ordinary character).
Matching follows the shell (Python's `fnmatch`, case-sensitive), per
component: `*` and `?` never match `/`, and `[*]` matches a literal `*`.
The matches are files (objects on a bucket), never folders, sorted as
strings: locally found folder by folder, remotely from one listing of the
literal prefix before the first glob character. The caller tells which
names a glob skips (`own_file`: sackli's working files, see
`sackli._shard_spec`).
"""

from __future__ import annotations

import errno
import fnmatch
import os
from typing import Callable

from ._objects import list_objects
from ._urls import is_remote

__all__ = ["OwnFile", "expand_glob", "is_glob"]

# (name, pattern component) -> whether the glob skips `name`.
OwnFile = Callable[[str, str], bool]


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


def _matches(name: str, pattern: str, own_file: OwnFile) -> bool:
    """Whether one path component `name` matches one pattern component."""
    if not _component_is_glob(pattern):
        return name == pattern
    return bool(name) and fnmatch.fnmatchcase(name, pattern) and not own_file(name, pattern)


def _split_at_first_glob(parts: list[str]) -> int:
    return next(i for i, part in enumerate(parts) if _component_is_glob(part))


def _local_names(folder: str, pattern: str, last: bool, own_file: OwnFile) -> list[str]:
    """Names in `folder` ('' for the current one) matching the component
    `pattern`: files when `last`, else folders."""
    if not _component_is_glob(pattern):
        candidates = [pattern]
    else:
        try:
            candidates = [name for name in os.listdir(folder or ".")
                          if _matches(name, pattern, own_file)]
        except OSError:  # a missing or unreadable folder matches nothing, as in a shell
            return []
    test = os.path.isfile if last else os.path.isdir
    return [name for name in candidates if test(folder + name)]


def _local_matches(pattern: str, own_file: OwnFile) -> list[str]:
    """The local files matching `pattern`, folder by folder."""
    parts = pattern.split("/")
    first = _split_at_first_glob(parts)
    found = ["/".join(parts[:first]) + "/" if first else ""]
    for depth, part in enumerate(parts[first:], start=first):
        last = depth == len(parts) - 1
        found = [folder + name + ("" if last else "/")
                 for folder in found for name in _local_names(folder, part, last, own_file)]
    return found


def _remote_matches(pattern: str, own_file: OwnFile) -> list[str]:
    """The objects matching the URL `pattern`, from one listing of the
    literal prefix before its first glob character."""
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
        if len(names) == len(parts) - first and all(
                _matches(name, part, own_file) for name, part in zip(names, parts[first:])):
            found.append(url)
    return found


def expand_glob(pattern: str, own_file: OwnFile) -> list[str]:
    """The files (or objects, for a `gs://` / `s3://` pattern) matching the
    glob `pattern`, sorted. `own_file(name, pattern_component)` tells the
    names a matching component skips (working files the pattern does not
    name).

    Raises FileNotFoundError naming the pattern when none matches.
    """
    remote = is_remote(pattern)
    found = _remote_matches(pattern, own_file) if remote else _local_matches(pattern, own_file)
    if not found:
        hint = ""
        if not remote and os.path.exists(pattern):  # `run[1].bag`, named before globs
            hint = "; to name the file of that very name, write '[' as '[[]', '*' as '[*]'"
        raise FileNotFoundError(errno.ENOENT, f"{pattern}: no file matches{hint}", pattern)
    return sorted(found)
