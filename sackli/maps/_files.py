"""New local files of maps (a map being written, an index cache), created
as any file the process opens for writing is: 0666 less the umask.

`tempfile.mkstemp` would make them 0600, and the file is renamed onto its
final name, so a map written for others to read would be readable by its
owner only (mapbuffer users write maps with ``open(path, "wb")``)."""

from __future__ import annotations

import os
import secrets
from typing import BinaryIO

# Attempts at a free name: with 64 random bits, a second is already unlikely.
_ATTEMPTS = 100


def new_hidden_file(target: str, suffix: str = "") -> tuple[BinaryIO, str]:
    """A new empty file beside `target`, open for writing, and its path:
    `.<name>.<random><suffix>` (hidden, so no listing takes it for a map)."""
    folder, name = os.path.split(os.path.abspath(target))
    for _ in range(_ATTEMPTS):
        path = os.path.join(folder, f".{name}.{secrets.token_hex(8)}{suffix}")
        try:
            return open(path, "xb"), path  # O_EXCL, mode 0666 less the umask
        except FileExistsError:
            continue
    raise FileExistsError(f"{target}: no free temporary name beside it after {_ATTEMPTS} tries")


__all__ = ["new_hidden_file"]
