"""How many requests remote reads cost and how they overlap (the engine's
read planner over sackli's remote byte source)."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

import sackli
from remote_helpers import (  # loaded through conftest.py
    TAIL, SEPARATE, COALESCE_GAP, MAX_COALESCED, servers, remote, write_bag,
)


# --- 5. Request counts ----------------------------------------------------------------


def test_reading_many_small_neighbouring_records_costs_few_gets(remote):
    records = [f"record {i}".encode() for i in range(1000)]
    url = remote.url("small.bagz")
    write_bag(url, records)
    reader = sackli.Reader(url)
    counts = remote.proxy.counts
    for read in (lambda: reader.read_indices(range(1000)),
                 lambda: reader.read_range(0, 1000),
                 lambda: reader.read_indices(np.arange(999, -1, -1))[::-1],
                 reader.read):
        remote.proxy.reset_counts()
        assert read() == records
        assert counts["GET"] <= 3 and set(counts) == {"GET"}, counts
    remote.proxy.reset_counts()
    assert list(reader) == records
    # Iteration reads batches of 16, 32, 64, ... records: a GET each.
    assert counts["GET"] <= 8 and set(counts) == {"GET"}, counts
    remote.proxy.reset_counts()
    assert reader[500] == records[500]
    assert dict(counts) == {"GET": 1}


@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
@pytest.mark.parametrize("storage", [sackli.LimitsStorage.ON_DISK, sackli.LimitsStorage.IN_MEMORY],
                         ids=["on_disk", "in_memory"])
def test_opening_costs_a_constant_number_of_requests(remote, placement, storage):
    # Each object opens with one GET of its last 64 KiB, whose answer gives
    # its size and version too: for TAIL, the trailer and the limits of up
    # to 8,191 records; with IN_MEMORY a GET of the limits before those.
    # SEPARATE: that GET for the bag and for its limits file, and with
    # IN_MEMORY a GET of the limits the tail did not hold. ON_DISK fetches
    # limits when read.
    in_memory = storage == sackli.LimitsStorage.IN_MEMORY

    def expected_for(n: int) -> dict[str, int]:
        more = 1 if in_memory and 8 * n > 64 * 1024 - 8 else 0
        return {"GET": (1 if placement == TAIL else 2) + more}

    for n in (3, 100_000):
        url = remote.url(f"open{n}.bag")
        write_bag(url, [b"z"] * n, limits_placement=placement)
        remote.proxy.reset_counts()
        reader = sackli.Reader(url, limits_placement=placement, limits_storage=storage)
        assert dict(remote.proxy.counts) == expected_for(n), (n, remote.proxy.log)
        assert len(reader) == n
    # A set found by listing: one LIST, then one GET per shard (the listing
    # gave the size and version of the records: TAIL reads its trailer;
    # a SEPARATE limits object opens with the GET of its tail), and two GETs
    # of the set's manifest (absent here: the shards were written one by
    # one; a 404 is believed when it comes twice).
    for s in range(3):
        write_bag(remote.url(f"os-{s:05d}-of-00003.bag"), [b"q"] * (s + 1), limits_placement=placement)
    remote.proxy.reset_counts()
    sackli.Reader(remote.url("os@*.bag"), limits_placement=placement, limits_storage=storage)
    assert dict(remote.proxy.counts) == {"LIST": 1, "GET": 3 + 2}


def _coalesced_runs(spans: list[tuple[int, int]]) -> int:
    """Requests the planner makes for sorted (begin, end) spans: neighbours
    closer than COALESCE_GAP share one, up to MAX_COALESCED bytes, while the
    bytes between them stay at most half of the run's records' (remote
    sources: native/bagz/coalescing.h)."""
    runs, run_begin, run_end, asked = 0, 0, -1, 0
    for begin, end in spans:
        if run_end >= 0 and begin <= run_end + COALESCE_GAP and max(end, run_end) - run_begin <= MAX_COALESCED:
            grown = max(run_end, end) - run_begin
            if grown - (asked + end - begin) <= (asked + end - begin) // 2:
                run_end, asked = max(run_end, end), asked + end - begin
                continue
        runs, run_begin, run_end, asked = runs + 1, begin, end, end - begin
    return runs


def _fewest_requests(spans: list[tuple[int, int]]) -> int:
    """The fewest requests of at most MAX_COALESCED bytes covering the spans."""
    windows, window_begin = 0, None
    for begin, end in spans:
        if window_begin is None or end - window_begin > MAX_COALESCED:
            windows, window_begin = windows + 1, begin
    return windows


def test_spread_out_reads_cost_one_get_per_coalesced_run(remote):
    # 256 records of 40 KiB: neighbours (and records up to one apart) are
    # closer than 64 KiB and share a GET; records further apart do not.
    size = 40 * 1024
    records = [i.to_bytes(4, "little") * (size // 4) for i in range(256)]
    url = remote.url("spread.bag")
    write_bag(url, records)
    reader = sackli.Reader(url)
    assert reader[0] == records[0]  # fetches the (one) page of limits: not counted below
    rng = random.Random(15)
    for trial in range(4):
        indices = rng.sample(range(256), 40) + rng.sample(range(256), 5)  # some repeated
        if trial == 3:
            indices = list(range(0, 256, 3))  # a 40 KiB gap: one long run, cut at 8 MiB
        spans = sorted({(i * size, (i + 1) * size) for i in indices})  # repeats read once
        remote.proxy.reset_counts()
        assert reader.read_indices(indices) == [records[i] for i in indices]
        gets = remote.proxy.counts["GET"]
        assert _fewest_requests(spans) <= gets <= _coalesced_runs(spans), (trial, gets)
        assert set(remote.proxy.counts) == {"GET"}


# --- 6. Concurrency -----------------------------------------------------------------------


def test_parallel_gets_overlap_under_latency(remote):
    # Small records 0, 2, 4, ... separated by 70 KiB fillers: each needs a GET
    # of its own.
    records = []
    for i in range(64):
        records += [f"wanted {i}".encode(), b"\0" * (70 * 1024)]
    url = remote.url("far.bag")
    write_bag(url, records)
    reader = sackli.Reader(url, max_parallelism=16)
    latency = 0.05
    remote.proxy.latency = latency
    start = time.monotonic()
    assert reader[2] == b"wanted 1"
    assert time.monotonic() - start >= latency  # the latency is really there
    wanted = list(range(0, 128, 2))
    remote.proxy.reset_counts()
    assert reader.read_indices(wanted) == [records[i] for i in wanted]
    assert remote.proxy.counts["GET"] == 64
    # Each GET is held 50 ms at the proxy: a reader that overlaps its GETs
    # has several there at once (one at a time would keep this at 1). The
    # peak is counted, not timed, so a loaded machine cannot fail it.
    assert remote.proxy.max_in_flight >= 4, remote.proxy.max_in_flight
