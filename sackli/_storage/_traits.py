"""What a caller may ask of a path's store, so that it never asks which
store it is: each question names the property its decision rests on."""

from __future__ import annotations

from ._urls import is_remote

__all__ = ["by_upload", "network_bound", "on_this_machine"]


def by_upload(path: str) -> bool:
    """Whether writing `path` uploads an object that appears only whole,
    when committed (`gs://`, `s3://`): nothing to rename into place, no
    folder to make, no file growing in place, no unfinished write left to
    recover. A local file is written by the engine (or Python) under a
    temporary name and renamed, or in place."""
    return is_remote(path)


def network_bound(path: str) -> bool:
    """Whether each request to `path`'s store waits on the network, so that
    opening or reading many files concurrently pays."""
    return is_remote(path)


def on_this_machine(path: str) -> bool:
    """Whether `path` names a file of this machine's file systems, which
    `open()`, `os.path` and `os.listdir` reach (journals of unfinished
    writes, folders, sniffed file contents live only there)."""
    return not is_remote(path)
