"""The output paths `WriteToSackli` accepts, as bagz's Beam sink does.

    dir/name@N.ext     N shards named dir/name-SSSSS-of-NNNNN.ext
    dir/name@*.ext     as many shards as the runner decides
    dir/name.ext@0     one unsharded file dir/name.ext (also dir/name@0.ext)

where `.ext` is `.bag` or `.bagz`, optionally preceded by more suffix
starting with `.` or `_` (`name@4.data.bagz`).
"""

from __future__ import annotations

import dataclasses
import re

from .._format import MAX_SHARDS, without_local_prefix
from ._files import split_name

__all__ = ["ShardedPath", "parse_write_path"]

_DEFAULT_TEMPLATE = "-SSSSS-of-NNNNN"
_SHARDED = re.compile(r"(?P<name>.*)@(?P<count>[0-9]+|\*)(?P<suffix>(?:[._].+)?\.bagz?)", re.DOTALL)
_UNSHARDED = re.compile(r"(?P<name>.+)(?P<suffix>\.bagz?)@0", re.DOTALL)

_FORMS = (
    "accepted forms: 'dir/name@N.ext' (N shards), 'dir/name@*.ext' (the runner "
    "picks the number of shards) and 'dir/name.ext@0' (one unsharded file), "
    "where .ext is .bag or .bagz, optionally preceded by more suffix "
    "('name@4.data.bagz')"
)


@dataclasses.dataclass(frozen=True)
class ShardedPath:
    """Where a sink writes: `prefix + shard name + suffix` per shard.

    `num_shards` 0 lets the runner decide; `template` is Beam's shard name
    template ('' for one unsharded file).
    """

    prefix: str
    suffix: str
    num_shards: int
    template: str


def parse_write_path(
    file_path: str, num_shards: int | None = None, shard_name_template: str | None = None
) -> ShardedPath:
    """The `ShardedPath` of `file_path`; `num_shards` and
    `shard_name_template` (Beam's) override the path's. Raises ValueError for
    other forms and conflicting arguments, TypeError for wrong types."""
    if not isinstance(file_path, str):
        raise TypeError(f"file_path must be a str or os.PathLike, not {type(file_path).__name__}")
    if num_shards is not None and (isinstance(num_shards, bool) or not isinstance(num_shards, int)):
        raise TypeError(f"num_shards must be an int, not {type(num_shards).__name__}")
    if shard_name_template is not None and not isinstance(shard_name_template, str):
        raise TypeError(
            f"shard_name_template must be a str, not {type(shard_name_template).__name__}"
        )
    path = without_local_prefix(file_path)
    folder, name = split_name(path)
    sharded, unsharded = _SHARDED.fullmatch(name), _UNSHARDED.fullmatch(name)
    if sharded:
        base, suffix, count = sharded["name"], sharded["suffix"], sharded["count"]
    elif unsharded:
        base, suffix, count = unsharded["name"], unsharded["suffix"], "0"
    else:
        raise ValueError(f"cannot write to {file_path!r}: {_FORMS}")
    if count == "0":
        if num_shards not in (None, 1):
            raise ValueError(
                f"{file_path!r} names one unsharded file, but num_shards={num_shards}"
            )
        template = "" if shard_name_template is None else shard_name_template
        return ShardedPath(folder + base, suffix, 1, template)
    if count == "*":
        shards = 0 if num_shards is None else num_shards
    else:
        shards = int(count)
        if num_shards is not None and num_shards != shards:
            raise ValueError(f"{file_path!r} names {shards} shards, but num_shards={num_shards}")
    if not 0 <= shards <= MAX_SHARDS:
        raise ValueError(
            f"num_shards must be between 0 (the runner decides) and {MAX_SHARDS}, not {shards}"
        )
    template = _DEFAULT_TEMPLATE if shard_name_template is None else shard_name_template
    if not template and shards != 1:
        # Beam writes one file for an empty template, whatever the count.
        raise ValueError(
            f"{file_path!r}: an empty shard_name_template writes one unsharded file; "
            "use 'dir/name.ext@0' for that, or a template with the shard number"
        )
    return ShardedPath(folder + base, suffix, shards, template)
