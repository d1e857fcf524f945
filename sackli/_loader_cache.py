"""The read cache data loaders use by default (docs/cache.md, "Loaders
cache by default").

A training loop reads a bag at random, epoch after epoch: from a bucket,
without a cache, each small record is a request of its own every epoch.
So `EpochStream` reopens a remote `sackli.Reader` that has no cache with
the user's own cache folder: private (0700), bounded (the cache's default
budget, `SACKLI_CACHE_MAX_BYTES`), in the platform's cache folder.
`SACKLI_LOADER_CACHE=0` turns that off; a reader given a `cache_dir`, or a
`SACKLI_CACHE_DIR` in the environment, keeps its own.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from ._storage import ENV_CACHE_DIR, is_remote

__all__ = ["ENV_LOADER_CACHE", "loader_cache_dir", "with_loader_cache"]

ENV_LOADER_CACHE = "SACKLI_LOADER_CACHE"
_OFF = ("0", "false", "no", "off")
_ON = ("", "1", "true", "yes", "on")


def user_cache_dir() -> str:
    """sackli's folder in the platform's per-user cache folder:
    `$XDG_CACHE_HOME/sackli` (else `~/.cache/sackli`) on Linux and other
    Unixes, `~/Library/Caches/sackli` on macOS, `%LOCALAPPDATA%\\sackli\\Cache`
    on Windows."""
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/sackli")
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(base, "sackli", "Cache")
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        base = os.path.expanduser("~/.cache")
    return os.path.join(base, "sackli")


def loader_cache_dir() -> str | None:
    """The folder loaders cache remote reads in by default, None when
    `SACKLI_LOADER_CACHE` turns the default off. ValueError for a value
    that is neither on nor off."""
    text = os.environ.get(ENV_LOADER_CACHE, "").strip().lower()
    if text in _OFF:
        return None
    if text not in _ON:
        raise ValueError(f"{ENV_LOADER_CACHE} must be 1 or 0 (or true/false), not {text!r}")
    return user_cache_dir()


def with_loader_cache(source: Any) -> Any:
    """`source` reading through the loaders' default cache: a
    `sackli.Reader` of remote files with no cache of its own, reopened
    (with its view) with `cache_dir=loader_cache_dir()`; a `sackli.datasets`
    reader of a remote dataset with none, by its `reopened_with_cache`;
    anything else as it is."""
    from ._reader import Reader, reopened_with

    if os.environ.get(ENV_CACHE_DIR):
        return source  # every reader caches already
    if isinstance(source, Reader):
        if (source.closed or source.options.cache_dir is not None
                or not any(is_remote(path) for path in source.paths)):
            return source
        folder = loader_cache_dir()
        if folder is None:
            return source
        return reopened_with(source, dataclasses.replace(source.options, cache_dir=folder))
    # A sackli.datasets reader reopens itself (it knows its options).
    reopen = getattr(source, "reopened_with_cache", None)
    if not callable(reopen):
        return source
    folder = loader_cache_dir()
    return source if folder is None else reopen(folder)
