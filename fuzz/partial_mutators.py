"""Mutations of a partial seed (fuzz/partial_paths.py): what a download or a
shared folder could hold in place of a killed writer's hidden folder.

Ops (replayable, as fuzz/mutators.py's):
  symlink   {file, to}         `file` (an entry, or a hidden folder itself) becomes a link to `to`
  hardlink  {file, to}         `file` becomes a second name of the file `to`
  fifo      {file}             `file` becomes a fifo
  journal   {file, key, value} one key of a journal set to `value` (JSON)
  rename    {file, to}         a hidden folder renamed (another target, control characters)
plus fuzz/mutators.py's flip and truncate on regular files inside the folders.

`file` and `to` are relative to the mutant's folder; a link's `to` is the
link's text.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from typing import Any

__all__ = ["PARTIAL_OPS", "apply_partial_op", "gen_partial"]

PARTIAL_OPS = ("symlink", "hardlink", "fifo", "journal", "rename")
_MARKER = ".sackli-partial-"
_JOURNAL = "sackli-write.json"
# Names a crafted journal or folder may claim: the sentinel beside the
# writes, the real set's files and spec, the other writes', a terminal escape.
_NAMES = ["notes.txt", "s@3.bag", "s@2.bag", "s-00000-of-00003.bag", "data.bag", "m.mb",
          "evil\x1b[2J\x07.bag", "../outside.txt"]
_JOURNAL_VALUES: dict[str, list[Any]] = {
    "target": _NAMES + ["", ".", "sub/x.bag"],
    "overwrite": [True, False],
    "kind": ["set", "map", "bag", "dataset"],
    "mode": ["count", "size", "spool", "other"],
    "counts": [[1], [4, 4], [0, 0, 0], [1, 1, 1]],
    "module": ["sackli.maps._recover", "sackli.datasets._recover", "os"],
}


def _clear(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def apply_partial_op(folder: str, op: dict[str, Any]) -> bool:
    """Applies one of PARTIAL_OPS in `folder`; False when it changed nothing."""
    kind = op["op"]
    path = os.path.join(folder, op["file"])
    if kind == "symlink":
        _clear(path)
        os.symlink(op["to"], path)
        return True
    if kind == "hardlink":
        source = os.path.join(folder, op["to"])
        if not os.path.isfile(source) or os.path.islink(source) or not os.path.lexists(path):
            return False
        _clear(path)
        os.link(source, path)
        return True
    if kind == "fifo":
        if not os.path.lexists(path):
            return False
        _clear(path)
        os.mkfifo(path)
        return True
    if kind == "journal":
        try:
            with open(path, "rb") as file:
                journal = json.loads(file.read())
        except (OSError, ValueError):
            return False
        if not isinstance(journal, dict):
            return False
        journal[op["key"]] = op["value"]
        with open(path, "w") as file:
            json.dump(journal, file)
        return True
    if kind == "rename":
        destination = os.path.join(folder, op["to"])
        if not os.path.lexists(path) or os.path.lexists(destination):
            return False
        os.rename(path, destination)
        return True
    raise ValueError(f"unknown op {kind!r}")


def _entries(folder: str) -> tuple[list[str], list[str]]:
    """(hidden folders, entries inside them) of the mutant's work/, relative
    to `folder`; links not followed."""
    work = os.path.join(folder, "work")
    hidden = sorted(os.path.join("work", e) for e in os.listdir(work) if _MARKER in e)
    inside = []
    for partial in hidden:
        if os.path.islink(os.path.join(folder, partial)):
            continue
        for where, folders, files in os.walk(os.path.join(folder, partial)):
            for name in files + folders:
                inside.append(os.path.relpath(os.path.join(where, name), folder))
    return hidden, sorted(inside)


def gen_partial(rng: random.Random, folder: str) -> dict[str, Any] | None:
    """One op for the partial mutant in `folder`, or None when none fits."""
    hidden, inside = _entries(folder)
    if not hidden:
        return None
    roll = rng.random()
    regular = [e for e in inside if os.path.isfile(os.path.join(folder, e))
               and not os.path.islink(os.path.join(folder, e))]
    journals = [e for e in regular if os.path.basename(e) == _JOURNAL]
    if roll < 0.3:
        file = rng.choice(hidden + inside + inside)
        depth = file.count("/")
        up = "../" * depth
        to = rng.choice([up + "outside.txt", up + "work/notes.txt", up + "work/data.bag",
                         up + "work/s-00000-of-00003.bag", "/nonexistent/sackli", up + "work"])
        return {"op": "symlink", "file": file, "to": to}
    if roll < 0.45 and regular:
        return {"op": "hardlink", "file": rng.choice(regular),
                "to": rng.choice(["outside.txt", "work/notes.txt", "work/s-00001-of-00003.bag"])}
    if roll < 0.52 and inside:
        return {"op": "fifo", "file": rng.choice(inside)}
    if roll < 0.75 and journals:
        key = rng.choice(list(_JOURNAL_VALUES))
        return {"op": "journal", "file": rng.choice(journals), "key": key,
                "value": rng.choice(_JOURNAL_VALUES[key])}
    if roll < 0.88:
        name = rng.choice(_NAMES[:-1])
        return {"op": "rename", "file": rng.choice(hidden),
                "to": f"work/.{name}{_MARKER}r{rng.randrange(100)}"}
    if regular:
        file = rng.choice(regular)
        size = os.path.getsize(os.path.join(folder, file))
        if size and rng.random() < 0.5:
            return {"op": "truncate", "file": file, "size": rng.randrange(size)}
        if size:
            return {"op": "flip", "file": file, "pos": rng.randrange(size), "bit": rng.randrange(8)}
    return None


# --- seeds ----------------------------------------------------------------------------


def _u64s(*values: int) -> bytes:
    return b"".join(v.to_bytes(8, "little") for v in values)


def _tail_bag(records: list[bytes]) -> bytes:
    ends, total = [], 0
    for record in records:
        total += len(record)
        ends.append(total)
    return b"".join(records) + _u64s(*ends) + _u64s(total) if records else b""


def _interrupted_bag(folder: str, name: str, records: list[bytes]) -> None:
    """A killed sackli.Writer's records and limits (the last limit torn)."""
    with open(os.path.join(folder, name), "wb") as file:
        file.write(b"".join(records) + b"torn")
    ends, total = [], 0
    for record in records:
        total += len(record)
        ends.append(total)
    with open(os.path.join(folder, f"limits.{name}"), "wb") as file:
        file.write(_u64s(*ends) + b"\x01\x02")


def _hidden(work: str, target: str) -> str:
    path = os.path.join(work, f".{target}{_MARKER}s1")
    os.mkdir(path)
    return path


def _journal(folder: str, journal: dict[str, Any]) -> None:
    with open(os.path.join(folder, _JOURNAL), "w") as file:
        json.dump(journal, file)


def lay_out_partial_seed(folder: str, writes: tuple[str, ...]) -> None:
    """The files of a partial seed in `folder`: the sentinels, a real bag and
    a real 3-shard set, and the unfinished `writes` ("bag", "set", "map")."""
    from sackli import _engine

    with open(os.path.join(folder, "outside.txt"), "wb") as file:
        file.write(b"a sentinel outside the folder\n")
    work = os.path.join(folder, "work")
    os.mkdir(work)
    with open(os.path.join(work, "notes.txt"), "wb") as file:
        file.write(b"a sentinel beside the writes\n")
    for index in range(3):
        with open(os.path.join(work, f"s-{index:05d}-of-00003.bag"), "wb") as file:
            file.write(_tail_bag([b"real-%d" % index]))
    if "bag" in writes:
        _interrupted_bag(_hidden(work, "data.bag"), "data.bag", [b"r0", b"r11", b"r222"])
    if "set" in writes:
        partial = _hidden(work, "s@2.bag")
        _journal(partial, {"kind": "set", "target": "s@2.bag", "mode": "count", "counts": [2, 2],
                           "in_place": False, "overwrite": True,
                           "options": {"limits_placement": "TAIL", "compression": {"none": True},
                                       "atomic": True, "durable": False}})
        with open(os.path.join(partial, "s-00000-of-00002.bag"), "wb") as file:
            file.write(_tail_bag([b"a", b"bb"]))
        _interrupted_bag(partial, "s-00001-of-00002.bag", [b"c"])
    if "map" in writes:
        partial = _hidden(work, "m.mb")
        _journal(partial, {"kind": "map", "target": "m.mb", "module": "sackli.maps._recover",
                           "version": 1, "compress": None, "spill": "values.spill",
                           "durable": False})
        spill = b""
        for key, value in ((7, b"seven"), (1, b"one"), (2**63, b"big")):
            stored = value + _engine.crc32c(value).to_bytes(4, "little")
            spill += _u64s(key, len(stored)) + stored
        with open(os.path.join(partial, "values.spill"), "wb") as file:
            file.write(spill + b"\x05")
