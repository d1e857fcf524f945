"""Threads, forks and interpreter exit: a Reader shared by many threads, a
Writer fed by many threads, readers used in forked children, the engine's
thread pool (reused, never grown per call) and live iterators at exit.

Tests that could crash or hang the interpreter run in a subprocess."""

from __future__ import annotations

import collections
import pathlib
import random
import textwrap
import threading

import pytest

import sackli

SUFFIXES = pytest.mark.parametrize("suffix", [".bag", ".bagz"])


def make_records(count: int, seed: int) -> list[bytes]:
    """Distinct-ish records of 0 to ~2 KiB, some empty, some compressible."""
    rng = random.Random(seed)
    records = []
    for i in range(count):
        size = rng.choice([0, 1, 7, 60, 300, 2000])
        head = b"%d|" % i if size else b""
        records.append(head + (bytes(rng.randrange(256) for _ in range(size)) if i % 2 else b"ab" * (size // 2)))
    return records


def write(path: pathlib.Path, records: list[bytes], **options) -> pathlib.Path:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)
    return path


def run_threads(count: int, target) -> list[BaseException]:
    """Runs target(t) on `count` threads started together; the exceptions."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(t: int) -> None:
        try:
            barrier.wait()
            target(t)
        except BaseException as error:  # reported by the test
            errors.append(error)

    threads = [threading.Thread(target=body, args=(t,)) for t in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
        assert not thread.is_alive(), "a thread hung"
    return errors


# --- One Reader, many threads --------------------------------------------------------

SHARED_RECORDS = make_records(3000, 1)


@pytest.fixture(scope="module", params=[".bag", ".bagz"])
def shared_bag(request, tmp_path_factory) -> pathlib.Path:
    return write(tmp_path_factory.mktemp("shared") / ("shared" + request.param), SHARED_RECORDS)


def test_threads_share_one_reader(shared_bag):
    records, n = SHARED_RECORDS, len(SHARED_RECORDS)
    # Small read-ahead batches so iterators keep the pool busy too.
    reader = sackli.Reader(shared_bag, max_parallelism=4, read_ahead_bytes=4096)
    done = collections.Counter()

    def work(t: int) -> None:
        rng = random.Random(100 + t)
        for step in range(60):
            kind = step % 6
            if kind == 0:
                for _ in range(50):
                    i = rng.randrange(-n, n)
                    assert reader[i] == records[i], i
            elif kind == 1:
                # Small batches, and batches big enough to be planned in parallel.
                size = rng.choice([rng.randrange(1, 600), 5000])
                indices = [rng.randrange(-n, n) for _ in range(size)]
                assert reader.read_indices(indices) == [records[i] for i in indices]
            elif kind == 2:
                bound = lambda: rng.choice([None, rng.randrange(-n - 5, n + 5)])  # noqa: E731
                piece = slice(bound(), bound(), rng.choice([None, 1, 2, 7, -1, -3]))
                assert list(reader[piece]) == records[piece], piece
            elif kind == 3:
                indices = [rng.randrange(n) for _ in range(rng.randrange(1, 400))]
                assert list(reader.read_indices_iter(iter(indices), read_ahead=17)) == [records[i] for i in indices]
            elif kind == 4:
                start = rng.randrange(n)
                count = rng.randrange(n - start + 1)
                assert reader.read_range(start, count) == records[start:start + count]
            else:
                assert list(reader) == records
            done[t] += 1

    assert run_threads(8, work) == []
    assert done == {t: 60 for t in range(8)}


# --- One Writer, many threads ------------------------------------------------------

WRITER_THREADS = 8
RECORDS_PER_THREAD = 300


def thread_records(t: int) -> list[bytes]:
    rng = random.Random(t)
    return [b"%d:%d:" % (t, k) + bytes([65 + t]) * rng.choice([0, 3, 40, 900]) for k in range(RECORDS_PER_THREAD)]


@SUFFIXES
@pytest.mark.parametrize("method", ["write", "write_many", "mixed"])
def test_threads_share_one_writer(tmp_path, suffix, method):
    path = tmp_path / ("shared" + suffix)
    writer = sackli.Writer(path, max_parallelism=4)

    def work(t: int) -> None:
        rng = random.Random(1000 + t)
        mine = thread_records(t)
        position = 0
        while position < len(mine):
            use_many = method == "write_many" or (method == "mixed" and rng.random() < 0.5)
            if use_many:
                size = rng.randrange(1, 60)
                writer.write_many(mine[position:position + size])
                position += size
            else:
                writer.write(mine[position])
                position += 1
            if method == "mixed" and rng.random() < 0.05:
                writer.flush()

    assert run_threads(WRITER_THREADS, work) == []
    total = WRITER_THREADS * RECORDS_PER_THREAD
    assert writer.records_written == total
    bytes_written = writer.bytes_written
    writer.close()
    assert bytes_written == path.stat().st_size - 8 * total  # TAIL: records, then limits

    read = sackli.Reader(path).read()
    expected = [record for t in range(WRITER_THREADS) for record in thread_records(t)]
    assert sorted(read) == sorted(expected)
    by_thread = collections.defaultdict(list)
    for record in read:
        by_thread[int(record.split(b":")[0])].append(record)
    assert dict(by_thread) == {t: thread_records(t) for t in range(WRITER_THREADS)}


# --- Fork ------------------------------------------------------------------------

FORK_CODE = """
import multiprocessing, random, threading, sackli
records = [b"%d:" % i + bytes([i % 251]) * (i % 300) for i in range(20000)]
path = {path!r}
with sackli.Writer(path, max_parallelism=1) as writer:
    writer.write_many(records)
reader = sackli.Reader(path, max_parallelism=4)
assert reader.read_indices(range(len(records))) == records
parent_pool = sackli._engine.thread_pool_size()
live = iter(reader)  # a read-ahead iterator alive in the parent at fork time
assert next(live) == records[0]
stop = threading.Event()

def keep_reading():
    rng = random.Random(0)
    while not stop.is_set():
        indices = [rng.randrange(len(records)) for _ in range(5000)]
        assert reader.read_indices(indices) == [records[i] for i in indices]

if {busy_parent}:
    busy = threading.Thread(target=keep_reading)
    busy.start()

def child(seed):
    rng = random.Random(seed)
    pool_at_start = sackli._engine.thread_pool_size()
    indices = [rng.randrange(-len(records), len(records)) for _ in range(50000)]
    return (
        pool_at_start,
        reader[seed] == records[seed] and reader[-seed - 1] == records[-seed - 1],
        reader.read_indices(indices) == [records[i] for i in indices],
        sackli._engine.thread_pool_size(),
        list(reader) == records,
        reader[::7].read() == records[::7],
        len(sackli.Index(reader)) == len(set(records)),
    )

context = multiprocessing.get_context("fork")
with context.Pool(2, maxtasksperchild=1) as pool:
    results = pool.map(child, range(4), chunksize=1)
stop.set()
if {busy_parent}:
    busy.join()
report(lambda: (parent_pool, results, reader[3] == records[3]))
"""


@pytest.mark.parametrize("busy_parent", [False, True], ids=["quiet_parent", "busy_parent"])
def test_reader_after_fork(tmp_path, run_python, busy_parent):
    code = FORK_CODE.format(path=str(tmp_path / "fork.bagz"), busy_parent=busy_parent)
    outcome = run_python(code, timeout=120).outcome()
    # Each child starts with an empty pool and grows it to max_parallelism - 1
    # helpers for its parallel batch read.
    child = (0, True, True, 3, True, True, True)
    assert outcome == {"ok": repr((3, [child] * 4, True))}


# --- The thread pool ------------------------------------------------------------------

POOL_CODE = """
import random, threading, sackli

def os_threads():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))

records = [b"%07d" % i * 16 for i in range(100000)]
indices = list(range(100000))
random.Random(0).shuffle(indices)
expected = [records[i] for i in indices]
readers = {{p: sackli.Reader({path!r}, max_parallelism=p) for p in (1, 2, 3)}}
states = [("start", sackli._engine.thread_pool_size(), threading.active_count(), os_threads())]
for p in (1, 1, 2, 2, 2, 3, 3, 3, 2, 1):
    assert readers[p].read_indices(indices) == expected
    states.append((p, sackli._engine.thread_pool_size(), threading.active_count(), os_threads()))
report(lambda: states)
"""


def test_batch_reads_reuse_the_thread_pool(tmp_path, run_python):
    # 112-byte records: 11 MB, enough for every call to read in parallel.
    path = write(tmp_path / "many.bag", [b"%07d" % i * 16 for i in range(100000)])
    outcome = run_python(POOL_CODE.format(path=str(path)), timeout=120).outcome()
    # (max_parallelism of the call, pool threads, Python threads, OS threads):
    # the pool grows to the largest max_parallelism - 1 seen and no further;
    # the OS threads are the main thread and the pool's.
    pool_after = {1: 0, 2: 1, 3: 2}
    expected, largest = [("start", 0, 1, 1)], 0
    for p in (1, 1, 2, 2, 2, 3, 3, 3, 2, 1):
        largest = max(largest, pool_after[p])
        expected.append((p, largest, 1, 1 + largest))
    assert outcome == {"ok": repr(expected)}


# --- Live iterators at interpreter exit -----------------------------------------------

EXIT_SETUP = """
import itertools, sys, threading, sackli
reader = sackli.Reader({path!r}, read_ahead_bytes=1 << 16)

def open_iterators():
    whole = iter(reader)
    next(whole)
    forever = reader.read_indices_iter(i % len(reader) for i in itertools.count())
    next(forever)
    return whole, forever
"""

EXIT_ENDINGS = {
    "end_of_script": """
        iterators = open_iterators()
        print("ready")
    """,
    "sys_exit": """
        iterators = open_iterators()
        print("ready")
        sys.exit(0)
    """,
    "sys_exit_in_thread": """
        def body():
            kept = open_iterators()
            sys.exit(0)  # ends this thread only, iterators unclosed
        thread = threading.Thread(target=body)
        thread.start()
        thread.join()
        print("ready")
    """,
    "sys_exit_in_thread_keeping_iterators": """
        kept = []
        def body():
            kept.append(open_iterators())
            sys.exit(0)
        thread = threading.Thread(target=body)
        thread.start()
        thread.join()
        print("ready")
        sys.exit(0)
    """,
    "daemon_thread_still_reading": """
        started = threading.Event()
        def body():
            whole, forever = open_iterators()
            for k, record in enumerate(forever):
                if k == 1000:
                    started.set()
        threading.Thread(target=body, daemon=True).start()
        started.wait()
        print("ready")
    """,
    "daemon_thread_in_batch_read": """
        started = threading.Event()
        def body():
            while True:
                reader.read_range(0, 50000)
                started.set()
        threading.Thread(target=body, daemon=True).start()
        started.wait()
        print("ready")
    """,
    "daemon_thread_iterating_all": """
        started = threading.Event()
        def body():
            while True:
                for k, record in enumerate(reader):
                    if k == 1000:
                        started.set()
        threading.Thread(target=body, daemon=True).start()
        started.wait()
        print("ready")
        sys.exit(0)
    """,
}


@pytest.fixture(scope="module")
def big_bag(tmp_path_factory) -> pathlib.Path:
    return write(tmp_path_factory.mktemp("big") / "big.bagz",
                 [b"record %d " % i * (i % 20) for i in range(200000)])


@pytest.mark.parametrize("ending", sorted(EXIT_ENDINGS))
def test_live_iterators_at_exit(run_python, big_bag, ending):
    code = EXIT_SETUP.format(path=str(big_bag)) + textwrap.dedent(EXIT_ENDINGS[ending])
    result = run_python(code, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "ready\n", "")
