"""Where a local write through symbolic links lands, under the kernel's rule
for links in shared folders (the Python writers' twin of the engine's
`ResolveWriteLinks`, native/bagz/writer.h)."""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["resolve_write_links"]

_MAX_LINKS = 40  # as the kernel's limit on links followed in one lookup


def resolve_write_links(path: str) -> str:
    """The file that writing `path` replaces: `path`, or where the chain of
    symbolic links starting at it ends (possibly not existing yet, as for
    open(2) through a dangling link). Only the last component's links are
    followed; the folders on the way stay as they are.

    As the kernel's `fs.protected_symlinks`: a link in a sticky,
    world-writable folder (`/tmp`, a shared scratch folder) owned by neither
    this process's effective user nor the folder's owner is not followed:
    PermissionError naming the link. OSError (ELOOP) after 40 links."""
    current = path
    for _ in range(_MAX_LINKS):
        try:
            status = os.lstat(current)
        except OSError:
            return current  # missing: the write creates it (or reports why not)
        if not stat.S_ISLNK(status.st_mode):
            return current
        _refuse_protected_link(current, status)
        link = os.readlink(current)
        current = link if os.path.isabs(link) else os.path.join(os.path.dirname(current), link)
    raise OSError(errno.ELOOP, f"{path}: {os.strerror(errno.ELOOP)}", path)


def _refuse_protected_link(link: str, status: os.stat_result) -> None:
    try:
        folder = os.stat(os.path.dirname(link) or ".")
    except OSError:
        return  # the write itself reports the folder
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    if not shared or status.st_uid in (os.geteuid(), folder.st_uid):
        return
    raise PermissionError(
        errno.EACCES,
        f"{link}: a symbolic link owned by another user in a sticky, world-writable folder: "
        "not followed for writing (as the kernel's fs.protected_symlinks rule)", link)
