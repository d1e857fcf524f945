"""Issue 49 §3: no abort at any limit. A record larger than the reader's
max_record_bytes raises RecordTooLargeError (naming the file, the record and
the size) before it is allocated; running out of memory is a MemoryError
naming them, never std::bad_alloc's abort; every other C++ exception is a
Python one. The memory cases run in a subprocess under RLIMIT_AS."""

from __future__ import annotations

import pytest

import sackli
from sackli import _engine

from bombs import GiB, run_limited, sized_bomb, unsized_bomb, write_bag

MiB = 1 << 20


@pytest.fixture
def unsized(tmp_path):
    """A .bagz whose record 1 is an 8 MiB frame without its content size."""
    path = tmp_path / "unsized.bagz"
    write_bag(path, [b"", unsized_bomb(8 * MiB), b""])
    return path


def test_the_default_cap_is_4_gib():
    assert sackli.Reader.Options().max_record_bytes == 4 * GiB
    assert sackli.Reader.Options(max_record_bytes=None).max_record_bytes is None


@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError),
                                          ("1", TypeError)])
def test_max_record_bytes_is_checked(value, error):
    with pytest.raises(error, match="max_record_bytes"):
        sackli.Reader.Options(max_record_bytes=value)


def test_an_unsized_frame_over_the_cap_raises_naming_file_record_and_cap(unsized):
    reader = sackli.Reader(unsized, max_record_bytes=MiB)
    message = rf"{unsized}: record 1 \(byte offset 0\) decodes to more than 1048576 bytes"
    with pytest.raises(sackli.RecordTooLargeError, match=message):
        reader[1]
    for read in (lambda: reader.read_indices([0, 1]), reader.read, lambda: list(reader),
                 lambda: reader[0:2].read(), lambda: reader.index(b"x")):
        with pytest.raises(sackli.RecordTooLargeError, match=message):
            read()
    assert reader[0] == b"" and reader[2] == b""


def test_an_unsized_frame_within_the_cap_reads(unsized):
    for cap in (8 * MiB, None):
        assert sackli.Reader(unsized, max_record_bytes=cap)[1] == bytes(8 * MiB)
    with pytest.raises(sackli.RecordTooLargeError):
        sackli.Reader(unsized, max_record_bytes=8 * MiB - 1)[1]


def test_a_sized_frame_over_the_cap_raises_with_its_size(tmp_path):
    path = tmp_path / "sized.bagz"
    with sackli.Writer(path) as writer:
        writer.write_many([b"small", bytes(2 * MiB)])
    reader = sackli.Reader(path, max_record_bytes=MiB)
    assert reader[0] == b"small"
    message = rf"{path}: record 1 \(byte offset \d+\) decodes to 2097152 bytes \(max_record_bytes=1048576\)"
    for read in (lambda: reader[1], lambda: reader.read_indices([1]), reader.read):
        with pytest.raises(sackli.RecordTooLargeError, match=message):
            read()


def test_a_raw_record_over_the_cap_raises(tmp_path):
    path = tmp_path / "raw.bag"
    with sackli.Writer(path) as writer:
        writer.write_many([b"ok", b"x" * 100])
    reader = sackli.Reader(path, max_record_bytes=99)
    assert reader[0] == b"ok"
    with pytest.raises(sackli.RecordTooLargeError, match=r"record 1 .* decodes to 100 bytes"):
        reader[1]
    with pytest.raises(sackli.RecordTooLargeError):
        reader.read_indices([0, 1])
    assert sackli.Reader(path, max_record_bytes=100)[1] == b"x" * 100


def test_a_too_large_record_is_a_value_error():
    assert issubclass(sackli.RecordTooLargeError, ValueError)
    assert not issubclass(sackli.RecordTooLargeError, sackli.CorruptionError)


# --- the real paths, under a capped address space --------------------------

# Above what the interpreter and sackli need (under 200 MB), well below the
# bombs: a decode runs out of memory after a few hundred MB, in well under a
# second.
_ADDRESS_SPACE = 400 << 20


def test_a_3_gib_bomb_is_refused_before_allocating(tmp_path):
    """The cap is checked against the header: a sized 3 GiB frame never gets
    its buffer, so a process that could not hold it raises the cap error."""
    write_bag(tmp_path / "sized.bagz", [sized_bomb(3 * GiB)])
    result = run_limited("""
        import sackli
        try:
            sackli.Reader("sized.bagz", max_record_bytes=1 << 30)[0]
        except sackli.RecordTooLargeError as error:
            print("too large:", error)
        """, _ADDRESS_SPACE, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert "too large: sized.bagz: record 0 (byte offset 0) decodes to 3221225472 bytes" in \
        result.stdout.decode()


def test_an_unsized_bomb_stops_at_the_cap(tmp_path):
    write_bag(tmp_path / "bomb.bagz", [unsized_bomb(3 * GiB)])
    result = run_limited("""
        import sackli
        reader = sackli.Reader("bomb.bagz", max_record_bytes=16 << 20)
        for read in (lambda: reader[0], lambda: reader.read_indices([0])):
            try:
                read()
            except sackli.RecordTooLargeError as error:
                print("too large:", error)
        """, _ADDRESS_SPACE, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().count("decodes to more than 16777216 bytes") == 2


def test_running_out_of_memory_is_a_memory_error_naming_file_and_record(tmp_path):
    """Issue 49: the 99 KB bomb read with r[0] aborted the process
    (std::bad_alloc through a plain CPython entry point)."""
    write_bag(tmp_path / "bomb.bagz", [unsized_bomb(3 * GiB)])
    assert (tmp_path / "bomb.bagz").stat().st_size < 100_000
    result = run_limited("""
        import sackli
        reader = sackli.Reader("bomb.bagz")  # the default cap: 4 GiB
        for read in (lambda: reader[0], lambda: reader.read_indices([0]), lambda: next(iter(reader))):
            try:
                read()
            except MemoryError as error:
                print("memory:", error)
        """, _ADDRESS_SPACE, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line.startswith("memory: bomb.bagz: record 0 (byte offset 0): out of memory"), line


# --- every C++ exception through the translator ----------------------------

@pytest.mark.parametrize("kind, error, message", [
    ("bad_alloc", MemoryError, "out of memory"),
    ("runtime_error", sackli.EngineError, "sackli engine: injected runtime_error"),
    ("logic_error", sackli.EngineError, "sackli engine: injected logic_error"),
    ("unknown", sackli.EngineError, "unknown C\\+\\+ exception"),
    ("out_of_memory", MemoryError, "f.bagz: record 3: out of memory"),
    ("too_large", sackli.RecordTooLargeError, "f.bagz: record 3 decodes to 9 bytes"),
])
@pytest.mark.parametrize("entry", ["_raise_for_test", "_raise_for_test_fast"])
def test_every_cpp_exception_becomes_a_python_one(kind, error, message, entry):
    """Through pybind11's dispatch and through the plain CPython entry points
    (r[i], index lookups), whose escape would abort the process."""
    with pytest.raises(error, match=message):
        getattr(_engine, entry)(kind)
