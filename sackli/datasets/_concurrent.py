"""Opening and closing the many objects of a remote dataset concurrently.

Each remote open is a few round trips (a bag: its size, then its tail and
limits), and each close of a remote file finishes its upload, so a dataset
of many shards and fields handled one file after another waits for hundreds
of round trips in turn. `concurrently` overlaps them, a bounded number at a
time; local files open and close in microseconds and stay in turn.
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

from .._storage import MAX_PARALLEL_REQUESTS, parallel_requests

__all__ = ["MAX_CONCURRENT_CALLS", "concurrently", "concurrently_on"]

T = TypeVar("T")

# Requests in flight at once, at most: the storage layer's bound.
MAX_CONCURRENT_CALLS = MAX_PARALLEL_REQUESTS

# Set on the threads of a `concurrently`: one inside another (the files of a
# shard, inside the open of every shard) runs its calls in turn, so the
# total stays bounded and no pool waits for its own workers.
_inside = threading.local()


def concurrently(calls: Sequence[Callable[[], T]], at_once: int) -> list[T]:
    """The results of `calls`, in order: run concurrently, at most
    `at_once` (and MAX_CONCURRENT_CALLS) at a time, when `at_once` is more
    than one and so are the calls, else in turn (as `parallel_requests` or
    a destination's `parallel_opens` says for the files' store).

    If a call raises, the results of the others that have a `close()` are
    closed, and the error of the first failed call (in order) is raised.
    """
    if at_once < 2 or len(calls) < 2 or getattr(_inside, "active", False):
        return _in_turn(calls)

    def run(call: Callable[[], T]) -> tuple[T | None, BaseException | None]:
        _inside.active = True
        try:
            return call(), None
        except BaseException as error:  # noqa: BLE001 - re-raised below, in order
            return None, error
        finally:
            _inside.active = False

    # Each call runs in a copy of the caller's context: the storage
    # settings in effect (sackli._storage.using) reach the threads.
    contexts = [contextvars.copy_context() for _ in calls]
    workers = min(at_once, MAX_CONCURRENT_CALLS, len(calls))
    with ThreadPoolExecutor(workers, "sackli-remote") as pool:
        outcomes = list(pool.map(lambda context, call: context.run(run, call), contexts, calls))
    errors = [error for _, error in outcomes if error is not None]
    if errors:
        _close_quietly([result for result, error in outcomes if error is None])
        raise errors[0]
    return [result for result, _ in outcomes]  # type: ignore[misc]


def concurrently_on(path: str, calls: Sequence[Callable[[], T]]) -> list[T]:
    """`concurrently(calls)`, for calls that each open or close files of
    `path`'s store: concurrent where each request waits on the network, in
    turn for local files (the store says how many: `parallel_requests`)."""
    return concurrently(calls, parallel_requests(path))


def _in_turn(calls: Sequence[Callable[[], T]]) -> list[T]:
    results: list[T] = []
    try:
        for call in calls:
            results.append(call())
    except BaseException:
        _close_quietly(results)
        raise
    return results


def _close_quietly(results: list[Any]) -> None:
    # The error being raised is the one to report, not a failed close.
    for result in results:
        close = getattr(result, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001
                pass
