"""A write that ran out of room, reported as an error of the destination.

`convert` writes under hidden temporary names (and spools), and the gzip,
JSON Lines and TFRecord writers get errors from buffered streams that name
no file: without this a full disk reads "..x.bag.sackli-partial-.../x.bag:
write: No space left on device", or just "No space left on device".
"""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Iterator

__all__ = ["naming_target"]

# The errors of a write that has no room: a full disk, a quota, a file size
# limit (RLIMIT_FSIZE). Only writes raise them, so they are the target's.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


@contextlib.contextmanager
def naming_target(target: str) -> Iterator[None]:
    """Turns an OSError of a write without room into one that names
    `target`, the destination as the user gave it: "out@4.bag: No space
    left on device"."""
    try:
        yield
    except OSError as error:
        if error.errno not in _NO_ROOM:
            raise
        raise OSError(error.errno, os.strerror(error.errno), target) from error
