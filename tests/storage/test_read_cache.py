"""The local cache of remote reads (`cache_dir`, sackli/_storage/_read_cache.py)
on moto's S3, fake-gcs-server and gcp-storage-emulator: what a second pass
downloads (counted by the proxy in front of each real server), the budget,
replaced objects, damaged entries and processes sharing one cache."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import struct
import threading
import uuid
import zlib

import numpy as np
import pytest

import sackli
from sackli._storage import RemoteObject, _read_cache, stat_object
from remote_helpers import (  # loaded through conftest.py
    SEPARATE, TAIL, Remote, emulated_gcs, gcs_emulator, servers, write_bag,
)

# The servers' fixtures, named so that pytest finds them here.
FIXTURES = (servers, gcs_emulator, emulated_gcs)
# Small blocks, so that KB-sized bags span hundreds of them.
BLOCK = 4096
ON_DISK, IN_MEMORY = sackli.LimitsStorage.ON_DISK, sackli.LimitsStorage.IN_MEMORY


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(_read_cache, "BLOCK_BYTES", BLOCK)
    for name in (_read_cache.ENV_DIR, _read_cache.ENV_MAX_BYTES, "SACKLI_SHARED_CACHE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=["s3", "gs", "gcs-emulator"])
def store(request):
    """A `Remote` on moto's S3, fake-gcs-server or gcp-storage-emulator,
    with a fresh folder and zeroed counts."""
    if request.param == "gcs-emulator":
        return request.getfixturevalue("emulated_gcs")
    remote = Remote(request.param, request.getfixturevalue("servers"),
                    f"cache-{uuid.uuid4().hex[:8]}/")
    remote.proxy.reset_faults()
    remote.proxy.reset_counts()
    return remote


def records(n: int = 600, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randrange(0, 400)) for _ in range(n)]


def cache_files(folder) -> dict[str, int]:
    """{path: size} of every file in the cache folder."""
    return {os.path.join(root, name): os.path.getsize(os.path.join(root, name))
            for root, _, names in os.walk(folder) for name in names}


def entries(folder) -> list[str]:
    return sorted(path for path in cache_files(folder)
                  if os.path.basename(path) not in ("usage", "secret"))


def fetched(remote) -> tuple[dict, int]:
    counts = dict(remote.proxy.counts)
    counts.pop("LIST", None)  # a spec's `@*` or a manifest look-up, not record bytes
    return counts, remote.proxy.bytes_sent["GET"]


READS = {
    "batch": lambda reader, order: reader.read_indices(order),
    "iterate_indices": lambda reader, order: list(reader.read_indices_iter(iter(order), 37)),
    "single": lambda reader, order: [reader[i] for i in order],
    "iterate": lambda reader, order: [list(reader)[i] for i in order],
}


@pytest.mark.parametrize("how", READS)
@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
@pytest.mark.parametrize("limits", [ON_DISK, IN_MEMORY], ids=["on_disk", "in_memory"])
def test_a_second_epoch_fetches_no_record_bytes(store, tmp_path, how, placement, limits):
    data = records()
    url = store.url("bag.bagz")
    write_bag(url, data, limits_placement=placement)
    objects = 2 if placement == SEPARATE else 1
    order = list(range(len(data)))
    random.Random(1).shuffle(order)
    options = sackli.Reader.Options(limits_placement=placement, limits_storage=limits,
                                    cache_dir=str(tmp_path / "cache"), cache_max_bytes=1 << 30)
    read = READS[how]
    reader = sackli.Reader(url, options)
    store.proxy.reset_counts()
    assert read(reader, order) == [data[i] for i in order]
    counts, first_bytes = fetched(store)
    assert first_bytes > 0 and counts.get("GET", 0) > 0
    # The same reader again: nothing at all.
    store.proxy.reset_counts()
    assert read(reader, order[::-1]) == [data[i] for i in order[::-1]]
    assert fetched(store) == ({}, 0)
    # A new reader: a metadata request per object (its identity), no bytes.
    store.proxy.reset_counts()
    again = sackli.Reader(url, options)
    assert read(again, order) == [data[i] for i in order]
    assert fetched(store) == ({"HEAD": objects}, 0)


def test_each_block_is_fetched_once(store, tmp_path):
    # Opening fetches the last block (the tail, then the limits: cached);
    # the record then spans the blocks before it and the last one: only
    # the missing run is fetched.
    data = bytes(range(256)) * 200
    url = store.url("blob.bag")
    write_bag(url, [data])
    store.proxy.reset_counts()
    reader = sackli.Reader(url, cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
    assert reader[0] == data
    assert fetched(store) == ({"HEAD": 1, "GET": 2}, len(data) + 8)  # the whole object
    store.proxy.reset_counts()
    assert reader[0] == data and fetched(store) == ({}, 0)


def test_threads_reading_at_once_fetch_each_block_once(store, tmp_path):
    # Loader threads reading the same records at once (and the engine's own
    # threads reading neighbouring ranges): a block one thread is fetching
    # is waited for by the others, so a cold pass downloads each byte of the
    # object once.
    data = records(300, seed=3)
    url = store.url("threads.bagz")
    write_bag(url, data)
    size = stat_object(url).size
    reader = sackli.Reader(url, cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
    store.proxy.reset_counts()
    store.proxy.latency = 0.05  # long enough for the threads' reads to overlap
    start = threading.Barrier(4)
    results: list[list[bytes]] = []

    def read() -> None:
        start.wait()
        results.append(reader.read_indices(range(len(data))))

    threads = [threading.Thread(target=read) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        store.proxy.latency = 0.0
    assert results == [data] * 4
    counts, got = fetched(store)
    assert got <= size - 8 and counts["GET"] <= -(-size // BLOCK)


def test_the_environment_names_the_cache(store, tmp_path, monkeypatch):
    data = records(100)
    url = store.url("env.bag")
    write_bag(url, data)
    monkeypatch.setenv("SACKLI_CACHE_DIR", str(tmp_path / "env-cache"))
    monkeypatch.setenv("SACKLI_CACHE_MAX_BYTES", "1M")
    assert list(sackli.Reader(url)) == data
    assert entries(tmp_path / "env-cache")
    store.proxy.reset_counts()
    assert list(sackli.Reader(url)) == data
    assert fetched(store)[1] == 0


def test_a_pickled_reader_keeps_its_cache(store, tmp_path):
    data = records(200)
    url = store.url("pickled.bag")
    write_bag(url, data)
    reader = sackli.Reader(url, cache_dir=str(tmp_path / "c"), cache_max_bytes=10 ** 7)
    assert reader.read_indices(range(200)) == data
    copy = pickle.loads(pickle.dumps(reader[10:]))
    assert copy.options.cache_dir == str(tmp_path / "c")
    store.proxy.reset_counts()
    assert list(copy) == data[10:]
    assert fetched(store)[1] == 0


def test_the_budget_holds_and_recent_blocks_stay(store, tmp_path):
    data = records(1500)  # about 300 KB: 75 blocks
    url = store.url("big.bag")
    write_bag(url, data)
    budget = 40 * 1024
    folder = tmp_path / "small"
    reader = sackli.Reader(url, cache_dir=str(folder), cache_max_bytes=budget)
    for i in range(0, len(data), 50):
        assert reader.read_range(i, 50) == data[i:i + 50]
        assert sum(cache_files(folder).values()) <= budget
    assert len(entries(folder)) >= 6
    # The last records read are still cached; the first ones are gone.
    store.proxy.reset_counts()
    assert reader.read_range(len(data) - 20, 20) == data[-20:]
    assert fetched(store)[1] == 0
    assert reader.read_range(0, 20) == data[:20]
    assert fetched(store)[1] > 0


def test_an_entry_larger_than_the_budget_is_not_kept(store, tmp_path):
    url = store.url("tiny-budget.bag")
    write_bag(url, records(100))
    folder = tmp_path / "tiny"
    assert list(sackli.Reader(url, cache_dir=str(folder), cache_max_bytes=100)) == records(100)
    assert entries(folder) == []


def test_a_replaced_object_is_read_fresh(store, tmp_path):
    url = store.url("replaced.bag")
    old, new = [b"a" * 100] * 50, [b"b" * 100] * 50  # the same size
    write_bag(url, old)
    options = sackli.Reader.Options(cache_dir=str(tmp_path), cache_max_bytes=1 << 20)
    assert list(sackli.Reader(url, options)) == old
    write_bag(url, new)
    store.proxy.reset_counts()
    assert list(sackli.Reader(url, options)) == new
    assert fetched(store)[1] >= 50 * 100


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "header", "foreign", "symlink"])
def test_a_damaged_entry_is_fetched_again(store, tmp_path, damage):
    data = records(300)
    url = store.url("damaged.bag")
    write_bag(url, data)
    options = sackli.Reader.Options(cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
    assert list(sackli.Reader(url, options)) == data
    good = {path: open(path, "rb").read() for path in entries(tmp_path)}
    assert len(good) > 5
    paths = list(good)
    for number, (path, content) in enumerate(good.items()):
        if damage == "symlink":  # a link to a good copy of itself: not followed
            os.replace(path, path + ".elsewhere")
            os.symlink(path + ".elsewhere", path)
            continue
        with open(path, "r+b") as file:  # in place
            if damage == "foreign":  # another block's entry (of the same size)
                other = next((good[p] for p in paths[number + 1:] + paths[:number]
                              if len(good[p]) == len(content)), None)
                file.write(other if other is not None else bytes(len(content)))
            elif damage == "flip":
                file.seek(len(content) - 1 - len(content) // 3)
                file.write(bytes([content[len(content) - 1 - len(content) // 3] ^ 0x10]))
            elif damage == "truncate":
                file.truncate(len(content) - 1)
            elif damage == "empty":
                file.truncate(0)
            else:
                file.seek(20)  # the payload length
                file.write(b"\xff")
    # Read as another process would: this one keeps the chunks it checked in
    # memory (the right bytes, whatever happens to the files since).
    for cache in list(_read_cache._LIVE):
        cache.forget_open()
    store.proxy.reset_counts()
    reader = sackli.Reader(url, options)
    order = list(range(len(data)))
    random.Random(2).shuffle(order)
    assert reader.read_indices(order) == [data[i] for i in order]
    assert fetched(store)[1] >= sum(map(len, data))
    # Each damaged file was dropped and a good entry published in its place.
    published = [path for path in entries(tmp_path) if not path.endswith(".elsewhere")]
    assert {path: open(path, "rb").read() for path in published} == good
    assert not [path for path in published if os.path.islink(path)]


@pytest.mark.parametrize("budget", [1 << 30, 48 * 1024], ids=["roomy", "tight"])
def test_four_processes_share_one_cache(store, tmp_path, budget):
    data = records(1200, seed=7)
    url = store.url("shared.bag")
    write_bag(url, data)
    folder = str(tmp_path / "shared")
    # Pickled readers, as DataLoader workers get them: the cache goes along.
    reader = sackli.Reader(url, cache_dir=folder, cache_max_bytes=budget, max_parallelism=4)
    orders = [np.random.default_rng(seed).permutation(len(data)) for seed in range(8)]
    # Forked, so that the workers keep this module's small blocks.
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.starmap(sackli.Reader.read_indices, [(reader, order) for order in orders])
    for order, got in zip(orders, results):
        assert got == [data[i] for i in order]
    files = cache_files(folder)
    usage = os.path.join(folder, "v1", "usage")
    assert sum(files.values()) <= budget
    assert not [path for path in files if ".tmp-" in os.path.basename(path)]
    # The count is never below what is there.
    assert int(open(usage).read()) >= sum(files.values()) - files[usage]
    # Every entry left is whole and valid: read them all, nothing fetched.
    if budget > 1 << 20:
        assert len(entries(folder)) == -(-(sum(map(len, data)) + 8 * len(data)) // BLOCK)
        store.proxy.reset_counts()
        fresh = _read_cache.ReadCache(folder, budget)
        for path in entries(folder):
            key, block = os.path.basename(path).split("-")
            length = os.path.getsize(path) - _read_cache._header_bytes(BLOCK)
            assert fresh._cached(bytes.fromhex(key), int(block), length, 0, length) is not None or \
                fresh._cached(bytes.fromhex(key), int(block), _last_length(path), 0,
                              _last_length(path)) is not None
        assert list(sackli.Reader(url, cache_dir=folder, cache_max_bytes=budget)) == data
        assert fetched(store)[1] == 0


def _last_length(path: str) -> int:
    """The payload length of an entry shorter than a block (an object's last)."""
    size = os.path.getsize(path)
    return next(n for n in range(BLOCK) if n + _read_cache._header_bytes(n) == size)


def test_local_files_are_never_cached(tmp_path):
    path = str(tmp_path / "local.bag")
    write_bag(path, [b"x", b"y"])
    folder = tmp_path / "cache"
    assert list(sackli.Reader(path, cache_dir=str(folder))) == [b"x", b"y"]
    assert not folder.exists()


@pytest.mark.parametrize("options, error, message", [
    ({"cache_max_bytes": 0}, ValueError, "cache_max_bytes must be >= 1, not 0"),
    ({"cache_max_bytes": "1G"}, TypeError, "cache_max_bytes must be an int, not str"),
    ({"cache_max_bytes": True}, TypeError, "cache_max_bytes must be an int, not bool"),
    ({"cache_dir": 3}, TypeError, "cache_dir must be a str or os.PathLike, not int"),
    ({"cache_dir": b"/tmp"}, TypeError, "cache_dir must be a str or os.PathLike, not bytes"),
    ({"cache_dir": "s3://bucket/cache"}, ValueError, "cache_dir must be a local folder"),
    ({"cache_dir": ""}, ValueError, "cache_dir must not be empty"),
])
def test_options_are_checked(options, error, message):
    with pytest.raises(error, match=message):
        sackli.Reader.Options(**options)


def test_a_pathlike_cache_dir_and_a_missing_folder(store, tmp_path):
    url = store.url("created.bag")
    write_bag(url, [b"r"])
    folder = tmp_path / "a" / "b"
    assert sackli.Reader(url, cache_dir=folder)[0] == b"r"
    assert entries(folder)


def test_a_cache_dir_that_is_a_file_or_a_bad_budget_is_an_error(store, tmp_path, monkeypatch):
    url = store.url("errors.bag")
    write_bag(url, [b"r"])
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        sackli.Reader(url, cache_dir=str(tmp_path / "file"))
    monkeypatch.setenv("SACKLI_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("SACKLI_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="SACKLI_CACHE_MAX_BYTES must be a number of bytes"):
        sackli.Reader(url)


class _Calls:
    """Counts the calls of the engine's handles (`RemoteObject`) into Python."""

    def __init__(self, monkeypatch) -> None:
        self.counts = {"read": 0, "read_many": 0, "fetch_blocks": 0}
        for name in self.counts:
            method = getattr(RemoteObject, name)
            monkeypatch.setattr(RemoteObject, name, self._counting(name, method))

    def _counting(self, name, method):
        def counted(handle, *args):
            self.counts[name] += 1
            return method(handle, *args)
        return counted

    def reset(self) -> None:
        for name in self.counts:
            self.counts[name] = 0


@pytest.mark.parametrize("how", READS)
def test_warm_reads_make_no_python_call(store, tmp_path, monkeypatch, how):
    # The engine reads cached blocks itself: a warm pass (the same reader,
    # or a new one, its open included) never calls into the handle.
    calls = _Calls(monkeypatch)
    data = records(400, seed=11)
    url = store.url("warm.bagz")
    write_bag(url, data)
    order = list(range(len(data)))
    random.Random(4).shuffle(order)
    options = sackli.Reader.Options(cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
    reader = sackli.Reader(url, options)
    assert READS[how](reader, order) == [data[i] for i in order]
    assert calls.counts["fetch_blocks"] > 0
    assert calls.counts["read_many"] == calls.counts["read"] == 0
    calls.reset()
    store.proxy.reset_counts()
    assert READS[how](reader, order[::-1]) == [data[i] for i in order[::-1]]
    again = sackli.Reader(url, options)
    assert READS[how](again, order) == [data[i] for i in order]
    assert calls.counts == {"read": 0, "read_many": 0, "fetch_blocks": 0}
    assert fetched(store) == ({"HEAD": 1}, 0)


def _crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), bit by bit: for the few bytes of a header."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def _older_format(path: str, header_bytes: int, version: int) -> None:
    """Rewrites the entry at `path` as an older sackli wrote it, the same
    key, block and payload: format 1 (sackli 0.1: a CRC-32 of each 16 KiB
    chunk and of the header) or 2 (a CRC-32C of each 1 KiB chunk, as now,
    and of the header, where format 3 has its seal)."""
    content = open(path, "rb").read()
    payload = content[header_bytes:]
    magic, _, _, length, digest, block, _ = struct.unpack_from("<8sIIQ32sQI", content)
    if version == 1:
        chunk = 16 << 10
        crcs = [zlib.crc32(payload[i:i + chunk]) for i in range(0, len(payload), chunk)]
    else:
        chunk = 1 << 10
        crcs = list(struct.unpack_from(f"<{-(-len(payload) // chunk)}I", content, 68))
    head = struct.pack("<8sIIQ32sQI", magic, version, chunk, length, digest, block, len(crcs))
    head += struct.pack(f"<{len(crcs)}I", *crcs)
    check = zlib.crc32(head) if version == 1 else _crc32c(head)
    with open(path, "wb") as file:
        file.write(head + struct.pack("<I", check) + payload)


def test_crc32c_of_the_tests_is_crc32c():
    assert _crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C


@pytest.mark.parametrize("version", [1, 2])
def test_entries_of_older_formats_are_misses_and_replaced(store, tmp_path, version):
    data = records(300, seed=5)
    url = store.url(f"format{version}.bag")
    write_bag(url, data)
    options = sackli.Reader.Options(cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
    assert list(sackli.Reader(url, options)) == data
    good = {path: open(path, "rb").read() for path in entries(tmp_path)}
    for path, content in good.items():
        assert content[8] == 3  # the format
        length = next(n for n in range(BLOCK + 1) if n + _read_cache._header_bytes(n) == len(content))
        _older_format(path, _read_cache._header_bytes(length), version)
    for cache in list(_read_cache._LIVE):
        cache.forget_open()
    store.proxy.reset_counts()
    assert list(sackli.Reader(url, options)) == data
    assert fetched(store)[1] >= sum(map(len, data))
    assert {path: open(path, "rb").read() for path in entries(tmp_path)} == good


def test_a_forked_child_reads_the_cache(store, tmp_path):
    # Children forked while a thread of the parent reads the cache (its
    # entries' lock taken at any moment) read every record from it.
    data = records(500, seed=9)
    url = store.url("forked.bag")
    write_bag(url, data)
    reader = sackli.Reader(url, cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
    assert reader.read_indices(range(len(data))) == data
    store.proxy.reset_counts()
    stop = threading.Event()

    def keep_reading() -> None:
        while not stop.is_set():
            assert reader.read_indices(range(0, len(data), 3)) == data[::3]

    thread = threading.Thread(target=keep_reading)
    thread.start()
    try:
        children = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                # A reader of its own (the parent's may be mid-read), on the
                # same cache and its inherited reader of entries.
                mine = sackli.Reader(url, cache_dir=str(tmp_path), cache_max_bytes=1 << 30)
                good = list(mine) == data and mine.read_indices(range(len(data))[::-1]) \
                    == data[::-1]
                os._exit(0 if good else 1)
            children.append(pid)
        statuses = [os.waitpid(pid, 0)[1] for pid in children]
    finally:
        stop.set()
        thread.join()
    assert statuses == [0] * 4
    counts, got = fetched(store)  # each child's open: its metadata requests
    assert got == 0 and set(counts) == {"HEAD"}


def test_python_reads_share_the_engines_entries(store, tmp_path):
    # `RemoteObject.read` (sackli.maps' remote reads) is served by the same
    # reader of entries, and a block the engine cached is read without GETs.
    data = records(200, seed=2)
    url = store.url("python-reads.bag")
    write_bag(url, data)
    cache = _read_cache.read_cache(str(tmp_path), 1 << 30)
    assert list(sackli.Reader(url, cache_dir=str(tmp_path), cache_max_bytes=1 << 30)) == data
    size = stat_object(url).size
    store.proxy.reset_counts()
    handle = RemoteObject(url, cache=cache)
    whole = handle.read(0, size)
    assert len(whole) == size and whole[:len(data[0])] == data[0]
    assert handle.read_many([(1, 5), (BLOCK - 2, 9), (size - 3, 3)]) == [
        whole[1:6], whole[BLOCK - 2:BLOCK + 7], whole[-3:]]
    assert fetched(store) == ({"HEAD": 1}, 0)
    assert cache.entries.open_entries > 0
