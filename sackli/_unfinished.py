"""Unfinished writes: where they live, what they are, how to find them.

Every local write that has not finished keeps what it wrote in one hidden
folder beside its target `dir/name`: `dir/.<name>.sackli-partial-<tag>/`,
where `<name>` is the target's name as written (a bag's file name, a shard
spec such as `train@8.bagz`, a dataset folder's or a map's name). A write
finishes by moving its files onto the target and removing the folder; a
write that fails removes it; a process that dies leaves it.

What the folder holds says what kind of write it is:
- a bag (`sackli.Writer`): the file `<name>` and, until it finished,
  `limits.<name>`. No journal.
- a compound write (a shard set, a dataset, a map): a journal,
  `sackli-write.json`, written before any record can reach the disk and
  rewritten as the write's plan changes. `{"kind": ..., "target": <name>,
  ...}`; kinds that core sackli does not complete itself name the module
  whose `recover_unfinished(folder, journal)` does (`"module"`).

`sackli.recover` (`_recover`) completes them; `sackli info`, `verify` and
`recover DIR` list them with `unfinished_writes`.

A hidden folder is untrusted input (it may come with a download or sit in a
shared folder): one that `_partial_trust` refuses (a link, links or hard
links inside), or whose journal names another target than the folder's own
name, is listed with `refused` set, and recovery raises that error instead
of acting on it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import tempfile
from typing import Any

from ._format import PARTIAL_MARKER, partial_folder_prefix
from ._partial_trust import check_partial_folder
from ._shard_spec import split_shard_entry, strip_local_prefix
from ._storage import local_entries

__all__ = [
    "JOURNAL", "UnfinishedWrite", "explained_missing", "folder_name_of", "make_write_folder", "read_journal", "unfinished_writes",
    "unfinished_writes_in_spec", "unfinished_writes_of", "write_journal", "write_of_folder",
]

JOURNAL = "sackli-write.json"
"""The journal of a compound write, in its hidden folder."""

BAG = "bag"
"""The kind of a `sackli.Writer`'s folder (no journal)."""

_MAX_JOURNAL_BYTES = 1 << 20
"""A journal is a few hundred bytes; a bigger file is not one sackli wrote."""


@dataclasses.dataclass(frozen=True)
class UnfinishedWrite:
    """One unfinished write found on disk."""

    target: str
    """What the write was making: a path, or a shard spec (`dir/x@8.bagz`)."""
    folder: str
    """Its hidden folder, `.<name>.sackli-partial-<tag>/` beside `target`."""
    kind: str
    """"bag", "set", "dataset", "map", ... (the journal's kind)."""
    journal: dict[str, Any] | None
    """The journal of a compound write; None for a bag (and for a refused
    folder: its journal is not read)."""
    refused: OSError | ValueError | None = dataclasses.field(default=None, compare=False)
    """Why recovery will not act on this folder (see `_partial_trust`); None
    when it passed the checks."""

    @property
    def where(self) -> str:
        """What it wrote: a bag's records file, else its folder."""
        if self.kind == BAG:
            return os.path.join(self.folder, os.path.basename(self.target))
        return self.folder

    def describe(self) -> str:
        """One line: what it is, where, and the command that completes it
        (or why it will not be recovered)."""
        if self.refused is not None:
            return f"{self.folder}: a hidden folder that sackli will not recover: {self.refused}"
        what = "a shard set" if self.kind == "set" else f"a {self.kind}"
        return (f"{self.target}: an unfinished write ({what}, in {self.where}); "
                f"complete it with: sackli recover {self.target}")


def make_write_folder(target: str) -> str:
    """Creates the hidden folder of a new write of local `target` (glob
    characters of `name@*.ext` percent-encoded in its name: the journal
    holds the target as written)."""
    folder, name = os.path.split(target)
    prefix = partial_folder_prefix(os.path.join(folder, folder_name_of(name)))
    folder, start = os.path.split(prefix)
    return tempfile.mkdtemp(prefix=start, dir=folder or ".")


def folder_name_of(target_name: str) -> str:
    """How a journal's target is spelled in its folder's name (glob
    characters percent-encoded)."""
    for character in "%*?[":
        target_name = target_name.replace(character, f"%{ord(character):02X}")
    return target_name


def write_journal(folder: str, journal: dict[str, Any]) -> None:
    """Writes the journal of the new write in `folder` (once: it is not
    replaced; a write records its progress in its files)."""
    with open(os.path.join(folder, JOURNAL), "x") as file:
        json.dump(journal, file, indent=1)


def read_journal(folder: str) -> dict[str, Any] | None:
    """The journal in `folder`; None when there is none. ValueError when it
    is not one sackli wrote (damaged, or not a JSON object with a kind)."""
    path = os.path.join(folder, JOURNAL)
    try:
        # O_NOFOLLOW: a journal swapped for a link is not read through it.
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    with open(descriptor, "rb") as file:
        text = file.read(_MAX_JOURNAL_BYTES + 1)
    try:
        journal = json.loads(text)
    except ValueError:
        journal = None
    if not isinstance(journal, dict) or not isinstance(journal.get("kind"), str):
        raise ValueError(f"{path}: not a journal of an unfinished sackli write (damaged?)")
    return journal


def _write_in(folder: str, entry: str) -> UnfinishedWrite | None:
    """The unfinished write whose hidden folder is `folder/entry`, if it is one."""
    if not entry.startswith(".") or PARTIAL_MARKER not in entry:
        return None
    return write_of_folder(os.path.join(folder, entry))


def write_of_folder(path: str) -> UnfinishedWrite | None:
    """The unfinished write whose hidden folder is `path`; None when `path`
    is not one. A folder that recovery must not act on (see the module's
    note) is returned with `refused` set; its journal is not read."""
    folder, entry = os.path.split(path)
    if not entry.startswith(".") or PARTIAL_MARKER not in entry:
        return None
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    named = entry[1:entry.rindex(PARTIAL_MARKER)]
    if not stat.S_ISDIR(mode) and not stat.S_ISLNK(mode):
        return None  # a file of that name: not a write's folder
    try:
        check_partial_folder(path)
    except PermissionError as error:
        return UnfinishedWrite(os.path.join(folder, named), path, BAG, None, error)
    journal = read_journal(path)
    if journal is None:
        return UnfinishedWrite(os.path.join(folder, named), path, BAG, journal)
    name = journal.get("target")
    if not isinstance(name, str) or not name or os.sep in name or name in (".", ".."):
        raise ValueError(f"{path}: the journal of an unfinished sackli write names no target")
    if folder_name_of(name) != named:
        mismatch = ValueError(
            f"{path}: its journal names the target {name!r}, not {named!r} that the folder is "
            "named for: not recovered (a journal only completes the write of its own folder; "
            "look inside, then delete the folder)")
        return UnfinishedWrite(os.path.join(folder, named), path, journal["kind"], None, mismatch)
    return UnfinishedWrite(os.path.join(folder, name), path, journal["kind"], journal)


def unfinished_writes(folder: str) -> list[UnfinishedWrite]:
    """Every unfinished write whose target is in `folder`, by target name
    (then oldest first). A write in place (`atomic=False`) is not listed:
    its `limits.<name>` looks like a complete bag's SEPARATE limits. None
    in a remote folder: only a local writer leaves an unfinished write (a
    bucket keeps nothing of a write that did not complete)."""
    try:
        entries = local_entries(folder)  # none in a bucket
    except OSError:
        return []
    found = [write for entry in entries if (write := _write_in(folder, entry)) is not None]
    return sorted(found, key=lambda write: (write.target, _age(write.folder)))


def unfinished_writes_of(target: str) -> list[UnfinishedWrite]:
    """The unfinished writes of local `target` (a path or a shard spec),
    oldest first."""
    folder = os.path.dirname(target)
    name = os.path.basename(target)
    found = [write for write in unfinished_writes(folder)
             if os.path.basename(write.target) == name]
    return sorted(found, key=lambda write: _age(write.folder))


def unfinished_writes_in_spec(file_spec: str) -> list[UnfinishedWrite]:
    """The unfinished writes that could have made the files of
    `file_spec` (every entry of a comma list): of a path (or of the set it
    is a shard of), of `name@N.ext` or its shards, of any
    `name@<count or *>.ext` for `name@*.ext`."""
    found: list[UnfinishedWrite] = []
    for raw_entry in file_spec.split(","):
        entry = strip_local_prefix(raw_entry)
        if entry:
            found.extend(write for write in unfinished_writes(os.path.dirname(entry))
                         if _could_make(write.target, entry))
    return found


def _could_make(target: str, entry: str) -> bool:
    """Whether a write of `target` makes (some of) the files of `entry`."""
    if target == entry:
        return True
    made, wanted = split_shard_entry(target), split_shard_entry(entry)
    if made is not None:  # a set: its shards, or a spec of it
        base, count, suffix = made
        if wanted is not None:
            return wanted[0] == base and wanted[2] == suffix and wanted[1] in ("*", count)
        shard = re.fullmatch(re.escape(base) + r"-\d{5}-of-(\d{5}|pending)" + re.escape(suffix),
                             entry)
        return shard is not None
    if wanted is not None:  # a shard's own write (sets written before journals)
        base, _, suffix = wanted
        return target.startswith(base + "-") and target.endswith(suffix)
    return False


def explained_missing(error: FileNotFoundError, file_spec: str) -> FileNotFoundError:
    """`error`, saying so when an unfinished write explains the missing
    file: a write that a crash (or a writer dropped without close()) left,
    which `sackli.recover` completes."""
    writes = [write for write in unfinished_writes_in_spec(file_spec) if write.refused is None]
    if not writes:
        return error
    write = writes[-1]
    missing = error.filename if isinstance(error.filename, str) else write.target
    return FileNotFoundError(
        error.errno,
        f"{missing}: no such file, but an unfinished write of {write.target} exists "
        f"({write.where}): complete it with sackli.recover(path) (from a shell: sackli "
        "recover PATH), unless a writer still has it open",
        missing,
    )


def _age(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0
