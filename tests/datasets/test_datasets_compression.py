"""Per-field compression, a sackli.datasets extension: `<field>.bagz` files
recorded in spec.json, read back by sackli; without it files stay bags'."""

from __future__ import annotations

import json

import bags
import pytest

import sackli
from sackli import datasets

SPEC = {"caption": "utf8", "label": "int(8)", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"caption": "a long caption " * 20 + str(i), "label": i, "words": ["word"] * (i % 4)}


@pytest.mark.parametrize("setting", ["zstd", "zstd(19)", "zstd(-5)"])
def test_compressed_fields_roundtrip(tmp_path, setting):
    compression = {"caption": setting, "words": "zstd"}
    with datasets.DatasetWriter(tmp_path / "ds", SPEC, compression=compression) as writer:
        for i in range(8):
            writer.append(_point(i))
        size = writer.size
    files = {p.name for p in (tmp_path / "ds").iterdir()}
    assert files == {"spec.json", "refs.bag", "caption.bagz", "label.bag", "words.bagz"}
    assert json.loads((tmp_path / "ds" / "spec.json").read_bytes()) == {
        **SPEC, "sackli/compression": compression}
    with datasets.DatasetReader(tmp_path / "ds") as reader:
        assert reader.size == size == sum(
            p.stat().st_size for p in (tmp_path / "ds").iterdir() if p.suffix != ".json")
        assert list(reader) == [_point(i) for i in range(8)]
        assert reader[3, {"words": range(1, 2)}] == {"words": ["word"]}
    # The values are zstd frames: smaller than the raw captions.
    assert (tmp_path / "ds" / "caption.bagz").stat().st_size < 8 * len(_point(0)["caption"]) / 4
    raw = sackli.Reader(str(tmp_path / "ds" / "caption.bagz"), compression=sackli.CompressionNone())
    assert raw[1][:4] == b"\x28\xb5\x2f\xfd"  # zstd's magic number


def test_sharded_writer_passes_compression(tmp_path):
    with datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_length=3,
                                       compression={"caption": "zstd"}) as writer:
        for i in range(7):
            writer.append(_point(i))
    for shard in ("000000", "000001", "000002"):
        assert (tmp_path / "ds" / shard / "caption.bagz").exists()
    assert list(datasets.ShardedDatasetReader(tmp_path / "ds")) == [_point(i) for i in range(7)]


def test_default_stays_bags_compatible(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", SPEC, compression={}) as writer:
        writer.append(_point(1))
    assert json.loads((tmp_path / "ds" / "spec.json").read_bytes()) == SPEC
    assert bags.DatasetReader(tmp_path / "ds", bags.decoders)[0] == _point(1)


def test_bags_cannot_mistake_a_compressed_dataset(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", SPEC, compression={"caption": "zstd"}) as w:
        w.append(_point(1))
    with pytest.raises(Exception):
        bags.DatasetReader(tmp_path / "ds", bags.decoders)


@pytest.mark.parametrize("compression, error, message", [
    ({"colour": "zstd"}, ValueError, "'colour'"),
    ({"caption": "gzip"}, ValueError, "'caption'.*'gzip'"),
    ({"caption": "zstd(99)"}, ValueError, "field .caption.: zstd level 99"),
    ({"caption": 3}, ValueError, "'caption'"),
    (["caption"], TypeError, "dict"),
])
def test_bad_compression(tmp_path, compression, error, message):
    with pytest.raises(error, match=message):
        datasets.DatasetWriter(tmp_path / "ds", SPEC, compression=compression)
    assert list(tmp_path.iterdir()) == []


def test_bad_compression_record_in_spec_json(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", SPEC, compression={"caption": "zstd"}) as w:
        w.append(_point(1))
    spec = json.loads((tmp_path / "ds" / "spec.json").read_bytes())
    spec["sackli/compression"] = {"nope": "zstd"}
    (tmp_path / "ds" / "spec.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r"spec\.json: not a valid dataset spec.*'nope'"):
        datasets.DatasetReader(tmp_path / "ds")
