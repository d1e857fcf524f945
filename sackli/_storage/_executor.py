"""One bounded pool of threads per process for requests that wait on the
network: a batch's ranged reads (`Store.read_many`), the per-shard requests
of opening a remote set (its manifest, the sizes of plain paths), and
whatever else issues many independent requests.

Python's store clients (boto3, google-cloud-storage) block their thread for
a round trip and release the GIL meanwhile, so N independent requests made
on N threads take about one round trip instead of N.

- Bounded: at most `MAX_THREADS` threads, made as needed and kept; each
  caller also says how many of its calls may run at once (`at_once`, e.g. a
  reader's `remote_parallelism`).
- Never deadlocks: the calling thread runs calls too, and a call made from
  a pool thread (one concurrent step inside another) runs in that thread,
  in turn; a `Prefetch` whose call has not started when its result is
  wanted runs it in the waiting thread.
- Fork-safe: a child process starts with no pool (the parent's threads do
  not exist there) and makes its own.
- Calls run in a copy of the caller's context, so the storage settings in
  effect (`using`) reach them.
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, Sequence, TypeVar

__all__ = ["DEFAULT_PARALLELISM", "MAX_THREADS", "Prefetch", "in_parallel"]

T = TypeVar("T")

DEFAULT_PARALLELISM = 32
"""Requests one batch keeps in flight by default: object stores answer many
at once, each after tens of milliseconds, whatever this machine's cores."""

MAX_THREADS = 256
"""Threads the pool holds at most, made as needed: several batches (the
shards of a set, readers of other threads) share it, each within its own
bound; beyond this they wait for free threads."""

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_inside = threading.local()  # set on the pool's threads


def _forget_pool() -> None:
    global _pool, _lock
    _pool, _lock = None, threading.Lock()  # the parent's lock may be held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _mark_inside() -> None:
    _inside.active = True


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(MAX_THREADS, "sackli-requests", initializer=_mark_inside)
        return _pool


def _on_pool_thread() -> bool:
    return getattr(_inside, "active", False)


def in_parallel(calls: Sequence[Callable[[], T]], at_once: int) -> list[T]:
    """The results of `calls`, in order, running at most `at_once` of them
    at a time (the calling thread among them). In turn when `at_once` < 2,
    for fewer than two calls, or on a pool thread.

    Every call runs (or is skipped once one has failed); the error of the
    first failed call in order is raised, after all have stopped."""
    if at_once < 2 or len(calls) < 2 or _on_pool_thread():
        return [call() for call in calls]
    results: list = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)
    next_index = iter(range(len(calls)))
    claim = threading.Lock()
    failed = threading.Event()

    def drain() -> None:
        # Takes the next call not yet taken, until none is left.
        while not failed.is_set():
            with claim:
                i = next(next_index, None)
            if i is None:
                return
            try:
                results[i] = calls[i]()
            except BaseException as error:  # noqa: BLE001 - raised below, in order
                errors[i] = error
                failed.set()

    helpers = min(at_once, len(calls)) - 1
    pool = _shared_pool()
    futures = [pool.submit(contextvars.copy_context().run, drain) for _ in range(helpers)]
    drain()
    for future in futures:
        future.result()  # drain() itself never raises
    for error in errors:
        if error is not None:
            raise error
    return results


class Prefetch(Generic[T]):
    """`call()` started now on the pool; `result()` later returns its value
    or raises its error. If no pool thread has started it by then, the
    caller runs it itself (on a pool thread it always does: no wait on a
    busy pool)."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._call = call
        self._future: Future | None = None
        if not _on_pool_thread():
            self._future = _shared_pool().submit(contextvars.copy_context().run, call)

    def result(self) -> T:
        """The call's value (or its error, raised)."""
        if self._future is None or self._future.cancel():
            return self._call()
        return self._future.result()
