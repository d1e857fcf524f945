"""What recovery trusts in a hidden partial folder: nothing it did not check.

A partial folder (`.<name>.sackli-partial-<tag>/`, see `_unfinished`) may
come from anywhere: a download, a colleague's folder, a shared bucket synced
to disk, a scratch folder many people write. Recovery truncates, rewrites
and renames what is inside, so before it acts it checks that the folder is
what a sackli writer leaves:

- the folder is a real folder, not a symbolic link (a link would make
  recovery move or cut files of the folder it points to);
- every entry, at any depth (a dataset's bags are partial folders of their
  own inside it), is a regular file or a folder: no symbolic link, no
  device, fifo or socket, and no regular file with other hard links (a
  second name of a file elsewhere, which recovery would truncate);
- a journal's `target` is the name the folder itself carries
  (`_unfinished.write_of_folder` checks that).

A refusal is a `PermissionError` naming the entry; nothing was changed. The
engine's bag recovery (`_engine.recover`) opens every file with O_NOFOLLOW
through the folder's descriptor as well, so an entry swapped for a link
after this check is refused there.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["MAX_DEPTH", "check_partial_folder", "refusal"]

MAX_DEPTH = 4
"""Folders nested deeper than this in a partial folder are refused: a
writer nests at most two (a dataset's partial folder, its bags')."""

_ADVICE = ("sackli recovers only what its own writers leave there; look inside, then delete "
           "the folder")


def refusal(path: str, why: str) -> PermissionError:
    """The error that refuses to recover `path` (an entry of a partial folder)."""
    return PermissionError(errno.EPERM, f"{path}: {why}: not recovered ({_ADVICE})", path)


def check_partial_folder(folder: str) -> None:
    """Raises PermissionError naming the first entry of the partial folder
    `folder` that a sackli writer does not leave (see the module's rules);
    returns when every entry passes. Follows no link."""
    status = os.lstat(folder)
    if stat.S_ISLNK(status.st_mode):
        raise refusal(folder, "the hidden folder of an unfinished write is a symbolic link")
    if not stat.S_ISDIR(status.st_mode):
        raise refusal(folder, "the hidden folder of an unfinished write is not a folder")
    _check_entries(folder, 1)


def _check_entries(folder: str, depth: int) -> None:
    with os.scandir(folder) as entries:
        listed = list(entries)
    for entry in listed:
        status = entry.stat(follow_symlinks=False)
        mode = status.st_mode
        if stat.S_ISLNK(mode):
            raise refusal(entry.path, "a symbolic link")
        if stat.S_ISDIR(mode):
            if depth >= MAX_DEPTH:
                raise refusal(entry.path, f"folders nested more than {MAX_DEPTH} deep")
            _check_entries(entry.path, depth + 1)
        elif not stat.S_ISREG(mode):
            raise refusal(entry.path, "not a regular file (a device, fifo or socket)")
        elif status.st_nlink > 1:
            raise refusal(entry.path, f"a file with {status.st_nlink} hard links (a name of a "
                          "file elsewhere)")
