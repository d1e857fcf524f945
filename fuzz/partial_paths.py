"""Recovery of hidden partial folders, judged by what it must never touch.

A partial mutant (a seed of kind "partial") is a folder laid out as

    outside.txt                      a sentinel outside the folder recovered
    work/notes.txt                   a sentinel beside the writes, another name
    work/.<target>.sackli-partial-<tag>/...   unfinished writes (a bag, a
                                     shard set beside a real set of another
                                     count, a map)
    work/<real files>                a real shard set, a bag

mutated with links (to the sentinels, to other entries, the folder itself a
link), hard links, fifos, journals naming other targets or asking to
overwrite, renamed folders and damaged bytes (fuzz/mutators.py, family
"partial"). The one path, `partial_recover`, runs `sackli.recover` on every
hidden folder in `work/`, in name order. The oracle's rules:

  outcome   each recovery returns, or raises an OSError or ValueError (a
            sackli.CorruptionError is one) whose message names the folder,
            its target or an entry of `work/`; never another exception, a
            crash or a hang.
  untouched outside.txt, every file a link or hard link pointed at before,
            and every file of `work/` whose name is not a recovered write's
            target (nor a shard of it) stay byte-identical; nothing appears
            or disappears outside `work/`.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from .paths import Judge

__all__ = ["PARTIAL_COMBO", "PARTIAL_KIND", "PARTIAL_PATHS", "evaluate_pair"]

PARTIAL_KIND = "partial"
PARTIAL_COMBO = "partial/local"
_MARKER = ".sackli-partial-"


def _snapshot(root: str) -> dict[str, Any]:
    """Every file under `root` (links not followed) -> its bytes, or what it is."""
    found: dict[str, Any] = {}
    for folder, folders, files in os.walk(root):
        for name in files + [f for f in folders if os.path.islink(os.path.join(folder, f))]:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                found[path] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as file:
                    found[path] = file.read()
            else:
                found[path] = ("special",)
    return found


def _target_name(entry: str) -> str:
    """The target a hidden folder's name is for (glob characters decoded)."""
    name = entry[1:entry.rindex(_MARKER)]
    return re.sub(r"%(2A|3F|5B|25)", lambda m: chr(int(m.group(1), 16)), name)


def _made_by(target: str, name: str) -> bool:
    """Whether recovering a write of `target` may replace `work/name`: the
    target itself, a shard of it (`base-SSSSS-of-NNNNN.ext` for a spec
    `base@N.ext`), their limits files, a set's schema."""
    name = name[len("limits."):] if name.startswith("limits.") else name
    if name == target:
        return True
    at = target.find("@")
    if at < 0:
        return False
    base = target[:at]
    suffix = target[at:].lstrip("@0123456789*")
    return re.fullmatch(re.escape(base) + r"-\d{5}-of-\d{5}" + re.escape(suffix) + r"(\.\w+)?",
                        name) is not None


def _links_point_at(snapshot: dict[str, Any], root: str) -> set[str]:
    """The files that links in the mutant point at (resolved)."""
    return {os.path.realpath(path) for path, value in snapshot.items()
            if isinstance(value, tuple) and value[0] == "link"
            and os.path.realpath(path).startswith(root)}


def p_recover(folder: str, judge: Judge) -> None:
    import sackli

    work = os.path.join(folder, "work")
    root = os.path.realpath(folder)
    before = _snapshot(folder)
    linked = _links_point_at(before, root)
    # Files sharing an inode with another name (a hard link into the folder).
    inodes: dict[tuple[int, int], list[str]] = {}
    for path in before:
        if not os.path.islink(path) and os.path.isfile(path):
            status = os.stat(path)
            inodes.setdefault((status.st_dev, status.st_ino), []).append(path)
    hard_linked = {os.path.realpath(p) for paths in inodes.values() if len(paths) > 1 for p in paths
                   if _MARKER not in p}
    entries = sorted(entry for entry in os.listdir(work)
                     if entry.startswith(".") and _MARKER in entry)
    targets = [_target_name(entry) for entry in entries]
    for entry in entries:
        path = os.path.join(work, entry)
        call = f"recover({entry!r})"
        try:
            sackli.recover(path)
        except (OSError, ValueError) as error:
            message = str(error)
            if work in message or path in message:
                judge.agree(call)
            else:
                judge.fail("mismatch", call, "error names no entry of the folder", "a path",
                           f"{type(error).__name__}: {message}"[:300])
        except Exception as error:  # noqa: BLE001 - the oracle's verdict
            judge.fail("mismatch", call, "unexpected exception type", "OSError or ValueError",
                       f"{type(error).__name__}: {error}"[:300])
        else:
            judge.agree(call)
    after = _snapshot(folder)
    for path, value in before.items():
        real = os.path.realpath(path) if not os.path.islink(path) else path
        inside_work = os.path.dirname(path) == work
        if _MARKER in path:
            continue  # the partial folders: recovery's to change
        name = os.path.basename(path)
        if inside_work and any(_made_by(target, name) for target in targets):
            continue  # a name a recovered write may replace
        sentinel = real in linked or real in hard_linked or not inside_work
        if after.get(path) != value:
            judge.fail("mismatch", "untouched",
                       "a sentinel changed" if sentinel else "a file beside the writes changed",
                       "unchanged", f"{os.path.relpath(path, folder)}: "
                       f"{'gone' if path not in after else 'changed'}")
            return
    outside = {p for p in after if os.path.dirname(p) == folder}
    if outside != {p for p in before if os.path.dirname(p) == folder}:
        judge.fail("mismatch", "untouched", "a file appeared or went outside work/",
                   sorted(p for p in before if os.path.dirname(p) == folder), sorted(outside))
        return
    judge.agree("untouched")


PARTIAL_PATHS: dict[str, Callable[[str, Judge], None]] = {"partial_recover": p_recover}


def evaluate_pair(folder: str, path: str) -> Judge:
    """Runs one path of a partial mutant; the judge holds the verdict."""
    judge = Judge([folder])
    PARTIAL_PATHS[path](folder, judge)
    return judge
