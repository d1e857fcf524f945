"""Shard sets as large as the format allows (issue 49 §4): a `name@99999` set
opens, reads and indexes with a bounded number of mappings and descriptors,
and running out of descriptors or address space raises an error naming the
shard instead of aborting the process.

The 99,999-shard set is made once for the module, each shard written
directly as its bytes (record `r<i>` then its one limit), and deleted after.
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest

import sackli

SHARDS = 99_999


def shard_bytes(i: int) -> bytes:
    record = b"r%d" % i
    return record + struct.pack("<Q", len(record))


def write_set(folder, count: int, content=shard_bytes) -> str:
    """The `x@<count>.bag` spec of a set of `count` one-record shards."""
    os.makedirs(folder, exist_ok=True)
    for i in range(count):
        fd = os.open(os.path.join(folder, f"x-{i:05d}-of-{count:05d}.bag"),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, content(i))
        finally:
            os.close(fd)
    return os.path.join(folder, f"x@{count}.bag")


@pytest.fixture(scope="module")
def huge_set(tmp_path_factory):
    folder = tmp_path_factory.mktemp("huge-set")
    spec = write_set(str(folder), SHARDS)
    yield spec
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def huge_reader(huge_set):
    with sackli.Reader(huge_set) as reader:
        yield reader


def mapping_count() -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for _ in maps)


def test_opens_with_its_length_and_bounded_mappings(huge_set):
    before = mapping_count()
    with sackli.Reader(huge_set) as reader:
        assert len(reader) == SHARDS
        assert reader[0] == b"r0" and reader[SHARDS - 1] == b"r%d" % (SHARDS - 1)
        assert mapping_count() - before < 200  # not one per shard
    assert len(sackli.Reader(huge_set.replace(f"@{SHARDS}", "@*"))) == SHARDS


def test_singles_batches_and_iteration(huge_reader):
    picks = [54_321, 3, SHARDS - 1, 3, 77_777]
    assert [huge_reader[i] for i in picks] == [b"r%d" % i for i in picks]
    assert huge_reader.read_indices(picks) == [b"r%d" % i for i in picks]
    every_7th = list(range(0, SHARDS, 7))
    assert huge_reader[every_7th] == [b"r%d" % i for i in every_7th]
    assert list(huge_reader) == [b"r%d" % i for i in range(SHARDS)]
    assert huge_reader[-3:].read() == [b"r%d" % i for i in range(SHARDS - 3, SHARDS)]


def test_multi_index(huge_reader):
    index = sackli.MultiIndex(huge_reader)
    assert len(index) == SHARDS
    assert index[b"r0"] == [0] and index[b"r98765"] == [98_765]
    assert b"r%d" % SHARDS not in index


def test_beam_source_splits_one_bundle_per_shard(huge_set):
    from apache_beam.io import source_test_utils
    from beam_helpers import bytes_source  # loaded through conftest.py

    source = bytes_source(huge_set)
    bundles = list(source.split(10**9))
    assert len(bundles) == SHARDS
    for k in (0, 12_345, SHARDS - 1):
        bundle = bundles[k]
        assert source_test_utils.read_from_source(
            bundle.source, bundle.start_position, bundle.stop_position) == [b"r%d" % k]


# --- Past the mapping budget: pread through a bounded set of descriptors -----


def padded_shard(i: int) -> bytes:
    """A shard of 5,000 bytes, too large to be held in memory at open."""
    record = b"%05d" % i * 1000
    return record + struct.pack("<Q", len(record))


def test_shards_past_the_mapping_budget_read_through_few_descriptors(tmp_path, run_python):
    spec = write_set(str(tmp_path / "set"), 300, padded_shard)
    outcome = run_python(f"""
        import os, resource
        os.environ["SACKLI_MAX_MAPPED_FILES"] = "50"
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        import sackli
        def maps():
            with open("/proc/self/maps") as f:
                return sum(1 for _ in f)
        before = maps()
        r = sackli.Reader({spec!r}, max_parallelism=4)
        wanted = [b"%05d" % i * 1000 for i in range(300)]
        assert list(r) == wanted
        assert r[list(range(299, -1, -3))] == wanted[299::-3]
        assert [r[i] for i in range(0, 300, 7)] == wanted[::7]
        report(lambda: (maps() - before, len(os.listdir("/proc/self/fd"))))
    """).outcome()
    assert "ok" in outcome, outcome
    new_maps, open_fds = eval(outcome["ok"])
    assert new_maps < 50 + 60  # the 50 mapped shards, and the heap's growth
    assert open_fds <= 128 // 4 + 16  # the cache's quarter, and Python's own


def test_a_replaced_unmapped_shard_is_named(tmp_path, run_python):
    """A shard read with pread whose descriptor was evicted is opened again;
    if another file took its name meanwhile, the read says so."""
    spec = write_set(str(tmp_path / "set"), 40, padded_shard)
    victim = str(tmp_path / "set" / "x-00000-of-00040.bag")
    outcome = run_python(f"""
        import os
        os.environ["SACKLI_MAX_MAPPED_FILES"] = "0"
        os.environ["SACKLI_MAX_OPEN_FILES"] = "16"
        import sackli
        r = sackli.Reader({spec!r})
        assert r[0] == b"00000" * 1000
        [r[i] for i in range(1, 40)]  # evicts shard 0's descriptor
        with open({victim!r} + ".new", "wb") as f:
            f.write({padded_shard(7)!r})
        os.replace({victim!r} + ".new", {victim!r})
        report(lambda: r[0])
    """).outcome()
    assert outcome["error"] == "CorruptionError", outcome
    assert victim in outcome["message"] and "replaced" in outcome["message"]


def test_a_fork_while_threads_read_unmapped_shards_leaves_the_child_reading(tmp_path, run_python):
    """Threads read shards through the process's descriptor cache while the
    main thread forks: each child reads at once. A fork taken while another
    thread held the cache's lock would leave the child's copy locked (the
    child hangs on its first read) without the cache's fork handlers."""
    spec = write_set(str(tmp_path / "set"), 40, padded_shard)
    outcome = run_python(f"""
        import os, random, threading, time
        os.environ["SACKLI_MAX_MAPPED_FILES"] = "0"
        os.environ["SACKLI_MAX_OPEN_FILES"] = "16"
        import sackli
        r = sackli.Reader({spec!r})
        stop = threading.Event()
        def churn():  # 40 shards through 16 descriptors: the lock is busy
            pick = random.Random(threading.get_ident())
            while not stop.is_set():
                r[pick.randrange(40)]
        threads = [threading.Thread(target=churn) for _ in range(2)]
        for thread in threads:
            thread.start()
        children = []
        for _ in range(40):
            pid = os.fork()
            if pid == 0:
                os._exit(0 if [r[i] for i in range(0, 40, 3)] == [b"%05d" % i * 1000 for i in range(0, 40, 3)] else 1)
            children.append(pid)
        deadline = time.monotonic() + 20
        statuses, hung = [], 0
        for pid in children:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    statuses.append(os.waitstatus_to_exitcode(status))
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    hung += 1
                    break
                time.sleep(0.01)
        stop.set()
        for thread in threads:
            thread.join()
        report(lambda: (hung, statuses.count(0), len(statuses)))
    """, timeout=90).outcome()
    assert "ok" in outcome, outcome
    hung, good, ended = eval(outcome["ok"])
    assert (hung, good, ended) == (0, 40, 40)


# --- Running out ---------------------------------------------------------------


def test_out_of_descriptors_names_the_shard(tmp_path, run_python):
    spec = write_set(str(tmp_path / "set"), 20)
    outcome = run_python(f"""
        import os, resource
        import sackli
        lowest_free = os.open(os.devnull, os.O_RDONLY)
        os.close(lowest_free)  # a limit of its number: no descriptor is left
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        report(lambda: sackli.Reader({spec!r}))
    """).outcome()
    assert outcome["error"] == "OSError", outcome
    assert "Too many open files" in outcome["message"]
    assert "x-000" in outcome["message"] and "-of-00020.bag" in outcome["message"]


def test_out_of_address_space_falls_back_to_pread(tmp_path, run_python):
    """A shard too large to map under RLIMIT_AS is read with pread; a record
    too large to allocate is a MemoryError. The 200 MB record is a hole."""
    path = tmp_path / "sparse.bag"
    big = 200 << 20
    with open(path, "wb") as f:
        f.write(b"hello")
        f.seek(5 + big)
        f.write(struct.pack("<QQ", 5, 5 + big))
    outcome = run_python(f"""
        import resource
        import sackli
        with open("/proc/self/status") as status:
            vm = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (100 << 20), resource.RLIM_INFINITY))
        r = sackli.Reader({str(path)!r}, max_parallelism=1)
        assert r[0] == b"hello"
        report(lambda: r[1])
    """).outcome()
    assert outcome["error"] == "MemoryError", outcome
