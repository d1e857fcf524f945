"""Opening remote shard sets: the requests each kind of spec makes, and that
they are in flight together (moto's S3 server and fake-gcs-server behind
the fault proxy, with latency added so that overlapping requests show in
its `max_in_flight`; no test times anything).

What opening a set of N shards with TAIL limits (stored ON_DISK) costs:

| spec | requests |
|---|---|
| `name@N.ext`, a comma list | N GETs of a tail (each answer gives the size and version) + the manifest's GET |
| `name@*.ext`, a glob | 1 LIST + N GETs of a tail + the manifest's GET |

The listing gives each shard's size and version (ETag, generation), so the
shards found by one open with no HEAD of their own; their reads are pinned
to that version all the same. The manifest is read while the shards open,
and each shard's requests run beside the others' (up to
`remote_parallelism` at once).
"""

from __future__ import annotations

import errno

import pytest

import sackli
from sackli import _storage
from sackli._reader import _open_core
from sackli._shard_spec import expand_file_spec
from remote_helpers import Remote, make_records, remote, servers, write_bag  # noqa: F401

SHARDS = 16
LATENCY = 0.05  # seconds the proxy waits before forwarding each request
BASE = "set"
NAMES = [f"{BASE}-{i:05d}-of-{SHARDS:05d}.bag" for i in range(SHARDS)]


def _write_set(remote, records: list[bytes]) -> None:
    with sackli.ShardedWriter(remote.url(f"{BASE}@{SHARDS}.bag")) as writer:
        writer.write_many(records)


def _specs(remote) -> dict[str, str]:
    return {
        "count": remote.url(f"{BASE}@{SHARDS}.bag"),
        "star": remote.url(f"{BASE}@*.bag"),
        "list": ",".join(remote.url(name) for name in NAMES),
        "glob": remote.url(f"{BASE}-*-of-{SHARDS:05d}.bag"),
    }


# Per shard: one GET of its last 64 KiB, whose answer gives its size and
# version too (a listing's, when there is one); per set: its manifest (one
# GET), and the listing.
EXPECTED = {
    "count": {"GET": SHARDS + 1},
    "list": {"GET": SHARDS + 1},
    "star": {"LIST": 1, "GET": SHARDS + 1},
    "glob": {"LIST": 1, "GET": SHARDS + 1},
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_opening_a_16_shard_set_keeps_its_requests_in_flight(remote, kind):
    records = make_records(SHARDS * 20, seed=3)
    _write_set(remote, records)
    spec = _specs(remote)[kind]
    remote.proxy.latency = LATENCY
    remote.proxy.reset_counts()
    reader = sackli.Reader(spec)
    assert dict(remote.proxy.counts) == EXPECTED[kind], remote.proxy.log
    assert remote.proxy.max_in_flight >= 8, remote.proxy.log
    assert len(reader) == len(records)
    remote.proxy.latency = 0.0
    # The versions a listing gave pin the reads as a HEAD's would: every
    # record reads back (a wrong version would answer 412: ESTALE).
    assert reader.read() == records


def test_remote_parallelism_one_opens_one_request_at_a_time(remote):
    _write_set(remote, make_records(SHARDS, seed=4))
    remote.proxy.latency = 0.01
    remote.proxy.reset_counts()
    reader = sackli.Reader(remote.url(f"{BASE}@{SHARDS}.bag"), remote_parallelism=1)
    assert dict(remote.proxy.counts) == EXPECTED["count"]
    assert remote.proxy.max_in_flight == 1
    assert len(reader) == SHARDS


def test_a_missing_shard_is_named(remote):
    _write_set(remote, make_records(SHARDS * 2, seed=5))
    remote.delete(NAMES[7])
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url(f"{BASE}@{SHARDS}.bag"))
    assert remote.url(NAMES[7]) in str(caught.value)
    with pytest.raises(FileNotFoundError, match=f"shard 7 of {SHARDS} is missing"):
        sackli.Reader(remote.url(f"{BASE}@*.bag"))


@pytest.mark.parametrize("kind", ["count", "star"])
def test_a_refused_request_names_its_shard(remote, kind):
    _write_set(remote, make_records(SHARDS * 2, seed=6))
    # The one request of shard 5 that each spec makes: the read of its tail.
    remote.proxy.fail_next(1, status=403, kinds=["GET"], match=NAMES[5])
    with pytest.raises(PermissionError) as caught:
        sackli.Reader(_specs(remote)[kind])
    assert remote.url(NAMES[5]) in str(caught.value)
    assert remote.proxy.faults_applied["fail"] == 1


def test_an_object_replaced_after_its_listing_is_stale_never_other_bytes(remote):
    """Between the listing of `name@*` and the first read of a shard, the
    shard is replaced: the read is pinned to the listed version, so it
    raises ESTALE naming the shard (a set without a manifest: nothing else
    would notice)."""
    for i in range(3):
        write_bag(remote.url(f"loose-{i:05d}-of-00003.bag"), [b"old %d" % i])
    with _storage.remembering_listings() as listed:
        paths = expand_file_spec(remote.url("loose@*.bag"))
    assert sorted(listed) == paths
    write_bag(paths[1], [b"a new shard"])
    remote.proxy.reset_counts()
    with pytest.raises(OSError) as caught:
        _open_core(paths, sackli.Reader.Options(), listed)
    assert caught.value.errno == errno.ESTALE
    assert paths[1] in str(caught.value)
    # No shard is asked for its version: the listing gave them. The GCS
    # emulators serve a replaced object's bytes despite ifGenerationMatch,
    # so there the answer's other generation costs one metadata request
    # (GcsStore._check_unchanged), for the replaced shard only.
    assert remote.proxy.counts["HEAD"] == (1 if remote.scheme == "gs" else 0)
    # Opened again (listed again), it is the new set.
    assert sackli.Reader(remote.url("loose@*.bag"))[1] == b"a new shard"


@pytest.mark.parametrize("kind", ["count", "star", "list"])
def test_a_shard_replaced_behind_the_set_is_an_error(remote, kind):
    records = make_records(SHARDS * 2, seed=7)
    _write_set(remote, records)
    write_bag(remote.url(NAMES[3]), [b"not of this set"])
    with pytest.raises(sackli.CorruptionError, match="mixes objects of different writes") as caught:
        sackli.Reader(_specs(remote)[kind])
    assert remote.url(NAMES[3]) in str(caught.value)


def test_separate_limits_objects_still_get_their_own_request(remote):
    """Limits objects carry the version of their records in their metadata,
    which S3 listings do not give: each is asked for (the GET of its tail,
    whose answer carries the metadata), also when a listing found its
    records."""
    records = make_records(SHARDS * 3, seed=8)
    with sackli.ShardedWriter(remote.url(f"{BASE}@{SHARDS}.bag"),
                              limits_placement=sackli.LimitsPlacement.SEPARATE) as writer:
        writer.write_many(records)
    remote.proxy.latency = LATENCY
    remote.proxy.reset_counts()
    reader = sackli.Reader(remote.url(f"{BASE}@*.bag"),
                           limits_placement=sackli.LimitsPlacement.SEPARATE)
    assert dict(remote.proxy.counts) == {"LIST": 1, "GET": SHARDS + 1}
    assert remote.proxy.max_in_flight >= 8
    remote.proxy.latency = 0.0
    assert reader.read() == records


def test_beam_sizes_the_objects_of_a_comma_list_concurrently(servers):
    """Beam's file systems size the paths of one match call one after
    another; the source asks for each object's size concurrently
    (`remote_parallelism` at once). Beam's GCS file system makes 4 metadata
    requests a path (existence, then metadata: each gets the bucket and
    the object). GCS only: Beam's S3 file system takes its endpoint from
    pipeline options, which a pipeline gives it (tests/beam/test_beam_s3.py)."""
    from sackli.beam._files import estimate_pattern_size

    remote = Remote("gs", servers, "beam-sizes/")
    remote.proxy.reset_faults()

    _write_set(remote, make_records(SHARDS * 4, seed=9))
    sizes = remote.objects()
    remote.proxy.latency = LATENCY
    remote.proxy.reset_counts()
    total = estimate_pattern_size(_specs(remote)["list"], sackli.Reader.Options())
    assert total == sum(sizes[name] for name in NAMES)
    assert remote.proxy.max_in_flight >= 8, remote.proxy.log
    assert sum(remote.proxy.counts.values()) <= 4 * SHARDS, remote.proxy.log
    # One path at a time (Beam's client overlaps a path's own requests a little).
    remote.proxy.reset_counts()
    estimate_pattern_size(_specs(remote)["list"], sackli.Reader.Options(remote_parallelism=1))
    assert remote.proxy.max_in_flight < 8, remote.proxy.log
    remote.proxy.reset_faults()
