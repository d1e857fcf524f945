"""`sackli.beam.sacklio`: the public transforms, validated without I/O at
construction."""

from __future__ import annotations

import re

import apache_beam as beam
import pytest

import sackli
from sackli.beam import ReadAllFromSackli, ReadFromSackli, WriteToSackli
from sackli.beam import sacklio
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, READ_SEPARATE, assert_reads, write_bag, bag_dir,
)


# --- Validation ---------------------------------------------------------------


class TestValidation:
    def test_no_io_without_validate(self, tmp_path):
        """validate=False touches no storage: the folder need not exist."""
        for pattern in ["nope@4.bagz", "nope@*.bagz", "*.bagz", "nope.bag"]:
            read = ReadFromSackli(str(tmp_path / "missing" / pattern), validate=False)
            assert isinstance(read, ReadFromSackli)
        assert not (tmp_path / "missing").exists()

    def test_path_created_after_construction(self, tmp_path):
        read = ReadFromSackli(str(tmp_path / "late@2.bagz"), validate=False)
        read_all = ReadAllFromSackli()
        write_bag(tmp_path / "late-00000-of-00002.bagz", [b"l0", b""])
        write_bag(tmp_path / "late-00001-of-00002.bagz", [b"l1"])
        assert_reads(read, [b"l0", b"", b"l1"])
        assert_reads(beam.Create([str(tmp_path / "late@*.bagz")]) | read_all, [b"l0", b"", b"l1"])

    def test_missing_file(self, tmp_path):
        path = str(tmp_path / "nope.bagz")
        with pytest.raises(FileNotFoundError, match=re.escape(path)) as info:
            ReadFromSackli(path)
        assert info.value.filename == path

    def test_missing_shard(self, tmp_path):
        for i in (0, 1, 3):
            write_bag(tmp_path / f"s-{i:05d}-of-00004.bagz", [b"x"])
        missing = str(tmp_path / "s-00002-of-00004.bagz")
        with pytest.raises(FileNotFoundError, match="shard 2 of 4 is missing") as info:
            ReadFromSackli(str(tmp_path / "s@4.bagz"))
        assert info.value.filename == missing

    def test_missing_shard_set(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="no shards match"):
            ReadFromSackli(str(tmp_path / "s@*.bagz"))
        with pytest.raises(FileNotFoundError, match="shard 0 of 4 is missing"):
            ReadFromSackli(str(tmp_path / "no_dir" / "s@4.bagz"))

    def test_glob_without_match(self, tmp_path):
        pattern = str(tmp_path / "*.bagz")
        with pytest.raises(FileNotFoundError, match="no files match") as info:
            ReadFromSackli(pattern)
        assert info.value.filename == pattern

    def test_missing_limits_file(self, golden_dir):
        with pytest.raises(FileNotFoundError, match="limits file") as info:
            ReadFromSackli(str(golden_dir / "tail.bagz"), options=READ_SEPARATE)
        assert info.value.filename == str(golden_dir / "limits.tail.bagz")

    def test_ambiguous_star(self, tmp_path):
        write_bag(tmp_path / "a-00000-of-00001.bagz", [b"x"])
        for i in range(2):
            write_bag(tmp_path / f"a-{i:05d}-of-00002.bagz", [b"y"])
        with pytest.raises(ValueError, match="ambiguous"):
            ReadFromSackli(str(tmp_path / "a@*.bagz"))
        assert_reads(ReadFromSackli(str(tmp_path / "a@2.bagz")), [b"y", b"y"])  # a count is fine

    @pytest.mark.parametrize("args,kwargs,error,message", [
        ((123,), {}, TypeError, "int"),
        ((b"x.bagz",), {}, TypeError, "bytes"),
        (("x.bagz",), {"options": sackli.Writer.Options()}, TypeError, "sackli.Reader.Options"),
        (("x.bagz", bytes), {}, TypeError, "Coder"),
        (("",), {}, ValueError, "empty"),
        (("http://host/x.bagz",), {"validate": False}, ValueError, "not supported"),
    ])
    def test_bad_arguments(self, args, kwargs, error, message):
        with pytest.raises(error, match=message):
            ReadFromSackli(*args, **kwargs)

    @pytest.mark.parametrize("validate", [True, False])
    def test_empty_entry(self, bag_dir, validate):
        """Caught at construction, without I/O, also with validate=False."""
        for pattern in (f"{bag_dir}/plain.bagz,", f",{bag_dir}/plain.bagz"):
            with pytest.raises(ValueError, match="empty entry"):
                ReadFromSackli(pattern, validate=validate)

    @pytest.mark.parametrize("kwargs,error", [
        ({"desired_bundle_size": 0}, ValueError),
        ({"desired_bundle_size": "64"}, TypeError),
        ({"desired_bundle_size": True}, TypeError),
        ({"options": sackli.Writer.Options()}, TypeError),
        ({"coder": str}, TypeError),
    ])
    def test_read_all_bad_arguments(self, kwargs, error):
        with pytest.raises(error):
            ReadAllFromSackli(**kwargs)


def test_public_names():
    assert sacklio.ReadFromSackli is ReadFromSackli
    assert sacklio.ReadAllFromSackli is ReadAllFromSackli
    assert sacklio.WriteToSackli is WriteToSackli
