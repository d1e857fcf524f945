"""The Writer API: record types, batches, flush visibility, counters, life
cycle, placements, explicit compression and dictionaries, and interrupted
writes completed by `sackli.recover`."""

from __future__ import annotations

import errno
import gc
import json
import os
import pathlib
import pickle
import random
import struct

import numpy as np
import pytest
import zstandard

import sackli
from sackli._bulk import close_unpublished
from sackli._recover import partial_writes

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SUFFIXES = pytest.mark.parametrize("suffix", [".bag", ".bagz"])
PLACEMENTS = pytest.mark.parametrize("placement", ["TAIL", "SEPARATE"])


def limits_bytes(records: list[bytes]) -> bytes:
    """The u64 limits of raw records."""
    ends, total = [], 0
    for record in records:
        total += len(record)
        ends.append(total)
    return struct.pack(f"<{len(ends)}Q", *ends)


def limits_path(path: pathlib.Path) -> pathlib.Path:
    return path.with_name("limits." + path.name)


# --- Record types --------------------------------------------------------------

RECORD_VALUES = [
    (b"bytes", b"bytes"),
    (b"", b""),
    ("h\u00e9llo \u4e16\u754c", "h\u00e9llo \u4e16\u754c".encode("utf-8")),
    ("", b""),
    (bytearray(b"bytearray"), b"bytearray"),
    (memoryview(b"0123456789")[2:6], b"2345"),
    (np.arange(250, 256, dtype=np.uint8), bytes(range(250, 256))),
    (np.zeros(0, dtype=np.uint8), b""),
    (np.frombuffer(b"abcdefgh", dtype=np.uint8)[3:], b"defgh"),
]


@SUFFIXES
@pytest.mark.parametrize("method", ["write", "write_many_list", "write_many_generator"])
def test_record_types(tmp_path, suffix, method):
    path = tmp_path / ("types" + suffix)
    values = [value for value, _ in RECORD_VALUES]
    expected = [record for _, record in RECORD_VALUES]
    with sackli.Writer(path) as writer:
        if method == "write":
            for value in values:
                writer.write(value)
        elif method == "write_many_list":
            writer.write_many(values)
        else:
            writer.write_many(value for value in values)
        assert writer.records_written == len(expected)
    assert sackli.Reader(path).read() == expected


@pytest.mark.parametrize("bad", [1, None, 1.5, [b"a"], object()], ids=repr)
def test_bad_record_types(tmp_path, bad):
    path = tmp_path / "bad.bag"
    with sackli.Writer(path) as writer:
        writer.write(b"kept")
        with pytest.raises(TypeError):
            writer.write(bad)
        assert writer.records_written == 1
        with pytest.raises(TypeError):
            writer.write_many([bad])
        assert writer.records_written == 1
        writer.write(b"after")
    assert sackli.Reader(path).read() == [b"kept", b"after"]


@SUFFIXES
def test_write_many_in_many_batches(tmp_path, suffix):
    rng = random.Random(5)
    records = [rng.randbytes(rng.randrange(0, 64)) for _ in range(25_000)]
    path = tmp_path / ("many" + suffix)
    with sackli.Writer(path) as writer:
        writer.write(b"first")
        writer.write_many(iter(records[:12_345]))
        writer.write(b"middle")
        writer.write_many(records[12_345:])
        writer.write_many([])
        writer.write_many(r for r in [])
        assert writer.records_written == len(records) + 2
    expected = [b"first"] + records[:12_345] + [b"middle"] + records[12_345:]
    assert sackli.Reader(path).read() == expected


# --- Flush, counters, life cycle --------------------------------------------------


@SUFFIXES
@PLACEMENTS
def test_flush_makes_records_readable(tmp_path, suffix, placement):
    path = tmp_path / ("flushed" + suffix)
    records = [b"rec%d" % i * (i % 4) for i in range(200)]
    writer = sackli.Writer(path, limits_placement=placement)
    writer.write_many(records[:3])
    writer.flush()
    partial = writer.partial_path
    early = sackli.Reader(partial, limits_placement="SEPARATE")
    assert early.read() == records[:3]
    # While the writer is open, the target does not exist yet, and its
    # partial file is an interrupted write for a TAIL reader.
    with pytest.raises(FileNotFoundError, match="recover"):
        sackli.Reader(path)
    with pytest.raises(sackli.CorruptionError, match="recover"):
        sackli.Reader(partial)
    writer.write_many(records[3:])
    writer.flush()
    assert os.path.getsize(partial) == writer.bytes_written
    assert sackli.Reader(partial, limits_placement="SEPARATE").read() == records
    assert early.read() == records[:3]  # an open reader keeps what it saw
    writer.close()
    assert sackli.Reader(path, limits_placement=placement).read() == records
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name] + (["limits." + path.name] if placement == "SEPARATE" else []))


@SUFFIXES
@PLACEMENTS
def test_counters(tmp_path, suffix, placement):
    path = tmp_path / ("count" + suffix)
    records = [b"", b"a", b"bb" * 100, b"", "\u00e9".encode(), bytes(70_000)]
    with sackli.Writer(path, limits_placement=placement) as writer:
        assert (writer.records_written, writer.bytes_written) == (0, 0)
        for i, record in enumerate(records):
            writer.write(record)
            assert writer.records_written == i + 1
            if suffix == ".bag":
                assert writer.bytes_written == sum(map(len, records[: i + 1]))
        written = writer.bytes_written
    assert (writer.records_written, writer.bytes_written) == (len(records), written)
    size = os.path.getsize(path)
    assert written == (size - 8 * len(records) if placement == "TAIL" else size)
    if suffix == ".bagz":
        assert written < sum(map(len, records))  # compressed
    assert sackli.Reader(path, limits_placement=placement).approximate_bytes_per_record() == written / len(records)


def test_life_cycle(tmp_path):
    path = tmp_path / "life.bag"
    with sackli.Writer(path) as writer:
        assert writer.closed is False
        assert writer.path == str(path)
        writer.write(b"x")
        assert repr(str(path)) in repr(writer) and "1 records" in repr(writer)
    assert writer.closed is True
    writer.close()
    writer.close()
    assert "closed" in repr(writer)
    for use in (lambda: writer.write(b"y"), lambda: writer.write_many([b"y"]), lambda: writer.write("y")):
        with pytest.raises(ValueError):
            use()
    assert writer.records_written == 1
    assert sackli.Reader(path).read() == [b"x"]
    with pytest.raises(TypeError):
        pickle.dumps(writer)


def test_path_forms(tmp_path):
    specs = [tmp_path / "a.bag", str(tmp_path / "b.bag"), "posix:" + str(tmp_path / "c.bag"),
             pathlib.Path("/posix:" + str(tmp_path / "d.bag"))]
    for i, spec in enumerate(specs):
        with sackli.Writer(spec) as writer:
            writer.write(b"%d" % i)
        assert writer.path == str(spec).removeprefix("posix:").removeprefix("/posix:")
        assert sackli.Reader(spec).read() == [b"%d" % i]
    assert sackli.Reader(tmp_path / "d.bag").read() == [b"3"]
    with sackli.Writer(tmp_path / "e.bag", limits_placement="SEPARATE") as writer:
        writer.write(b"e")
    assert sackli.recover(pathlib.Path("/posix:" + str(tmp_path / "e.bag"))) == (1, 0, 0)
    assert sackli.Reader(tmp_path / "e.bag").read() == [b"e"]


def test_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with sackli.Writer("rel.bag") as writer:
        writer.write(b"r")
    assert sackli.Reader(tmp_path / "rel.bag").read() == [b"r"]


def test_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        sackli.Writer(tmp_path / "missing" / "x.bag")
    (tmp_path / "folder.bag").mkdir()
    with pytest.raises(IsADirectoryError):
        sackli.Writer(tmp_path / "folder.bag")
    with pytest.raises(TypeError):
        sackli.Writer(os.fsencode(tmp_path / "bytes.bag"))


@pytest.mark.parametrize(
    "overrides, error",
    [
        ({"sharding_layout": "CONCATENATED"}, TypeError),
        ({"limits_placement": "MIDDLE"}, TypeError),
        ({"compression": None}, TypeError),
        ({"max_parallelism": 0}, ValueError),
        ({"options": sackli.Reader.Options()}, TypeError),
    ],
    ids=str,
)
def test_bad_writer_options(tmp_path, overrides, error):
    with pytest.raises(error):
        sackli.Writer(tmp_path / "x.bag", **overrides)
    assert not (tmp_path / "x.bag").exists()


def test_truncates_existing_file(tmp_path):
    path = tmp_path / "again.bag"
    for records in ([b"one", b"two", b"three"], [b"4"]):
        with sackli.Writer(path) as writer:
            writer.write_many(records)
        assert sackli.Reader(path).read() == records


# --- Atomic writes -------------------------------------------------------------------


def test_rewrite_under_an_open_reader_keeps_its_view(tmp_path, run_python):
    """Rewriting a bag that a reader has open used to truncate it in place
    (SIGBUS in the reader); now the reader keeps the file it opened."""
    path = tmp_path / "a.bag"
    old = [b"old %d" % i * 20 for i in range(1000)]
    with sackli.Writer(path) as writer:
        writer.write_many(old)
    result = run_python(f"""
        import sackli
        r = sackli.Reader({str(path)!r})
        with sackli.Writer({str(path)!r}) as w:
            w.write(b"new")
        report(lambda: (r[500] == {old[500]!r}, len(r), sackli.Reader({str(path)!r}).read()))
    """)
    assert result.outcome() == {"ok": repr((True, 1000, [b"new"]))}


@PLACEMENTS
def test_target_appears_only_at_close(tmp_path, placement):
    path = tmp_path / "late.bagz"
    with sackli.Writer(path, limits_placement=placement) as writer:
        writer.write_many([b"x" * 100] * 1000)
        writer.flush()
        assert [p.name for p in tmp_path.iterdir()] == [pathlib.Path(writer.partial_path).parent.name]
        assert pathlib.Path(writer.partial_path).name == "late.bagz"
    expected = ["late.bagz"] + (["limits.late.bagz"] if placement == "SEPARATE" else [])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected)


@PLACEMENTS
def test_with_block_that_raises_publishes_nothing(tmp_path, placement):
    path = tmp_path / "kept.bag"
    with sackli.Writer(path, limits_placement=placement) as writer:
        writer.write(b"old")
    before = sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir())
    with pytest.raises(RuntimeError, match="boom"):
        with sackli.Writer(path, limits_placement=placement) as writer:
            writer.write_many([b"new"] * 100)
            raise RuntimeError("boom")
    assert sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir()) == before
    assert writer.closed


def test_tail_write_over_a_separate_bag_removes_its_limits_file(tmp_path):
    path = tmp_path / "was_separate.bag"
    with sackli.Writer(path, limits_placement="SEPARATE") as writer:
        writer.write_many([b"a", b"b"])
    assert limits_path(path).exists()
    with sackli.Writer(path) as writer:
        writer.write(b"c")
    assert not limits_path(path).exists()
    with pytest.raises(FileNotFoundError, match="nothing to recover"):
        sackli.recover(path)  # would otherwise "recover" the stale limits
    assert sackli.Reader(path).read() == [b"c"]


def test_concurrent_writers_of_one_target_do_not_mix(tmp_path):
    path = tmp_path / "shared.bag"
    first, second = sackli.Writer(path), sackli.Writer(path)
    assert first.partial_path != second.partial_path
    first.write_many([b"1"] * 10)
    second.write_many([b"2"] * 20)
    first.close()
    assert sackli.Reader(path).read() == [b"1"] * 10
    second.close()
    assert sackli.Reader(path).read() == [b"2"] * 20
    assert [p.name for p in tmp_path.iterdir()] == ["shared.bag"]


@pytest.mark.parametrize("spec", ["out@8.bagz", "out@*.bagz", "out@3.bag"])
def test_writer_refuses_shard_specs(tmp_path, spec):
    with pytest.raises(ValueError, match="ShardedWriter"):
        sackli.Writer(tmp_path / spec)
    assert list(tmp_path.iterdir()) == []


def test_recover_a_finished_write_that_was_not_renamed(tmp_path):
    """A crash between finishing the file and renaming it: recover renames."""
    path = tmp_path / "done.bag"
    writer = sackli.Writer(path)
    writer.write_many([b"p", b"q"])
    close_unpublished(writer)
    assert not path.exists()
    assert sackli.recover(path) == (2, 0, 0)
    assert sackli.Reader(path).read() == [b"p", b"q"]
    assert [p.name for p in tmp_path.iterdir()] == ["done.bag"]


def test_recover_with_several_unfinished_writes_names_them(tmp_path, run_python):
    for _ in range(2):
        interrupt(run_python, "twice.bag", [b"x"])
    partials = partial_writes(str(tmp_path / "twice.bag"))
    assert len(partials) == 2
    with pytest.raises(ValueError, match="2 unfinished writes") as caught:
        sackli.recover(tmp_path / "twice.bag")
    assert all(p in str(caught.value) for p in partials)
    assert sackli.recover(partials[0]) == (1, 0, 0)  # by its own path
    assert sackli.Reader(tmp_path / "twice.bag").read() == [b"x"]
    assert sackli.recover(tmp_path / "twice.bag") == (1, 0, 0)  # the one left


# --- Placement and compression -----------------------------------------------------


@SUFFIXES
@PLACEMENTS
@pytest.mark.parametrize("records", [[], [b""], [b"abc", b"", b"de"]], ids=str)
def test_placement_files(tmp_path, suffix, placement, records):
    path = tmp_path / ("placed" + suffix)
    with sackli.Writer(path, sackli.Writer.Options(limits_placement=placement)) as writer:
        writer.write_many(records)
        # Both placements keep limits aside while writing.
        assert limits_path(pathlib.Path(writer.partial_path)).exists()
    assert writer.options.limits_placement == sackli.LimitsPlacement[placement]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name] + ([limits_path(path).name] if placement == "SEPARATE" else [])
    )
    if suffix == ".bag":
        data = path.read_bytes()
        if placement == "SEPARATE":
            assert data == b"".join(records)
            assert limits_path(path).read_bytes() == limits_bytes(records)
        else:
            assert data == b"".join(records) + limits_bytes(records)
    assert sackli.Reader(path, limits_placement=placement).read() == records


@PLACEMENTS
def test_compression_none_on_bagz(tmp_path, placement):
    records = [b"plain", b"", b"text record"]
    path = tmp_path / "raw.bagz"
    with sackli.Writer(path, compression=sackli.CompressionNone(), limits_placement=placement) as writer:
        writer.write_many(records)
    tail = limits_bytes(records) if placement == "TAIL" else b""
    assert path.read_bytes() == b"".join(records) + tail
    assert sackli.Reader(path, compression=sackli.CompressionNone(), limits_placement=placement).read() == records
    with pytest.raises(sackli.CorruptionError):
        sackli.Reader(path, limits_placement=placement).read()


@pytest.mark.parametrize("level", [1, 3, 19])
def test_compression_zstd_on_bag(tmp_path, level):
    records = [b"zstd in a .bag " * 20, b"", b"x", bytes(5000)]
    path = tmp_path / "frames.bag"
    with sackli.Writer(path, compression=sackli.CompressionZstd(level=level)) as writer:
        writer.write_many(records)
    assert sackli.Reader(path, compression=sackli.CompressionZstd()).read() == records
    frames = sackli.Reader(path).read()  # raw by suffix: the stored frames
    assert [bool(f) for f in frames] == [bool(r) for r in records]
    assert all(f.startswith(ZSTD_MAGIC) for f in frames if f)
    assert len(frames[0]) < len(records[0]) and len(frames[3]) < len(records[3])


def _json_records(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [
        json.dumps({"id": i, "user": "user%d" % rng.randrange(1000), "tags": ["alpha", "beta", "gamma"][: i % 3 + 1],
                    "score": round(rng.random(), 4)}).encode()
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def trained_dictionary() -> bytes:
    dictionary = zstandard.train_dictionary(2048, _json_records(600, 1)).as_bytes()
    assert dictionary[:4] == b"\x37\xa4\x30\xec"  # a real (trained) zstd dictionary
    return dictionary


@SUFFIXES
@pytest.mark.parametrize("kind", ["trained", "raw_content"])
def test_zstd_dictionary_round_trip(tmp_path, trained_dictionary, suffix, kind):
    dictionary = trained_dictionary if kind == "trained" else b"".join(_json_records(20, 2))
    records = _json_records(300, 3) + [b""]
    path = tmp_path / ("dict" + suffix)
    compression = sackli.CompressionZstd(level=7, dictionary=dictionary)
    with sackli.Writer(path, compression=compression) as writer:
        writer.write_many(records)
    assert sackli.Reader(path, compression=compression).read() == records
    assert sackli.Reader(path, compression=sackli.CompressionZstd(dictionary=dictionary)).read() == records
    # The dictionary helps: smaller than without one.
    plain = tmp_path / ("plain" + suffix)
    with sackli.Writer(plain, compression=sackli.CompressionZstd(level=7)) as writer:
        writer.write_many(records)
    assert os.path.getsize(path) < os.path.getsize(plain)
    # Frames carry a checksum (descriptor bit 2), so a wrong dictionary fails.
    frames = sackli.Reader(path, compression=sackli.CompressionNone()).read()
    assert all(f.startswith(ZSTD_MAGIC) and f[4] & 0x04 for f in frames if f)
    wrong = sackli.CompressionZstd(dictionary=b"".join(_json_records(20, 99)))
    for bad in (wrong, sackli.CompressionZstd()):
        with pytest.raises(sackli.CorruptionError):
            sackli.Reader(path, compression=bad).read()


# --- Interrupted writes and recovery --------------------------------------------

INTERRUPTED_RECORDS = [b"rec%d|" % i * (i % 5) for i in range(1, 151)]  # the first is not empty


def interrupt(run_python, name: str, records: list[bytes]) -> None:
    """Writes `records` to `name` (in run_python's folder), flushes, and dies
    without closing the writer: its partial files stay beside `name`."""
    result = run_python(
        f"""
        import os, sackli
        writer = sackli.Writer({name!r})
        writer.write_many({records!r})
        writer.flush()
        os._exit(0)
        """
    )
    assert result.returncode == 0, result.stderr


DAMAGE = {
    # name: (damage(path), dropped_limits, dropped_bytes)
    "none": (lambda path: None, 0, 0),
    "junk_after_records": (lambda path: path.open("ab").write(b"J" * 13), 0, 13),
    "limit_beyond_file": (
        lambda path: limits_path(path).open("ab").write(struct.pack("<Q", path.stat().st_size + 100)), 1, 0
    ),
    "decreasing_limit": (lambda path: limits_path(path).open("ab").write(struct.pack("<Q", 1)), 1, 0),
    "partial_limit_entry": (lambda path: limits_path(path).open("ab").write(b"\x01\x02\x03"), 0, 0),
}


@SUFFIXES
@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("count", [0, 1, 150])
def test_interrupted_write_and_recover(tmp_path, run_python, suffix, damage, count):
    name = "cut" + suffix
    path = tmp_path / name
    records = INTERRUPTED_RECORDS[:count]
    interrupt(run_python, name, records)
    # The target never appeared; the write is in its partial folder.
    assert not path.exists()
    (partial,) = [pathlib.Path(p) for p in partial_writes(str(path))]
    assert partial.parent.parent == tmp_path and partial.parent.name.startswith(f".{name}.sackli-partial-")
    assert limits_path(partial).exists()
    damage_fn, dropped_limits, dropped_bytes = DAMAGE[damage]
    damage_fn(partial)
    with pytest.raises(FileNotFoundError, match="recover") as missing:
        sackli.Reader(path)
    assert str(partial) in str(missing.value)
    # Also a 0-byte file (no record bytes yet) with limits.<name> beside it is
    # an interrupted write, not an empty bag.
    with pytest.raises(sackli.CorruptionError, match="recover") as caught:
        sackli.Reader(partial)
    assert isinstance(caught.value, ValueError)
    assert name in str(caught.value)

    report = sackli.recover(path)
    assert report == sackli.RecoveryReport(records=count, dropped_limits=dropped_limits, dropped_bytes=dropped_bytes)
    assert (report.records, report.dropped_limits, report.dropped_bytes) == (count, dropped_limits, dropped_bytes)
    assert sorted(tmp_path.iterdir()) == [path]  # partial folder gone
    assert sackli.Reader(path).read() == records
    # The result is exactly what an uninterrupted write produces.
    complete = tmp_path / ("complete" + suffix)
    with sackli.Writer(complete) as writer:
        writer.write_many(records)
    assert path.read_bytes() == complete.read_bytes()


def test_recover_accepts_posix_and_pathlike(tmp_path, run_python):
    interrupt(run_python, "p.bag", [b"a", b"b"])
    assert sackli.recover("posix:" + str(tmp_path / "p.bag")) == (2, 0, 0)
    assert sackli.Reader(tmp_path / "p.bag").read() == [b"a", b"b"]


def test_recover_without_limits_file(tmp_path):
    path = tmp_path / "whole.bag"
    with sackli.Writer(path) as writer:
        writer.write(b"complete")
    before = path.read_bytes()
    with pytest.raises(FileNotFoundError):
        sackli.recover(path)
    assert path.read_bytes() == before
    with pytest.raises(FileNotFoundError):
        sackli.recover(tmp_path / "absent.bag")


@SUFFIXES
def test_stale_limits_file_beside_complete_bag(tmp_path, suffix):
    # A crash between appending the limits and deleting limits.<name>: the tail
    # parses, so the bag is complete and the leftover is ignored.
    path = tmp_path / ("stale" + suffix)
    records = [b"one", b"", b"three"]
    with sackli.Writer(path, limits_placement="SEPARATE") as writer:
        writer.write_many(records)
    leftover = limits_path(path).read_bytes()
    with sackli.Writer(path) as writer:
        writer.write_many(records)
    limits_path(path).write_bytes(leftover)
    assert sackli.Reader(path).read() == records


# --- Compression in the background -------------------------------------------------
#
# .bagz records are copied into batches that the thread pool compresses while
# the caller goes on; batches are appended in call order.


@pytest.mark.parametrize("sizes", [[1000], [10, 200_000, 10], [0, 1, 70_000]], ids=["small", "mixed", "big"])
def test_background_batches_keep_call_order(tmp_path, sizes):
    rng = random.Random(3)
    records = [b"%06d" % i + bytes([65 + i % 26]) * rng.choice(sizes) for i in range(3_000)]
    path = tmp_path / "ordered.bagz"
    with sackli.Writer(path, max_parallelism=4) as writer:
        for k, record in enumerate(records):
            if k % 7 == 3:
                writer.write_many([record])
            else:
                writer.write(record)
            if k == 1_500:
                writer.flush()
                partial = sackli.Reader(writer.partial_path, limits_placement="SEPARATE").read()
                assert partial == records[:1_501]
    assert sackli.Reader(path).read() == records


# A write past RLIMIT_FSIZE fails with EFBIG (SIGXFSZ ignored): a disk that
# fills up, for one process. The writer writes in a partial folder beside its
# target, so a link to /dev/full would not do.
FULL_DISK = """
import errno, random, resource, signal, sackli
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
"""


def test_a_lost_batch_fails_the_writer_for_good(tmp_path, run_python):
    result = run_python(FULL_DISK + """
def outcome(call):
    try:
        call()
    except OSError as error:
        return error.errno
    return None
writer = sackli.Writer("full.bagz")
record = random.Random(5).randbytes(4096)  # incompressible
def fill():
    for _ in range(2_000):  # 8 MB: past the limit
        writer.write(record)
    writer.close()
first = outcome(fill)
# Records after a lost batch must never reach the file: every later call fails.
later = [outcome(lambda: writer.write(b"after")), outcome(writer.flush), outcome(writer.close)]
report(lambda: (first == errno.EFBIG, [e is not None for e in later]))
""")
    assert result.outcome() == {"ok": repr((True, [True, True, True]))}
    assert not (tmp_path / "full.bagz").exists()  # nothing published


def test_a_lost_batch_surfaces_at_close(tmp_path, run_python):
    result = run_python(FULL_DISK + """
writer = sackli.Writer("full.bagz")
writer.write_many([random.Random(1).randbytes(300_000) for _ in range(4)])  # in buffers until close
report(lambda: writer.close())
""")
    outcome = result.outcome()
    assert outcome["error"] == "OSError" and "full.bagz" in outcome["message"], outcome
    assert not (tmp_path / "full.bagz").exists()


def test_dropped_writer_publishes_nothing_and_keeps_its_records_for_recover(tmp_path):
    # Publishing a writer dropped without close() would make a write cut
    # short (an exception outside `with`) look complete.
    path = tmp_path / "dropped.bagz"
    records = [b"%d" % i * 50 for i in range(5_000)]
    writer = sackli.Writer(path)
    for record in records:
        writer.write(record)
    with pytest.warns(ResourceWarning, match="was not closed: nothing was published"):
        del writer
        gc.collect()
    assert not path.exists()
    assert sackli.recover(path).records == len(records)
    assert sackli.Reader(path).read() == records


def test_exit_with_open_writers(tmp_path, run_python):
    # Batches still in flight when the interpreter exits must not crash it.
    outcome = run_python("""
import sackli
writers = [sackli.Writer(f"open{k}.bagz", max_parallelism=2) for k in range(3)]
for writer in writers:
    for i in range(20_000):
        writer.write(b"%d" % i * 30)
report(lambda: "exiting")
""", timeout=120).outcome()
    assert outcome == {"ok": repr("exiting")}
