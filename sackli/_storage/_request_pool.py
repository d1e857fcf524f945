"""The process-wide threads that keep a batch's requests in flight at once
(`Store.read_many`): a ranged GET spends most of its time waiting for its
first byte, so a batch of them is only as slow as its slowest when they
overlap. One bounded pool per process, rebuilt in a forked child (the
parent's threads do not exist there); each call keeps at most its own
number of requests in flight."""

from __future__ import annotations

import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable, Sequence, TypeVar

__all__ = ["DEFAULT_PARALLELISM", "map_bounded"]

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_PARALLELISM = 32
"""Requests one batch keeps in flight by default: object stores answer many
at once, each after tens of milliseconds, whatever this machine's cores."""

# Threads of the pool at most: several batches (shards of a set, readers of
# other threads) share it; each stays within its own bound.
_MAX_THREADS = 256

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_MAX_THREADS, thread_name_prefix="sackli-request")
        return _pool


def _forget_pool() -> None:
    """In a forked child: a new lock and, on first use, a new pool."""
    global _lock, _pool
    _lock = threading.Lock()
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def map_bounded(call: Callable[[T], R], items: Sequence[T], limit: int) -> list[R]:
    """[call(item) for item in items], with at most `limit` calls running at
    once on the process-wide request threads (one item, or `limit` 1: in
    this thread). When calls fail, the error of the first failing item (by
    position) is raised after every started call has ended; items not
    started by then are not started."""
    n = len(items)
    if n <= 1 or limit <= 1:
        return [call(item) for item in items]
    pool = _shared_pool()
    results: list = [None] * n
    errors: dict[int, BaseException] = {}
    running: dict[Future, int] = {}
    submitted = 0
    while submitted < n and len(running) < limit:
        running[pool.submit(call, items[submitted])] = submitted
        submitted += 1
    while running:
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            i = running.pop(future)
            error = future.exception()
            if error is None:
                results[i] = future.result()
            else:
                errors[i] = error
        while not errors and submitted < n and len(running) < limit:
            running[pool.submit(call, items[submitted])] = submitted
            submitted += 1
    if errors:
        raise errors[min(errors)]
    return results
