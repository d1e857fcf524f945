"""Remote bags: reading and writing `s3://` and `gs://` objects against real
servers (sackli/_storage), end to end: round trips, skipping damaged records,
missing SDKs. The servers, proxies and helpers are in tests/remote_helpers.py."""

from __future__ import annotations

import base64
import json
import pathlib
import pickle
import random
import re
import struct

import numpy as np
import pytest

import sackli
from remote_helpers import (  # loaded through conftest.py
    BUCKET, TAIL, SEPARATE, INTERLEAVED, servers, remote, write_bag, make_records,
)


# --- The test proxy ------------------------------------------------------------


def test_proxy_forwards_chunked_uploads_on_a_kept_alive_connection(servers):
    """The test proxy itself: two requests on one connection, the first with
    a chunked body (what a streaming upload sends)."""
    import http.client

    proxy = servers.proxies["gs"]
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        target = f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=proxy/chunked.txt"
        connection.request("POST", target, body=iter([b"hello ", b"chunked ", b"world"]),
                           headers={"Content-Type": "text/plain"}, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
        connection.request("GET", f"/storage/v1/b/{BUCKET}/o/proxy%2Fchunked.txt?alt=media")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"hello chunked world")
    finally:
        connection.close()
    assert servers.raw["gs"].get(BUCKET, "proxy/chunked.txt") == b"hello chunked world"


# --- 1. Round trips ---------------------------------------------------------------


@pytest.mark.parametrize("extension", ["bag", "bagz"])
@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_round_trip_single_file(remote, extension, placement):
    records = make_records(40) + [b"", b"last"]
    url = remote.url(f"x.{extension}")
    write_bag(url, records, limits_placement=placement)

    # Exactly the bag (and, for SEPARATE, its limits file) was uploaded.
    expected = {f"x.{extension}"} | ({f"limits.x.{extension}"} if placement == SEPARATE else set())
    assert set(remote.objects()) == expected
    if placement == SEPARATE:
        assert remote.objects()[f"limits.x.{extension}"] == 8 * len(records)

    with sackli.Reader(url, limits_placement=placement) as reader:
        assert len(reader) == len(records)
        assert reader.read() == records
        assert list(reader) == records
        assert reader[0] == records[0] and reader[-1] == b"last" and reader[5] == b""
        assert reader.read_range(3, 10) == records[3:13]
        assert reader[2:30:3].read() == records[2:30:3]
        assert list(reader[::-1]) == records[::-1]
        indices = [7, 0, 41, 7, -1, 5]
        assert reader.read_indices(indices) == [records[i] for i in indices]
        for dtype in (np.int32, np.int64, np.uint16):
            array = np.array([40, 1, 1, 22], dtype=dtype)
            assert reader.read_indices(array) == [records[i] for i in array.tolist()]
        assert list(reader.read_indices_iter(iter([3, 2, 1]))) == records[3:0:-1]
        assert reader.paths == (url,)


def test_round_trip_sharded_concatenated(remote):
    # Shards of different sizes (one empty), written one by one.
    sizes = [5, 0, 9]
    records = make_records(sum(sizes), seed=1)
    start = 0
    for s, size in enumerate(sizes):
        write_bag(remote.url(f"set-{s:05d}-of-00003.bagz"), records[start:start + size])
        start += size
    assert set(remote.objects()) == {f"set-{s:05d}-of-00003.bagz" for s in range(3)}

    for spec in ("set@3.bagz", "set@*.bagz"):
        reader = sackli.Reader(remote.url(spec))
        assert reader.paths == tuple(remote.url(f"set-{s:05d}-of-00003.bagz") for s in range(3))
        assert reader.shard_sizes == sizes
        assert reader.read() == records
        assert reader.read_indices([13, 0, 5, 4]) == [records[i] for i in (13, 0, 5, 4)]


def test_round_trip_sharded_interleaved(remote):
    shards = 3
    records = make_records(11, seed=2)
    # Record g goes to shard g % S, as INTERLEAVED reads them.
    for s in range(shards):
        write_bag(remote.url(f"il-{s:05d}-of-00003.bag"), records[s::shards])
    for spec in ("il@3.bag", "il@*.bag"):
        reader = sackli.Reader(remote.url(spec), sharding_layout=INTERLEAVED)
        assert reader.read() == records
        assert list(reader) == records
        assert reader.read_indices([10, 1, 2, 0]) == [records[i] for i in (10, 1, 2, 0)]
        assert reader[1::4].read() == records[1::4]


def test_star_spec_with_two_shard_counts_is_ambiguous(remote):
    for count in (2, 3):
        for s in range(count):
            write_bag(remote.url(f"amb-{s:05d}-of-{count:05d}.bag"), [b"r"])
    with pytest.raises(ValueError, match="ambiguous") as caught:
        sackli.Reader(remote.url("amb@*.bag"))
    assert "2, 3" in str(caught.value)
    # With the count named there is no ambiguity.
    assert len(sackli.Reader(remote.url("amb@2.bag"))) == 2


def test_missing_shard_raises_file_not_found_naming_it(remote):
    for s in (0, 2):
        write_bag(remote.url(f"gap-{s:05d}-of-00003.bag"), [b"r"])
    missing = remote.url("gap-00001-of-00003.bag")
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url("gap@*.bag"))
    assert "shard 1 of 3 is missing" in str(caught.value)
    assert caught.value.filename == missing
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        sackli.Reader(remote.url("gap@3.bag"))
    with pytest.raises(FileNotFoundError, match="no shards match"):
        sackli.Reader(remote.url("nothing@*.bag"))


def test_comma_list_mixes_local_and_remote_entries(remote, tmp_path):
    local_records, sharded, plain = make_records(4, 3), make_records(6, 4), make_records(3, 5)
    local = tmp_path / "local.bag"
    write_bag(str(local), local_records)
    write_bag(remote.url("part-00000-of-00002.bagz"), sharded[:2])
    write_bag(remote.url("part-00001-of-00002.bagz"), sharded[2:])
    write_bag(remote.url("plain.bag"), plain)
    spec = f"{local},{remote.url('part@*.bagz')},posix:{local},{remote.url('plain.bag')}"
    reader = sackli.Reader(spec)
    expected = local_records + sharded + local_records + plain
    assert reader.read() == expected
    assert reader.read_indices([0, 5, 12, 16]) == [expected[i] for i in (0, 5, 12, 16)]
    assert reader.shard_sizes == [4, 2, 4, 4, 3]


@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_empty_bag_is_a_zero_byte_object(remote, placement):
    url = remote.url("empty.bagz")
    write_bag(url, [], limits_placement=placement)
    expected = {"empty.bagz": 0} | ({"limits.empty.bagz": 0} if placement == SEPARATE else {})
    assert remote.objects() == expected
    reader = sackli.Reader(url, limits_placement=placement)
    assert len(reader) == 0 and reader.read() == [] and list(reader) == []
    # An empty shard in a set.
    write_bag(remote.url("e-00000-of-00002.bag"), [], limits_placement=placement)
    write_bag(remote.url("e-00001-of-00002.bag"), [b"", b"x", b""], limits_placement=placement)
    assert sackli.Reader(remote.url("e@*.bag"), limits_placement=placement).read() == [b"", b"x", b""]


def test_bag_of_empty_records(remote):
    url = remote.url("blank.bag")
    write_bag(url, [b""] * 50)
    # TAIL: no record bytes, 50 limits and nothing else.
    assert remote.objects() == {"blank.bag": 8 * 50}
    reader = sackli.Reader(url)
    assert reader.read() == [b""] * 50
    assert reader.read_indices([49, 0]) == [b"", b""]


def test_48_mib_record_uses_multipart_upload(remote):
    big = random.Random(6).randbytes(48 << 20)
    records = [b"before", big, b"after"]
    url = remote.url("big.bag")
    write_bag(url, records)
    log = list(remote.proxy.log)
    # The >8 MiB object went up in parts (S3 multipart) or in a resumable
    # session (GCS), not as one simple request.
    if remote.scheme == "s3":
        assert any(target.endswith("?uploads") for method, target, _ in log if method == "POST")
        parts = [t for m, t, _ in log if m == "PUT" and "partNumber=" in t]
        assert len(parts) >= 6
    else:
        assert any("uploadType=resumable" in target for method, target, _ in log if method == "POST")
    assert remote.objects()["big.bag"] == len(b"".join(records)) + 8 * len(records)

    reader = sackli.Reader(url)
    assert reader[0] == b"before" and reader[2] == b"after"
    assert reader[1] == big
    assert reader.read_indices([2, 1, 0]) == records[::-1]


def test_remote_reader_is_an_arrow_stream(remote):
    """pyarrow and DuckDB read a remote Reader through the engine's Arrow
    stream: the pool threads that fetch through Python are not blocked by a
    consumer waiting with the GIL held."""
    import duckdb
    import pyarrow as pa

    records = make_records(500, seed=4)
    for shard in range(3):
        write_bag(remote.url(f"stream-0000{shard}-of-00003.bagz"), records[shard::3])
    reader = sackli.Reader(remote.url("stream@3.bagz"), sharding_layout=sackli.ShardingLayout.INTERLEAVED)
    assert pa.table(reader).column("record").to_pylist() == records
    assert pa.table(reader[::-7]).column("record").to_pylist() == records[::-7]
    [(count, total)] = duckdb.sql("select count(*), sum(octet_length(record)) from reader").fetchall()
    assert (count, total) == (len(records), sum(map(len, records)))


def test_index_and_multi_index(remote):
    records = [b"a", b"b", b"a", b"", b"c", b"b", b"a"]
    url = remote.url("idx.bagz")
    write_bag(url, records)
    reader = sackli.Reader(url)
    index = sackli.Index(reader)
    assert len(index) == 4
    assert index[b"a"] == 0 and index[b"b"] == 1 and index[b""] == 3 and index["c"] == 4
    assert b"zzz" not in index and index.get(b"zzz", -1) == -1
    with pytest.raises(KeyError):
        index[b"zzz"]
    multi = sackli.MultiIndex(reader)
    assert multi[b"a"] == [0, 2, 6] and multi[b"b"] == [1, 5] and multi.get(b"q") is None
    assert reader.index(b"c") == 4 and reader.count(b"a") == 3 and b"b" in reader


def test_pickled_reader_reconnects_in_a_new_process(remote, run_python):
    records = make_records(30, seed=7)
    write_bag(remote.url("p-00000-of-00002.bagz"), records[:12])
    write_bag(remote.url("p-00001-of-00002.bagz"), records[12:])
    view = sackli.Reader(remote.url("p@*.bagz"))[3::2]
    payload = base64.b64encode(pickle.dumps(view)).decode()
    # A fresh interpreter has no client: the copy makes its own, from the
    # same environment (the proxy's endpoint), and reopens the shards.
    result = run_python(f"""
        import base64, json, pickle
        reader = pickle.loads(base64.b64decode({payload!r}))
        print(json.dumps({{"len": len(reader), "paths": list(reader.paths),
                           "records": [r.hex() for r in reader.read()],
                           "picked": [r.hex() for r in reader.read_indices([0, -1])]}}))
    """)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["len"] == len(records[3::2])
    assert outcome["paths"] == [remote.url("p-00000-of-00002.bagz"), remote.url("p-00001-of-00002.bagz")]
    assert [bytes.fromhex(h) for h in outcome["records"]] == records[3::2]
    assert [bytes.fromhex(h) for h in outcome["picked"]] == [records[3], records[3::2][-1]]


def test_object_names_with_unusual_characters(remote):
    names = ["sp ace/ünï cödé.bag", "plus+sign.bagz", "pct%20x.bag", "hash#q?.bag",
             "a:b=c&d.bag", "user@host.bag", "tilde~'quote.bag"]
    for n, name in enumerate(names):
        write_bag(remote.url(name), [name.encode(), b"", bytes([n])])
    assert set(remote.objects()) == set(names)
    for n, name in enumerate(names):
        assert sackli.Reader(remote.url(name)).read() == [name.encode(), b"", bytes([n])]
    write_bag(remote.url("sp ace/s+t-00000-of-00001.bag"), [b"shard"])
    assert sackli.Reader(remote.url("sp ace/s+t@*.bag")).read() == [b"shard"]


def test_pathlib_and_leading_slash_spellings(remote):
    records = make_records(5, seed=8)
    # pathlib squashes "//": Path("/s3://b") / "x" is "/s3:/b/x".
    path = pathlib.Path(f"/{remote.scheme}://{BUCKET}") / remote.folder / "pl.bagz"
    assert str(path).startswith(f"/{remote.scheme}:/{BUCKET}/")
    writer = sackli.Writer(path)
    assert writer.path == remote.url("pl.bagz")
    with writer:
        writer.write_many(records)
    assert set(remote.objects()) == {"pl.bagz"}
    assert sackli.Reader(path).read() == records
    assert sackli.Reader(f"/{remote.url('pl.bagz')}").read() == records
    assert sackli.Reader(pathlib.Path(f"/{remote.scheme}://{BUCKET}") / remote.folder / "pl.bagz").paths == (
        remote.url("pl.bagz"),)


# --- Skipping damaged records ----------------------------------------------------------


def test_skip_corrupt_on_a_remote_bag(remote, tmp_path):
    """The library's skipping scans work on remote bags as on local ones:
    records whose zstd frame is damaged are left out and reported."""
    records = [b"remote %03d " % i * 3 for i in range(150)]
    local = tmp_path / "x.bagz"
    write_bag(str(local), records)
    data = bytearray(local.read_bytes())
    start = struct.unpack("<Q", data[-8:])[0]
    limits = struct.unpack(f"<{len(records)}Q", data[start:start + 8 * len(records)])
    bad = [0, 70, 71, 149]
    for index in bad:
        begin = limits[index - 1] if index else 0
        data[begin:begin + 4] = b"BAD!"
    remote.put("x.bagz", bytes(data))
    reader = sackli.Reader(remote.url("x.bagz"))
    good = [record for i, record in enumerate(records) if i not in bad]
    with pytest.raises(sackli.CorruptionError, match=r"x\.bagz: record 0 is corrupt"):
        reader.read()
    skipped = sackli.SkippedRecords()
    assert reader.read(skip_corrupt=skipped) == good
    assert skipped.indices == bad
    assert all(remote.url("x.bagz") in str(error) for _, error in skipped)
    skipped = sackli.SkippedRecords()
    assert list(reader.read_range_iter(0, len(reader), skip_corrupt=skipped)) == good
    assert skipped.indices == bad


# --- Missing extras -------------------------------------------------------------------


@pytest.mark.parametrize("scheme,blocked,extra", [
    ("s3", "boto3", "sackli-bagz[s3]"),
    ("gs", "google.cloud.storage", "sackli-bagz[gcs]"),
])
def test_missing_sdk_names_the_extra(run_python, scheme, blocked, extra):
    """Without the SDK, opening a remote bag raises an ImportError that says
    which extra to install (the SDK is hidden from a fresh interpreter)."""
    result = run_python(f"""
        import sys
        sys.modules[{blocked!r}] = None  # import of it now raises ImportError
        import sackli
        report(lambda: sackli.Reader("{scheme}://bucket/x.bagz"))
    """)
    outcome = result.outcome()
    assert "ImportError" in outcome["mro"], outcome
    assert extra in outcome["message"]
