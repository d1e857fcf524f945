"""`DatasetWriter(record_checksums=True)`: every raw bag of the shard gets
a CRC-32C sidecar (a sackli extension the real `bags` ignores), and
sackli.datasets' readers raise CorruptionError for a damaged value."""

from __future__ import annotations

import bags
import numpy as np
import pytest

import sackli
from sackli import datasets

_SPEC = {"label": "int(8)", "words": "utf8[]", "pixels": "array(uint8,4,4)"}


def _points(n: int) -> list[dict]:
    return [{"label": i, "words": ["w%d" % i] * (i % 3 + 1),
             "pixels": np.full((4, 4), i, np.uint8)} for i in range(n)]


def test_a_checked_dataset_reads_in_bags_and_refuses_a_flip_in_sackli(tmp_path) -> None:
    points = _points(20)
    folder = tmp_path / "ds"
    with datasets.DatasetWriter(folder, _SPEC, record_checksums=True) as writer:
        for point in points:
            writer.append(point)
    bag_files = sorted(p.name for p in folder.iterdir() if p.suffix == ".bag")
    assert bag_files and all((folder / (name + ".crc32c")).exists() for name in bag_files)
    with bags.DatasetReader(folder, bags.decoders) as theirs:  # the sidecars are ignored
        assert [theirs[i]["label"] for i in range(20)] == list(range(20))
    with datasets.DatasetReader(folder) as ours:
        assert [ours[i]["label"] for i in range(20)] == list(range(20))
    pixels = folder / next(n for n in bag_files if n.startswith("pixels"))
    data = bytearray(pixels.read_bytes())
    data[len(data) // 2] ^= 0x01
    pixels.write_bytes(bytes(data))
    with datasets.DatasetReader(folder) as ours:
        with pytest.raises(sackli.CorruptionError, match=r"pixels.*is corrupt.*crc32c"):
            [ours[i] for i in range(20)]
