"""`recover`: completes a bag whose write was interrupted."""

from __future__ import annotations

import errno
import os
from typing import NamedTuple

from . import _engine
from ._format import PARTIAL_MARKER, limits_path_for, partial_folder_prefix
from ._shard_spec import strip_local_prefix

__all__ = ["RecoveryReport", "partial_writes", "recover"]


class RecoveryReport(NamedTuple):
    """What `recover` saved and dropped."""

    records: int
    """Records in the recovered bag."""
    dropped_limits: int
    """Limits found in `limits.<name>` that pointed nowhere valid."""
    dropped_bytes: int
    """Record bytes after the last recovered record, removed."""


def partial_writes(path: str) -> list[str]:
    """The temporary files of unfinished writes of local `path`: every
    `.<name>.sackli-partial-<tag>/<name>` beside it, oldest first."""
    prefix = partial_folder_prefix(path)
    folder, start = os.path.split(prefix)
    name = os.path.basename(path)
    try:
        entries = os.listdir(folder or ".")
    except OSError:
        return []
    found = [os.path.join(folder, entry, name) for entry in entries if entry.startswith(start)]
    found = [file for file in found if os.path.isfile(file)]
    return sorted(found, key=os.path.getmtime)


def _target_of_partial(path: str) -> str | None:
    """The target of `path` when it is a temporary file in a partial folder."""
    folder, name = os.path.split(path)
    parent, partial = os.path.split(folder)
    if partial.startswith("." + name + PARTIAL_MARKER):
        return os.path.join(parent, name)
    return None


def recover(path: str | os.PathLike[str]) -> RecoveryReport:
    """Completes a bag whose write was interrupted (into a TAIL bag).

    It looks for the interrupted write of `path` in this order:

    1. `limits.<name>` beside `path`: a write in place, as bagz makes them
       (or a bag with SEPARATE limits, turned into one with TAIL limits).
    2. sackli's temporary files of an unfinished write of `path`:
       `.<name>.sackli-partial-<tag>/<name>` beside it (sackli writes there
       and renames onto `path` when a write completes). There must be only
       one; with several, recover the one you want by its path.
    3. `path` itself is such a temporary file: it is completed and renamed
       onto its target.

    A `path` that is a symbolic link is recovered through: the write's
    temporary files are beside the file it points to, which is replaced.

    It keeps every record whose limit was written and lies inside the file,
    truncates what follows, appends the limits and deletes `limits.<name>`;
    a temporary file is then renamed onto its target. Do not recover a bag
    that a writer still has open.

    Raises:
      FileNotFoundError: nothing to recover (no `limits.<name>`, no
        unfinished write of `path`).
      ValueError: several unfinished writes of `path` exist.
    """
    local = strip_local_prefix(os.fspath(path))
    target = _target_of_partial(local)
    if target is not None:
        return _complete_partial(local, target)
    if os.path.exists(limits_path_for(local)):
        return RecoveryReport(*_engine.recover(local))
    # A write through a symbolic link keeps its temporary files beside the
    # file the link points to, and replaces that file.
    if os.path.islink(local):
        local = os.path.realpath(local)
    partials = partial_writes(local)
    if len(partials) > 1:
        listed = "\n  ".join(partials)
        raise ValueError(
            f"{local}: {len(partials)} unfinished writes of it exist; recover the one you "
            f"want by its path:\n  {listed}"
        )
    if not partials:
        raise FileNotFoundError(
            errno.ENOENT,
            f"{local}: nothing to recover: neither {os.path.basename(limits_path_for(local))} "
            f"nor an unfinished write ({os.path.basename(partial_folder_prefix(local))}*) "
            "exists beside it (the bag is complete, or it was never written)",
            local,
        )
    return _complete_partial(partials[0], local)


def _complete_partial(partial: str, target: str) -> RecoveryReport:
    """Recovers the temporary file `partial` and renames it onto `target`."""
    if os.path.exists(limits_path_for(partial)):
        report = RecoveryReport(*_engine.recover(partial))
    else:  # finished, but not yet renamed
        from ._reader import Reader  # the reader imports this module

        with Reader(partial) as complete:
            report = RecoveryReport(len(complete), 0, 0)
    os.replace(partial, target)
    try:
        os.rmdir(os.path.dirname(partial))
    except OSError:
        pass  # not empty: something else lives there
    return report
