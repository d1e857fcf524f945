"""What a caller may ask of a path's store, so that it never asks which
store it is: each question names the property its decision rests on.

Writers do not ask: they hold a `WriteDestination` (`_destinations`),
whose methods do what differs. These answer the few rules that rest on a
property of the store itself."""

from __future__ import annotations

from ._urls import is_remote

__all__ = ["MAX_PARALLEL_REQUESTS", "by_upload", "on_this_machine", "parallel_requests"]

MAX_PARALLEL_REQUESTS = 16
"""Files a caller opens, reads or closes at once on a store on the network
(`parallel_requests`). A batch of ranged reads has its own bound, the
reader's `remote_parallelism` (`Store.read_many`)."""


def by_upload(path: str) -> bool:
    """Whether writing `path` uploads an object that appears only whole,
    when committed (`gs://`, `s3://`): nothing to rename into place, no
    folder to make, no file growing in place, no unfinished write left to
    recover. A local file is written by the engine (or Python) under a
    temporary name and renamed, or in place."""
    return is_remote(path)


def parallel_requests(path: str) -> int:
    """How many files of `path`'s store to open, read or close at once:
    `MAX_PARALLEL_REQUESTS` where each request waits on the network, one
    (in turn) for local files."""
    return MAX_PARALLEL_REQUESTS if is_remote(path) else 1


def on_this_machine(path: str) -> bool:
    """Whether `path` names a file of this machine's file systems, which
    `open()`, `os.path` and `os.listdir` reach."""
    return not is_remote(path)
