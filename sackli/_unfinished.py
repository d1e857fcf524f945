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
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from typing import Any

from ._format import PARTIAL_MARKER, partial_folder_prefix
from ._shard_spec import split_shard_entry, strip_local_prefix
from ._storage import local_entries

__all__ = [
    "JOURNAL", "UnfinishedWrite", "explained_missing", "make_write_folder", "read_journal", "unfinished_writes",
    "unfinished_writes_in_spec", "unfinished_writes_of", "write_journal", "write_of_folder",
]

JOURNAL = "sackli-write.json"
"""The journal of a compound write, in its hidden folder."""

BAG = "bag"
"""The kind of a `sackli.Writer`'s folder (no journal)."""


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
    """The journal of a compound write; None for a bag."""

    @property
    def where(self) -> str:
        """What it wrote: a bag's records file, else its folder."""
        if self.kind == BAG:
            return os.path.join(self.folder, os.path.basename(self.target))
        return self.folder

    def describe(self) -> str:
        """One line: what it is, where, and the command that completes it."""
        what = "a shard set" if self.kind == "set" else f"a {self.kind}"
        return (f"{self.target}: an unfinished write ({what}, in {self.where}); "
                f"complete it with: sackli recover {self.target}")


def make_write_folder(target: str) -> str:
    """Creates the hidden folder of a new write of local `target` (glob
    characters of `name@*.ext` percent-encoded in its name: the journal
    holds the target as written)."""
    folder, name = os.path.split(target)
    for character in "%*?[":
        name = name.replace(character, f"%{ord(character):02X}")
    prefix = partial_folder_prefix(os.path.join(folder, name))
    folder, start = os.path.split(prefix)
    return tempfile.mkdtemp(prefix=start, dir=folder or ".")


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
        with open(path, "rb") as file:
            text = file.read()
    except FileNotFoundError:
        return None
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
    is not one."""
    folder, entry = os.path.split(path)
    if not entry.startswith(".") or PARTIAL_MARKER not in entry or not os.path.isdir(path):
        return None
    journal = read_journal(path)
    if journal is None:
        return UnfinishedWrite(os.path.join(folder, entry[1:entry.rindex(PARTIAL_MARKER)]),
                               path, BAG, journal)
    name = journal.get("target")
    if not isinstance(name, str) or not name or os.sep in name:
        raise ValueError(f"{path}: the journal of an unfinished sackli write names no target")
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
    writes = unfinished_writes_in_spec(file_spec)
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
