"""sackli._format (format facts from the engine) and sackli._batching (batch
sizes from a byte budget): the one home of each fact."""

from __future__ import annotations

import pathlib
import re
import struct

import pytest

import sackli
from sackli import _batching, _format

PACKAGE = pathlib.Path(_format.__file__).resolve().parent  # the sources, not links to them


def test_limit_bytes_is_what_a_record_costs(tmp_path):
    path = tmp_path / "x.bag"
    with sackli.Writer(path) as writer:
        writer.write_many([b"ab", b"cde"])
    assert _format.LIMIT_BYTES == 8
    assert path.stat().st_size == _format.stored_bytes(5, 2)
    assert struct.unpack("<QQ", path.read_bytes()[-16:]) == (2, 5)


def test_limits_path_for_local_paths_and_urls():
    assert _format.LIMITS_PREFIX == "limits."
    assert _format.limits_path_for("/d/x.bagz") == "/d/limits.x.bagz"
    assert _format.limits_path_for("x.bag") == "limits.x.bag"
    assert _format.limits_path_for("gs://b/k/x.bag") == "gs://b/k/limits.x.bag"


def test_separate_placement_writes_the_limits_where_limits_path_for_says(tmp_path):
    path = tmp_path / "sep.bagz"
    with sackli.Writer(path, limits_placement=sackli.LimitsPlacement.SEPARATE) as writer:
        writer.write(b"r")
    assert pathlib.Path(_format.limits_path_for(str(path))).stat().st_size == _format.LIMIT_BYTES


@pytest.mark.parametrize("path, compressed", [
    ("x.bagz", True), ("/d/x.bag", False), ("x.bagz.bag", False), ("bagz", False),
    ("s3://b/k.bagz", True),
])
def test_has_zstd_suffix(path, compressed):
    assert _format.has_zstd_suffix(path) is compressed


def test_local_prefixes():
    assert _format.without_local_prefix("posix:/a/b") == "/a/b"
    assert _format.without_local_prefix("/posix:/a/b") == "/a/b"
    plain = "/a/posix:b"
    assert _format.without_local_prefix(plain) is plain


def test_max_shards_bounds_shard_specs():
    from sackli._shard_spec import split_shard_entry

    assert split_shard_entry(f"x@{_format.MAX_SHARDS}.bag") is not None
    assert split_shard_entry(f"x@{_format.MAX_SHARDS + 1}.bag") is None


def test_partial_marker_and_prefix():
    assert _format.partial_folder_prefix("/d/x.bag") == "/d/.x.bag" + _format.PARTIAL_MARKER


@pytest.mark.parametrize("budget, per_record, most, expected", [
    (1000, 10.0, 65536, 100),
    (1000, 0.0, 65536, 1000),   # empty records count as one byte
    (1000, 5000.0, 65536, 1),   # a record larger than the budget: one per batch
    (10**9, 1.0, 4096, 4096),   # clamped to the most records
])
def test_records_per_batch(budget, per_record, most, expected):
    assert _batching.records_per_batch(budget, per_record, most) == expected


def test_batched_bounds_count_and_bytes():
    records = [b"x" * n for n in (1, 2, 3, 4, 5, 6)]
    assert [len(b) for b in _batching.batched(records, 4, 100)] == [4, 2]
    assert [len(b) for b in _batching.batched(records, 10, 6)] == [3, 2, 1]
    assert list(_batching.batched([], 4, 100)) == []


# The facts that used to be spelt out in several modules; each now lives in
# _format (or _batching) only.
_SPELT_OUT = {
    r'"limits\."': "the limits-file name",
    r'endswith\("\.bagz"\)': "'.bagz means zstd'",
    r"99999": "the shard-count maximum",
    r'[(,]\s*"/?posix:"': "the local prefix",
    r"approximate_bytes_per_record\(\), 1\.0\)": "batch sizes from a byte budget",
}


@pytest.mark.parametrize("pattern", list(_SPELT_OUT))
def test_format_facts_live_in_one_module(pattern):
    homes = {"_format.py", "_batching.py"}
    found = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
             if path.name not in homes and re.search(pattern, path.read_text())]
    assert found == [], f"{_SPELT_OUT[pattern]} spelt out again in {found}"


def test_gatherer_hands_on_full_batches_in_order():
    batches = []
    gathered = _batching.Gatherer(batches.append, max_records=3, max_bytes=5)
    for record in [b"a", b"b", b"c", b"d", b"eeeeee", b"f"]:
        gathered.add(record)
    assert batches == [[b"a", b"b", b"c"], [b"d", b"eeeeee"]]
    assert gathered
    gathered.flush()
    gathered.flush()  # nothing left: no empty batch
    assert batches[-1] == [b"f"] and len(batches) == 3 and not gathered
