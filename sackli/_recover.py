"""`recover`: completes a bag whose write was interrupted."""

from __future__ import annotations

import os
from typing import NamedTuple

from . import _engine
from ._shard_spec import strip_local_prefix

__all__ = ["RecoveryReport", "recover"]


class RecoveryReport(NamedTuple):
    """What `recover` saved and dropped."""

    records: int
    """Records in the recovered bag."""
    dropped_limits: int
    """Limits found in `limits.<name>` that pointed nowhere valid."""
    dropped_bytes: int
    """Record bytes after the last recovered record, removed."""


def recover(path: str | os.PathLike[str]) -> RecoveryReport:
    """Turns an interrupted write into a complete bag with TAIL limits.

    An interrupted write leaves `path` with the records and `limits.<name>`
    beside it. This keeps every record whose limit was written and lies
    inside the file, truncates what follows, appends the limits to `path`
    and deletes `limits.<name>`.

    Raises:
      FileNotFoundError: `path` or its `limits.<name>` does not exist.
    """
    local = strip_local_prefix(os.fspath(path))
    records, dropped_limits, dropped_bytes = _engine.recover(local)
    return RecoveryReport(records, dropped_limits, dropped_bytes)
