"""sackli.datasets._concurrent.concurrently: concurrent opens and closes of
remote objects, results in order, the first error in order, and nothing
left open."""

from __future__ import annotations

import threading
import time

import pytest

from sackli.datasets._concurrent import MAX_CONCURRENT_CALLS, concurrently


class Opened:
    def __init__(self, value: int) -> None:
        self.value = value
        self.closed = False
        self.thread = threading.current_thread()

    def close(self) -> None:
        self.closed = True


def test_results_in_order_from_concurrent_calls():
    running = []
    most = [0]
    lock = threading.Lock()

    def call(i: int):
        def run() -> Opened:
            with lock:
                running.append(i)
                most[0] = max(most[0], len(running))
            time.sleep(0.02)
            with lock:
                running.remove(i)
            return Opened(i)
        return run

    results = concurrently([call(i) for i in range(40)], at_once=MAX_CONCURRENT_CALLS)
    assert [r.value for r in results] == list(range(40))
    assert 1 < most[0] <= MAX_CONCURRENT_CALLS
    assert all(r.thread is not threading.current_thread() for r in results)


def test_local_opens_run_in_turn_on_the_calling_thread():
    results = concurrently([lambda i=i: Opened(i) for i in range(5)], at_once=1)
    assert [r.value for r in results] == list(range(5))
    assert {r.thread for r in results} == {threading.current_thread()}


def test_concurrently_inside_another_runs_in_turn():
    def shard(i: int):
        def run() -> list[Opened]:
            return concurrently([lambda j=j: Opened(10 * i + j) for j in range(3)], at_once=MAX_CONCURRENT_CALLS)
        return run

    shards = concurrently([shard(i) for i in range(4)], at_once=MAX_CONCURRENT_CALLS)
    assert [[r.value for r in files] for files in shards] == [[10 * i + j for j in range(3)]
                                                            for i in range(4)]
    for files in shards:  # each shard's files were opened by its own thread
        assert len({r.thread for r in files}) == 1


@pytest.mark.parametrize("remote", [True, False])
def test_the_first_error_in_order_is_raised_and_the_rest_closed(remote):
    opened: list[Opened] = []

    def call(i: int):
        def run() -> Opened:
            if i in (3, 7):
                time.sleep(0.05 if i == 3 else 0)  # the later one fails first
                raise FileNotFoundError(f"file {i}")
            result = Opened(i)
            opened.append(result)
            return result
        return run

    with pytest.raises(FileNotFoundError, match="file 3"):
        concurrently([call(i) for i in range(10)], at_once=MAX_CONCURRENT_CALLS if remote else 1)
    assert opened and all(r.closed for r in opened)
    # In turn, the calls after the failed one never ran.
    assert sorted(r.value for r in opened) == ([0, 1, 2, 4, 5, 6, 8, 9] if remote else [0, 1, 2])
