"""`WriteToSackli` with `record_checksums=True`: each raw shard reaches its
final name with its CRC-32C sidecar; a rewrite without the option leaves no
stale sidecar; `ReadFromSackli` refuses a damaged record. Real pipelines on
the DirectRunner (in-process and multi-processing)."""

from __future__ import annotations

import pytest

import sackli
from sackli.beam import ReadFromSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, assert_reads, listing, make_pipeline, make_records, run_write,
)
import apache_beam as beam

CHECKED = sackli.Writer.Options(record_checksums=True)


@pytest.mark.parametrize("runner", ["direct", "multi_processing"])
def test_shards_arrive_with_their_sidecars(tmp_path, runner) -> None:
    records = make_records(60, seed=9)
    run_write(records, tmp_path / "out@3.bag", runner=runner, options=CHECKED)
    shards = [f"out-0000{i}-of-00003.bag" for i in range(3)]
    assert listing(tmp_path) == sorted(shards + [s + ".crc32c" for s in shards])
    assert_reads(ReadFromSackli(str(tmp_path / "out@3.bag")), records)
    with sackli.Reader(str(tmp_path / "out@3.bag")) as reader:
        assert sorted(reader.read()) == sorted(records)


def test_a_rewrite_without_checks_leaves_no_sidecar(tmp_path) -> None:
    run_write(make_records(20, seed=1), tmp_path / "out@2.bag", options=CHECKED)
    records = make_records(30, seed=2)
    run_write(records, tmp_path / "out@2.bag")
    assert not [n for n in listing(tmp_path) if n.endswith(".crc32c")]
    run_write(records, tmp_path / "other@3.bag", options=CHECKED)
    run_write(records, tmp_path / "other@2.bag", overwrite=True)  # replaces the @3 set
    assert [n for n in listing(tmp_path) if n.startswith("other")] == [
        "other-00000-of-00002.bag", "other-00001-of-00002.bag"]


def test_the_beam_read_refuses_a_damaged_record(tmp_path) -> None:
    records = [b"record %03d" % i * 4 for i in range(40)]
    run_write(records, tmp_path / "one.bag@0", options=CHECKED)
    path = tmp_path / "one.bag"
    data = bytearray(path.read_bytes())
    data[100] ^= 0x02
    path.write_bytes(bytes(data))
    with pytest.raises(Exception, match="is corrupt: its bytes do not match its CRC-32C"):
        with make_pipeline("direct") as p:
            _ = p | ReadFromSackli(str(path)) | beam.Map(len)
