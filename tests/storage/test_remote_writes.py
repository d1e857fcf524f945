"""Remote writes (sackli/_storage/_staged.py): spooled locally, uploaded whole
at close, nothing left by a failed write."""

from __future__ import annotations

import pytest

import sackli
from remote_helpers import (  # loaded through conftest.py
    BUCKET, TAIL, SEPARATE, servers, remote, write_bag,
)


# --- 2. Writer life cycle -----------------------------------------------------------


def test_flush_uploads_nothing_until_close(remote):
    url = remote.url("f.bag")
    writer = sackli.Writer(url)
    writer.write_many([b"one", b"two"])
    writer.flush()
    writer.write(b"three")
    writer.flush()
    assert remote.objects() == {}
    assert remote.proxy.counts["PUT"] + remote.proxy.counts["POST"] == 0
    writer.close()
    assert set(remote.objects()) == {"f.bag"}
    writer.close()  # closing twice is fine, and uploads nothing more
    uploads = remote.proxy.counts["PUT"] + remote.proxy.counts["POST"]
    writer.close()
    assert remote.proxy.counts["PUT"] + remote.proxy.counts["POST"] == uploads
    assert writer.closed
    assert sackli.Reader(url).read() == [b"one", b"two", b"three"]


@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_with_block_that_raises_leaves_no_object(remote, placement):
    url = remote.url("failed.bagz")
    with pytest.raises(RuntimeError, match="boom"):
        with sackli.Writer(url, limits_placement=placement) as writer:
            writer.write_many([b"a"] * 100)
            writer.flush()
            raise RuntimeError("boom")
    assert writer.closed
    writer.close()
    assert remote.objects() == {}
    assert remote.proxy.counts["PUT"] + remote.proxy.counts["POST"] == 0


def test_overwriting_an_object_replaces_it_whole(remote):
    url = remote.url("over.bag")
    write_bag(url, [b"old"] * 10)
    write_bag(url, [b"new", b"er"])
    assert sackli.Reader(url).read() == [b"new", b"er"]


def test_writer_for_a_bucket_without_object_name_raises(remote):
    with pytest.raises(IsADirectoryError):
        sackli.Writer(f"{remote.scheme}://{BUCKET}/{remote.folder}")
