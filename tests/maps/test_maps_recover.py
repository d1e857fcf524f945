"""Interrupted map writes are found and recovered (issue 31, §1).

A process running `sackli.maps.write` is killed (SIGKILL) while it spills
values; then `sackli.recover(target)` or `sackli recover TARGET` must
publish the map of a prefix of the pairs written, in order, byte for byte
the map `write` makes of them (and `mapbuffer` reads it), and leave nothing
hidden behind.
"""

from __future__ import annotations

import json
import os
import struct
import textwrap

import mapbuffer
import pytest

import sackli
from crash_helpers import kill_when_ready, sackli_cli
from sackli import maps

WRITTEN = 20000  # pairs the child's generator can yield

# Pair i of every test: scattered keys, incompressible values of varied sizes
# (so that compressed spills reach the disk as soon as raw ones).
_PAIRS = textwrap.dedent("""
    import random
    def pair(i):
        return (i * 2654435761) % (1 << 40), b"%08d" % i + random.Random(i).randbytes(i % 500)
""")
_namespace: dict = {}
exec(_PAIRS, _namespace)
pair = _namespace["pair"]  # the same as the children's

# A child whose pairs come from a generator that, once some entries of the
# spill reached the disk (and `more` pairs after that), says "ready" and
# waits to be killed, in the middle of the write.
_CHILD = _PAIRS + textwrap.dedent("""
    import glob, json, os, sys, time
    from sackli import maps
    how = json.loads(sys.argv[1])
    def pairs():
        ready_at = None
        for i in range(how["written"]):
            if ready_at is None and (how["at_once"] or any(
                    os.path.getsize(p) for p in glob.glob(".m.mb.sackli-partial-*/values.spill"))):
                ready_at = i + how["more"]
            if i == ready_at:
                print("ready", flush=True)
                time.sleep(120)
            key, value = pair(i)
            yield (pair(how["repeat"][1])[0] if i == how["repeat"][0] else key), value
    maps.write("m.mb", pairs(), compress=how["compress"])
""")


def _kill_mid_write(folder, compress=None, more: int = 300, at_once: bool = False,
                    repeat: tuple[int, int] = (-1, -1)) -> None:
    """Runs `maps.write("m.mb", ...)` in `folder` and kills it mid-write;
    pair `repeat[0]` gets the key of pair `repeat[1]` when asked."""
    how = json.dumps({"compress": compress, "more": more, "at_once": at_once,
                      "written": WRITTEN, "repeat": list(repeat)})
    kill_when_ready(_CHILD, how, folder)


def _hidden_folder(folder) -> str:
    """The one hidden folder in `folder`: the unfinished write of m.mb."""
    (hidden,) = os.listdir(folder)
    assert hidden.startswith(".m.mb.sackli-partial-")
    return os.path.join(folder, hidden)


def _assert_is_the_map_of_the_first(folder, count: int, compress=None) -> None:
    """m.mb is byte for byte `write` of pairs 0 .. count - 1, and mapbuffer
    reads their values."""
    maps.write(folder / "expected.mb", [pair(i) for i in range(count)], compress=compress)
    assert (folder / "m.mb").read_bytes() == (folder / "expected.mb").read_bytes()
    os.remove(folder / "expected.mb")
    assert os.listdir(folder) == ["m.mb"]
    ours = maps.MapBuffer(str(folder / "m.mb"), compress=compress)
    theirs = mapbuffer.MapBuffer((folder / "m.mb").read_bytes(), compress=compress)
    assert len(ours) == len(theirs) == count
    for i in sorted({0, count // 2, count - 1}) if count else []:
        key, value = pair(i)
        assert ours[key] == value and theirs[key] == value


@pytest.mark.parametrize("how", ["api", "cli"])
def test_a_killed_map_write_is_recovered_to_a_prefix(tmp_path, how):
    _kill_mid_write(tmp_path)
    _hidden_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"unfinished write of \S*m\.mb .*sackli recover"):
        maps.MapBuffer(str(tmp_path / "m.mb"))
    if how == "api":
        report = sackli.recover(tmp_path / "m.mb")
        saved = report.records
    else:
        done = sackli_cli("recover", "m.mb", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("m.mb: recovered "), done.stdout
        saved = int(done.stdout.split("recovered ")[1].split()[0])
    assert 1 <= saved <= WRITTEN
    _assert_is_the_map_of_the_first(tmp_path, saved)
    with pytest.raises(FileNotFoundError, match="nothing to recover"):
        sackli.recover(tmp_path / "m.mb")


@pytest.mark.parametrize("compress", ["zstd", "gzip"])
def test_a_compressed_map_is_recovered_in_its_compression(tmp_path, compress):
    _kill_mid_write(tmp_path, compress)
    saved = sackli.recover(tmp_path / "m.mb").records
    assert saved >= 1
    _assert_is_the_map_of_the_first(tmp_path, saved, compress)
    if compress == "gzip":  # mapbuffer builds the very same bytes
        built = mapbuffer.MapBuffer(dict(pair(i) for i in range(saved)), compress="gzip")
        assert (tmp_path / "m.mb").read_bytes() == built.tobytes()


def test_a_damaged_entry_ends_what_is_recovered(tmp_path):
    _kill_mid_write(tmp_path)
    spill = os.path.join(_hidden_folder(tmp_path), "values.spill")
    with open(spill, "r+b") as file:  # damage the value of entry 7
        position = 0
        for _ in range(7):
            file.seek(position)
            position += 16 + struct.unpack("<QQ", file.read(16))[1]
        file.seek(position + 16 + 3)
        byte = file.read(1)
        file.seek(position + 16 + 3)
        file.write(bytes([byte[0] ^ 0x55]))
    size = os.path.getsize(spill)
    report = sackli.recover(tmp_path / "m.mb")
    assert report == (7, 1, size - position)  # keys, entries and spill bytes left out
    _assert_is_the_map_of_the_first(tmp_path, 7)


def test_a_torn_last_entry_is_dropped(tmp_path):
    _kill_mid_write(tmp_path)
    spill = os.path.join(_hidden_folder(tmp_path), "values.spill")
    entries, position, last, size = 0, 0, 0, os.path.getsize(spill)
    with open(spill, "rb") as file:
        while position + 16 <= size:
            file.seek(position)
            end = position + 16 + struct.unpack("<QQ", file.read(16))[1]
            if end > size:
                break
            entries, last, position = entries + 1, position, end
    os.truncate(spill, position - 5)  # the last complete entry torn
    report = sackli.recover(tmp_path / "m.mb")
    assert report == (entries - 1, 1, position - 5 - last)
    _assert_is_the_map_of_the_first(tmp_path, entries - 1)


def test_a_repeated_key_ends_what_is_recovered(tmp_path):
    # Pair 20 repeats the key of pair 3: the write would have raised
    # ValueError, so the map holds the 20 pairs before the repetition.
    _kill_mid_write(tmp_path, repeat=(20, 3))
    report = sackli.recover(tmp_path / "m.mb")
    assert report.records == 20 and report.dropped_limits >= 1
    _assert_is_the_map_of_the_first(tmp_path, 20)


def test_a_write_killed_before_its_first_value_recovers_an_empty_map(tmp_path):
    _kill_mid_write(tmp_path, more=0, at_once=True)
    assert sackli.recover(tmp_path / "m.mb").records == 0
    _assert_is_the_map_of_the_first(tmp_path, 0)


def test_the_journal_is_written_before_any_value(tmp_path):
    def pairs():
        (hidden,) = os.listdir(tmp_path)
        journal = json.loads((tmp_path / hidden / "sackli-write.json").read_text())
        assert journal["kind"] == "map" and journal["target"] == "m.mb"
        assert journal["compress"] == "zstd" and journal["module"] == "sackli.maps._recover"
        yield pair(0)

    assert maps.write(tmp_path / "m.mb", pairs(), compress="zstd") == 1
    assert os.listdir(tmp_path) == ["m.mb"]


def test_a_failed_write_leaves_nothing(tmp_path):
    def failing():
        yield pair(0)
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        maps.write(tmp_path / "m.mb", failing())
    with pytest.raises(ValueError, match="more than once"):
        maps.write(tmp_path / "m.mb", [pair(0), pair(1), pair(0)])
    assert os.listdir(tmp_path) == []


def test_a_clean_write_is_what_it_was(tmp_path):
    # Byte for byte what mapbuffer builds, and nothing else left in the folder.
    items = [pair(i) for i in range(500)]
    assert maps.write(tmp_path / "m.mb", items) == 500
    assert (tmp_path / "m.mb").read_bytes() == mapbuffer.MapBuffer(dict(items)).tobytes()
    assert os.listdir(tmp_path) == ["m.mb"]
