"""sackli._storage._executor: the process's pool for independent requests."""

from __future__ import annotations

import os
import threading

import pytest

from sackli._storage import _executor
from sackli._storage import Prefetch, in_parallel, using, current_settings, StorageSettings


class _Gate:
    """Counts the calls running at once; each waits until `gather` run
    together (or every call has started), so the count shows the bound."""

    def __init__(self, gather: int, total: int) -> None:
        self.gather, self.total = gather, total
        self.running = self.started = self.most = 0
        self.changed = threading.Condition()

    def call(self, value: int) -> int:
        with self.changed:
            self.running += 1
            self.started += 1
            self.most = max(self.most, self.running)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.running >= self.gather or self.started == self.total,
                                  timeout=10)
            self.gather = 0  # the first round met: the rest need not wait
            self.running -= 1
        return value * 2


@pytest.mark.parametrize("at_once", [1, 3, 8])
def test_in_parallel_keeps_order_and_its_bound(at_once):
    gate = _Gate(at_once, 20)
    calls = [lambda v=v: gate.call(v) for v in range(20)]
    assert in_parallel(calls, at_once) == [2 * v for v in range(20)]
    assert gate.most == at_once


def test_the_first_error_in_order_is_raised():
    def fail(i: int) -> int:
        raise ValueError(f"call {i}")

    calls = [lambda: 1, lambda: fail(1), lambda: 3, lambda: fail(3)]
    with pytest.raises(ValueError, match="call 1"):
        in_parallel(calls, 4)


def test_calls_inside_the_pool_run_in_turn_and_see_the_callers_settings():
    settings = StorageSettings()
    together = threading.Barrier(4, timeout=10)  # all four at once: three on pool threads

    def outer() -> tuple[bool, bool, object]:
        together.wait()
        here, seen = threading.current_thread(), []
        in_parallel([lambda: seen.append(threading.current_thread())] * 3, 8)
        on_pool = _executor._on_pool_thread()
        return on_pool, all(thread is here for thread in seen), current_settings()

    with using(settings):
        outcomes = in_parallel([outer] * 4, 4)
    assert sum(on_pool for on_pool, _, _ in outcomes) == 3
    assert all(in_turn for on_pool, in_turn, _ in outcomes if on_pool)
    assert all(seen is settings for _, _, seen in outcomes)


def test_a_prefetch_not_started_runs_in_the_waiting_thread():
    # Every pool thread busy: the prefetch is run by its waiter, not waited for.
    release = threading.Event()
    busy = [Prefetch(release.wait) for _ in range(_executor.MAX_THREADS)]
    try:
        assert Prefetch(threading.current_thread).result() is threading.current_thread()
    finally:
        release.set()
        for prefetch in busy:
            prefetch.result()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_gets_a_pool_of_its_own():
    assert in_parallel([lambda: 1, lambda: 2], 2) == [1, 2]  # the parent's pool exists
    pid = os.fork()
    if pid == 0:
        try:
            ok = _executor._pool is None and in_parallel([lambda: 1, lambda: 2], 2) == [1, 2]
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
