"""The output paths `WriteToSackli` accepts, as bagz's Beam sink does.

    dir/name@N.ext     N shards named dir/name-SSSSS-of-NNNNN.ext
    dir/name@*.ext     as many shards as the runner decides
    dir/name.ext@0     one unsharded file dir/name.ext (also dir/name@0.ext)

A count is a number (`@007` is 7 shards, `@00` is `@0`), 1 to 99,999, or 0
for "no sharding" as in bagz's Beam sink. `sackli.ShardedWriter`,
`write_table` and `sackli convert` refuse `@0` instead (a ValueError that
names `dir/name.ext`, the one file it stands for here); readers take
`x@0.bag` as a literal file name (see docs/usage.md, "Shard counts").

where `.ext` is `.bag` or `.bagz`, optionally preceded by more suffix
starting with `.` or `_` (`name@4.data.bagz`).

As Beam's `WriteToText` / `WriteToTFRecord` do, a path without `@` is a
plain prefix: `("dir/name", file_name_suffix=".bagz", num_shards=3)` writes
`dir/name-SSSSS-of-00003.bagz`. Without `file_name_suffix` the suffix is
`.bag`, or `.bagz` when the records are zstd-compressed (the caller's
`default_suffix`), so the names say how to read them. The two forms do not
mix: a suffix beside an `@` path is a ValueError, and so is a bare prefix
that ends in `.bag`/`.bagz` (one file is `name.bag@0`) or holds an `@` (a
shard count without its suffix).

Unbounded (streaming) input writes one shard set per window, or per pane
when its windows can fire more than once, so its template must carry the
window (`W`) and then the pane (`P`); see `for_unbounded_input`.
"""

from __future__ import annotations

import dataclasses
import os
import re

from .._sets import MAX_SHARDS, without_local_prefix
from .._storage import path_argument
from ._files import split_name

__all__ = ["ShardedPath", "for_unbounded_input", "parse_write_path"]

_DEFAULT_TEMPLATE = "-SSSSS-of-NNNNN"
# Beam's default for windowed writes (filebasedsink): the window before the
# shard number, so each window's shards form their own `name-W@N.ext` set.
_DEFAULT_WINDOW_TEMPLATE = "-W-SSSSS-of-NNNNN"
# For windows that fire more than once: the pane's index after the window
# (`name-<window>-pane-2-00000-of-00001.bagz`), as Beam Java's "pane-2".
_DEFAULT_PANE_TEMPLATE = "-W-pane-P-SSSSS-of-NNNNN"
_BAG_SUFFIX = re.compile(r"\.bagz?$")
_SHARDED = re.compile(r"(?P<name>.*)@(?P<count>[0-9]+|\*)(?P<suffix>(?:[._].+)?\.bagz?)", re.DOTALL)
_UNSHARDED = re.compile(r"(?P<name>.+)(?P<suffix>\.bagz?)@0+", re.DOTALL)

_FORMS = (
    "accepted forms: 'dir/name@N.ext' (N shards), 'dir/name@*.ext' (the runner "
    "picks the number of shards) and 'dir/name.ext@0' (one unsharded file), "
    "where .ext is .bag or .bagz, optionally preceded by more suffix "
    "('name@4.data.bagz'); or a plain prefix 'dir/name' (shards "
    "'dir/name-SSSSS-of-NNNNN.bag', '.bagz' for zstd records)"
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
    template_given: bool = False
    """Whether the caller chose `template` (streaming keeps it then)."""

    @property
    def unsharded(self) -> bool:
        return not self.template

    def pattern(self) -> str:
        """How the names look, for display: `dir/name-SSSSS-of-NNNNN.bagz`."""
        return self.prefix + self.template + self.suffix


def _check_types(file_path, num_shards, shard_name_template, file_name_suffix) -> None:
    path_argument(file_path, "file_path")
    if num_shards is not None and (isinstance(num_shards, bool) or not isinstance(num_shards, int)):
        raise TypeError(f"num_shards must be an int, not {type(num_shards).__name__}")
    for name, value in (("shard_name_template", shard_name_template),
                        ("file_name_suffix", file_name_suffix)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")


def _split_path(
    file_path: str, file_name_suffix: str | None, default_suffix: str
) -> tuple[str, str, str, bool]:
    """(prefix, suffix, shard count: digits, '*' or '0', whether `file_path`
    is a plain prefix) of `file_path`."""
    path = without_local_prefix(file_path)
    folder, name = split_name(path)
    sharded, unsharded = _SHARDED.fullmatch(name), _UNSHARDED.fullmatch(name)
    if file_name_suffix is not None:
        if sharded or unsharded:
            raise ValueError(
                f"{file_path!r} names its shards and suffix itself; file_name_suffix "
                f"({file_name_suffix!r}) goes with a plain file_path_prefix such as 'dir/name'"
            )
        if not name:
            raise ValueError(f"file_path_prefix {file_path!r} has no file name")
        return path, file_name_suffix, "*", True
    if sharded:
        count = sharded["count"]
        if count != "*" and int(count) == 0:
            count = "0"  # a number: `@00` is `@0`, one unsharded file
        return folder + sharded["name"], sharded["suffix"], count, False
    if unsharded:
        return folder + unsharded["name"], unsharded["suffix"], "0", False
    # A bare prefix, as WriteToTFRecord takes one; but not a name that
    # looks like a half-written form of ours, whose intent is unclear.
    if name and "@" not in name and not _BAG_SUFFIX.search(name):
        return path, default_suffix, "*", True
    raise ValueError(f'File path "{file_path}" must be in the form of one of the {_FORMS}')


def parse_write_path(
    file_path: str | os.PathLike[str],
    num_shards: int | None = None,
    shard_name_template: str | None = None,
    file_name_suffix: str | None = None,
    default_suffix: str = ".bag",
) -> ShardedPath:
    """The `ShardedPath` of `file_path`; `num_shards` and
    `shard_name_template` (Beam's) override the path's. A path without `@`
    is a plain prefix (Beam's form), completed by `file_name_suffix`, else
    by `default_suffix`. Raises ValueError for other forms and conflicting
    arguments, TypeError for wrong types."""
    _check_types(file_path, num_shards, shard_name_template, file_name_suffix)
    file_path = path_argument(file_path, "file_path")
    base, suffix, count, prefix_form = _split_path(file_path, file_name_suffix, default_suffix)
    given = shard_name_template is not None
    if prefix_form and shard_name_template == "":
        count = "0"  # Beam's empty template on a prefix: one file prefix + suffix
    if count == "0":
        if num_shards not in (None, 1):
            raise ValueError(
                f"{file_path!r} names one unsharded file, but num_shards={num_shards}"
            )
        template = "" if shard_name_template is None else shard_name_template
        return ShardedPath(base, suffix, 1, template, given)
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
    return ShardedPath(base, suffix, shards, template, given)


def for_unbounded_input(where: ShardedPath, fires_once: bool) -> ShardedPath:
    """`where` for a stream: every window writes its own shard set, and,
    unless each window `fires_once`, every pane of a window its own set. The
    default template gains the window (`-W-SSSSS-of-NNNNN`) and then the
    pane (`-W-pane-P-SSSSS-of-NNNNN`); a template of the caller's must hold
    them itself. ValueError otherwise: windows (or panes) would write the
    same names and replace each other's output."""
    if where.unsharded:
        raise ValueError(
            f"writing unbounded input to one unsharded file {where.pattern()!r}: every "
            "window would replace it; give a shard count ('dir/name@1.bagz')"
        )
    default = _DEFAULT_WINDOW_TEMPLATE if fires_once else _DEFAULT_PANE_TEMPLATE
    if not where.template_given:
        return dataclasses.replace(where, template=default)
    if "W" not in where.template:
        raise ValueError(
            f"writing unbounded input to {where.pattern()!r}: every window would write the "
            "same names; use a shard_name_template with the window ('W'), e.g. "
            f"{default!r}"
        )
    if not fires_once and "P" not in where.template:
        raise ValueError(
            f"writing unbounded input to {where.pattern()!r}: its windows can fire more than "
            "once (early or late panes), and every pane would write the same names; use a "
            f"shard_name_template with the pane ('P'), e.g. {default!r}"
        )
    return where
