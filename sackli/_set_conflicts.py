"""No silent ambiguity in shard sets: what a writer checks before it writes
`name@N.ext`, and what `overwrite=True` removes after it published.

Two sets of one name and suffix with different counts (`dup-0000i-of-00003.bag`
and `dup-0000i-of-00002.bag`) make every `dup@*.bag` read fail as
ambiguous. So a writer of a shard set:

- refuses a shard count outside 1..MAX_SHARDS (`x@0.bag`, `x@100000.bag`),
  which readers take as a literal file name (as bagz does) and a writer
  would otherwise silently write under that name;
- refuses, with FileExistsError naming them, the other sets of its name
  (`refuse_other_sets`): before anything is written for `name@N.ext`, and
  for `name@*.ext` at `close()` once the count is known, before any shard
  is published;
- with `overwrite=True`, deletes those other sets once the new set is
  published (`remove_other_sets`): the new set appears, then the old one
  goes, so a reader sees the old set, both (briefly: `name@*` is then
  ambiguous, `name@N` reads either set whole) or the new one.

A set of the same count is not a conflict: it is replaced file by file as
it is written. Neither is a plain `name.ext` beside a set.

Beam's `WriteToSackli(..., overwrite=False)` keeps the same rule through
Beam's file systems (sackli/beam/_sink.py), with the same refusal
(`other_sets_error`) and the same companions of a set (`set_files`).
"""

from __future__ import annotations

import errno
import re
from typing import Mapping, Sequence

from ._consistency import manifest_url
from ._format import MAX_SHARDS, limits_path_for
from ._schema_names import SUFFIX as SCHEMA_SUFFIX
from ._shard_spec import existing_shard_sets, split_shard_entry
from ._storage import delete_objects

__all__ = [
    "LIBRARY_ADVICE", "check_shard_count", "other_sets_error", "refuse_other_sets",
    "remove_other_sets", "set_files", "spec_of",
]

# What a library caller passes to replace the other sets (the command line
# gives its own advice: --force).
LIBRARY_ADVICE = "pass overwrite=True to replace it"
_COUNT = re.compile(r"(\d+)(.*)", re.DOTALL)
_BAG_SUFFIXES = (".bag", ".bagz")
# Files about a whole bag set, beside it: a row set's schema (sackli.arrow),
# and the record format `sackli convert` writes for JSON texts
# (sackli/cli/_json_records.py).
_SET_FILE_SUFFIXES = (SCHEMA_SUFFIX, ".record_format")
_SHARD_NUMBERING = re.compile(r"-\d{5}-of-(\d{5})(?=[^/]*$)")


def check_shard_count(spec: str) -> None:
    """Raises ValueError when `spec` (a writer's target) has an `@` followed
    by a number outside 1..MAX_SHARDS: readers take `x@0.bag` as a literal
    name, but a writer must not silently create one."""
    at = spec.find("@", spec.rfind("/") + 1)
    match = _COUNT.fullmatch(spec, at + 1) if at >= 0 else None
    if match is None:
        return  # no `@`, or `user@host.log`: a literal name, no count
    digits, rest = match.groups()
    if 1 <= int(digits) <= MAX_SHARDS:
        return
    hint = "" if int(digits) else f"; for one unsharded file, write {spec[:at]}{rest}"
    raise ValueError(f"{spec}: a shard count is 1 to {MAX_SHARDS}, not {digits}{hint}")


def _other_sets(spec: str, count: int | None) -> dict[int, list[str]]:
    """The shard sets of `spec`'s name and suffix whose count is not
    `count`, by count (every set for `count=None`); {} for a plain path."""
    sharded = split_shard_entry(spec)
    if sharded is None:
        return {}
    base, _, suffix = sharded
    return {n: paths for n, paths in existing_shard_sets(base, suffix).items() if n != count}


def refuse_other_sets(spec: str, count: int | None, advice: str = LIBRARY_ADVICE) -> None:
    """Raises FileExistsError naming every shard set of `spec`'s name with
    another count than `count` (of `spec` itself when None: `name@N.ext`)."""
    sharded = split_shard_entry(spec)
    if sharded is None:
        return
    base, given, suffix = sharded
    if count is None:
        if given == "*":
            return  # not known before close()
        count = int(given)
    others = _other_sets(spec, count)
    if others:
        named = {f"{base}@{n}{suffix}": paths for n, paths in sorted(others.items())}
        raise other_sets_error(spec, named, f"{base}@*{suffix}", advice)


def other_sets_error(
    target: str, others: Mapping[str, Sequence[str]], ambiguous: str, advice: str = LIBRARY_ADVICE,
) -> FileExistsError:
    """The refusal to write `target` beside the other shard sets of its name:
    `others` maps how each is named (`dup@3.bag`) to its files; `ambiguous`
    is what a reader could no longer tell apart (`dup@*.bag`). Shared by
    every writer of shard sets (`sackli.ShardedWriter`, `sackli convert`,
    Beam's `WriteToSackli`), so the rule reads the same everywhere."""
    named = "; ".join(f"{name} ({_files(paths)})" for name, paths in others.items())
    first = next(iter(others.values()))[0]
    return FileExistsError(
        errno.EEXIST,
        f"{target}: another shard set of that name exists: {named}; writing beside it would "
        f"make {ambiguous} ambiguous; {advice}, or write to another name",
        first)


def spec_of(shard: str, count: str | None = None) -> str:
    """The `name@N.ext` spec of a shard path (`x-00001-of-00003.bag` ->
    `x@3.bag`; `x@*.bag` for count "*"), to name its set in messages; the
    path itself when its name has no `-SSSSS-of-NNNNN` numbering."""
    return _SHARD_NUMBERING.sub(
        lambda m: "@" + (count or str(int(m.group(1)))), shard, count=1)


def _files(paths: Sequence[str]) -> str:
    """`a` or `a and 2 more file(s)`: the shards of a set, briefly."""
    more = f" and {len(paths) - 1} more file(s)" if len(paths) > 1 else ""
    return paths[0] + more


def remove_other_sets(spec: str, count: int) -> None:
    """Deletes the shard sets of `spec`'s name with another count than
    `count`, the set just published, with their companions (`set_files`),
    the files about each set last: while shards remain, its manifest still
    describes them."""
    for paths in _other_sets(spec, count).values():
        own, about = set_files(paths)
        delete_objects(own)
        delete_objects(about)


def set_files(shards: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the set's own files, the files about it) of a shard set, given its
    shard paths: the shards and, for bags, their SEPARATE `limits.` files;
    then the files named after the whole set (`<name>-of-0000N.ext.<kind>`:
    schema, record format) and on a bucket its manifest. Names only (no
    I/O): which of them exist is the caller's to find. Shared by
    `remove_other_sets` and Beam's `WriteToSackli(overwrite=True)`."""
    bags = {path for path in shards if path.endswith(_BAG_SUFFIXES)}
    own = list(shards) + [limits_path_for(path) for path in shards if path in bags]
    about: list[str] = []
    for path in shards:
        if path in bags:
            # Not the shared `<name>.ext.arrow_schema` of older writers: a
            # plain `<name>.ext` bag may own it. A name without the default
            # numbering (a Beam template of the caller's) has its own
            # `<shard>.arrow_schema`, as `schema_path` names it.
            about_set = _SHARD_NUMBERING.sub(r"-of-\1", path, count=1)  # x-of-00003.bag
            about.extend(about_set + suffix for suffix in _SET_FILE_SUFFIXES)
        manifest = manifest_url(path)
        if manifest is not None:
            about.append(manifest)
    return own, list(dict.fromkeys(about))  # one per set, in order
