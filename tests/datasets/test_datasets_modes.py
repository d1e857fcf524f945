"""Dataset and shard folders get the modes `bags` gives them (it creates
folders as `os.makedirs` does: 0777 less the umask, files 0666 less the
umask), so that other users can read a shared dataset under the usual umask
022 (issue 30, item 6)."""

from __future__ import annotations

import os
import stat

import bags

from sackli import datasets

SPEC = {"label": "int(8)", "words": "utf8[]"}
POINTS = [{"label": k, "words": ["a", "b"][:k % 3]} for k in range(5)]


def _modes(folder) -> dict[str, int]:
    """The mode of `folder` ("") and of everything under it, by relative path."""
    modes = {"": stat.S_IMODE(os.stat(folder).st_mode)}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = os.path.join(root, name)
            modes[os.path.relpath(path, folder)] = stat.S_IMODE(os.stat(path).st_mode)
    return modes


def test_a_shard_folder_has_bags_modes(tmp_path, umask):
    with bags.DatasetWriter(tmp_path / "theirs" / "a", SPEC, bags.encoders) as writer:
        for point in POINTS:
            writer.append(point)
    with datasets.DatasetWriter(tmp_path / "ours" / "a", SPEC) as writer:
        for point in POINTS:
            writer.append(point)
    assert _modes(tmp_path / "ours") == _modes(tmp_path / "theirs")
    assert _modes(tmp_path / "ours" / "a")[""] == 0o777 & ~umask
    assert _modes(tmp_path / "ours" / "a")["refs.bag"] == 0o666 & ~umask


def test_an_empty_shard_folder_has_the_modes_of_os_makedirs(tmp_path, umask):
    datasets.DatasetWriter(tmp_path / "new" / "parents" / "shard", SPEC).close()
    os.makedirs(tmp_path / "reference" / "parents" / "shard")
    assert _modes(tmp_path / "new")[os.path.join("parents", "shard")] == _modes(
        tmp_path / "reference")[os.path.join("parents", "shard")]
    assert _modes(tmp_path / "new" / "parents" / "shard")[""] == 0o777 & ~umask


def test_a_sharded_dataset_has_bags_modes(tmp_path, umask):
    with bags.ShardedDatasetWriter(tmp_path / "theirs", SPEC, bags.encoders,
                                   shard_length=2) as writer:
        for point in POINTS:
            writer.append(point)
    with datasets.ShardedDatasetWriter(tmp_path / "ours", SPEC, shard_length=2) as writer:
        for point in POINTS:
            writer.append(point)
    ours, theirs = _modes(tmp_path / "ours"), _modes(tmp_path / "theirs")
    assert sorted(ours) == sorted(theirs)  # the same shards and files
    assert ours == theirs
    assert ours["000000"] == 0o777 & ~umask
