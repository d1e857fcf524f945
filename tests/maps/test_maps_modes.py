"""Map files get the permissions of any file the process creates (0666 less
the umask), as mapbuffer users' ``open(path, "wb")`` gives them: readable by
others under the usual umask 022 (issue 30, item 6)."""

from __future__ import annotations

import os
import stat

import pytest

import sackli.maps
from sackli.maps import MapBuffer


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _as_open_creates(tmp_path) -> int:
    """The mode `open(path, "wb")` gives a new file under the current umask."""
    reference = tmp_path / "reference"
    with open(reference, "wb"):
        pass
    return _mode(reference)


@pytest.mark.parametrize("compress", [None, "zstd"])
def test_write_gives_a_map_file_the_umasks_mode(tmp_path, umask, compress):
    path = tmp_path / "m.mb"
    sackli.maps.write(path, [(1, b"a"), (2, b"b")], compress=compress)
    assert _mode(path) == 0o666 & ~umask == _as_open_creates(tmp_path)
    assert MapBuffer(str(path))[2] == b"b"
    # No temporary file is left beside it.
    assert sorted(os.listdir(tmp_path)) == ["m.mb", "reference"]


def test_an_index_cache_gets_the_umasks_mode(tmp_path, umask):
    source = tmp_path / "m.mb"
    source.write_bytes(bytes(MapBuffer({1: b"a"}).tobytes()))
    cache = tmp_path / "m.index"
    assert MapBuffer(source.read_bytes(), index_cache=str(cache))[1] == b"a"
    assert _mode(cache) == 0o666 & ~umask == _as_open_creates(tmp_path)
