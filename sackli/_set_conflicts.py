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
"""

from __future__ import annotations

import errno
import re

from ._consistency import manifest_url
from ._format import MAX_SHARDS, limits_path_for
from ._schema_names import SUFFIX as SCHEMA_SUFFIX
from ._shard_spec import existing_shard_sets, split_shard_entry
from ._storage import is_remote
from ._whole_files import remove_quietly

__all__ = ["check_shard_count", "refuse_other_sets", "remove_other_sets"]

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
    if not others:
        return
    named = "; ".join(f"{base}@{n}{suffix} ({_files(paths)})" for n, paths in sorted(others.items()))
    first = others[min(others)][0]
    raise FileExistsError(
        errno.EEXIST,
        f"{spec}: another shard set of that name exists: {named}; writing beside it would make "
        f"{base}@*{suffix} ambiguous; {advice}, or write to another name",
        first)


def _files(paths: list[str]) -> str:
    """`a` or `a and 2 more file(s)`: the shards of a set, briefly."""
    more = f" and {len(paths) - 1} more file(s)" if len(paths) > 1 else ""
    return paths[0] + more


def remove_other_sets(spec: str, count: int) -> None:
    """Deletes the shard sets of `spec`'s name with another count than
    `count`, the set just published: their shards and `limits.` files, then
    the files about each whole set (`<name>-of-0000N.ext.<kind>`: schema,
    record format) and on a bucket its manifest, last: while shards remain,
    the manifest still describes them."""
    for paths in _other_sets(spec, count).values():
        bags = paths[0].endswith(_BAG_SUFFIXES)
        files = [file for path in paths for file in ([path, limits_path_for(path)] if bags else [path])]
        if bags:
            # Not the shared `<name>.ext.arrow_schema` of older writers: a
            # plain `<name>.ext` bag may own it.
            about_set = _SHARD_NUMBERING.sub(r"-of-\1", paths[0], count=1)  # x-of-00003.bag
            files.extend(about_set + suffix for suffix in _SET_FILE_SUFFIXES)
        if is_remote(paths[0]):
            manifest = manifest_url(paths[0])
            if manifest is not None:
                files.append(manifest)
        remove_quietly(files)
