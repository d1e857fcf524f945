"""sackli.datasets' cap on one stored field value (issue 49 §3): the readers'
max_record_bytes reaches every field file and refs.bag."""

from __future__ import annotations

import pytest

import sackli
from sackli import datasets

SPEC = {"label": "int(4)", "blob": "bytes"}


def _write(directory, compression=None) -> None:
    with datasets.DatasetWriter(directory, SPEC, compression=compression) as writer:
        writer.append({"label": 1, "blob": b"small"})
        writer.append({"label": 2, "blob": bytes(4096)})


@pytest.mark.parametrize("compression", [None, {"blob": "zstd"}])
def test_a_field_value_over_the_cap_raises_naming_its_file(tmp_path, compression):
    _write(tmp_path / "ds", compression)
    reader = datasets.DatasetReader(tmp_path / "ds", max_record_bytes=1000)
    assert reader[0] == {"label": 1, "blob": b"small"}
    suffix = "bagz" if compression else "bag"
    pattern = rf"blob\.{suffix}: record 2 .*decodes to 4096 bytes \(max_record_bytes=1000\)"
    for read in (lambda: reader[1], lambda: reader.read_indices([0, 1]), lambda: list(reader)):
        with pytest.raises(sackli.RecordTooLargeError, match=pattern):
            read()
    assert datasets.DatasetReader(tmp_path / "ds", max_record_bytes=None)[1]["blob"] == bytes(4096)


def test_sharded_and_bag_readers_take_the_cap(tmp_path):
    with datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_size=None, shard_length=2) as writer:
        for i in range(4):
            writer.append({"label": i, "blob": bytes(100 * i)})
    sharded = datasets.ShardedDatasetReader(tmp_path / "ds", max_record_bytes=150)
    assert sharded[1]["blob"] == bytes(100)
    with pytest.raises(sackli.RecordTooLargeError, match="max_record_bytes=150"):
        sharded.read_indices(range(4))
    bag = datasets.BagReader(sorted((tmp_path / "ds").glob("*/blob.bag"))[-1], max_record_bytes=0)
    with pytest.raises(sackli.RecordTooLargeError, match=r"decodes to \d+ bytes"):
        bag[len(bag) - 1]
