"""`sackli info`, `verify` and `get` on mapbuffer map files (.mb, .im;
sackli/cli/_maps.py): maps written by the real `mapbuffer`, damaged maps
(exit status and the line naming the file and key), and maps on gs:// and
s3:// (the local servers of remote_helpers)."""

from __future__ import annotations

import json
import struct

import mapbuffer
import pytest

from sackli.cli import main
from cli_helpers import fails, ok, sackli_cli  # registered by conftest.py
from remote_helpers import remote, servers  # noqa: F401  (fixtures, loaded through conftest.py)

DATA = {key * 7: b"value %d" % key for key in range(200)}
HEADER, ENTRY = 16, 16


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def maps(tmp_path):
    (tmp_path / "plain.mb").write_bytes(mapbuffer.MapBuffer(DATA).tobytes())
    (tmp_path / "gz.mb").write_bytes(mapbuffer.MapBuffer(DATA, compress="gzip").tobytes())
    (tmp_path / "ints.im").write_bytes(mapbuffer.IntMap({5: 25, 1: 1, 9: 81}).tobytes())
    return tmp_path


def test_info_of_a_mapbuffer(maps, capsys) -> None:
    status, out, _ = run(capsys, "info", str(maps / "gz.mb"), "--json")
    facts = json.loads(out)
    size = len((maps / "gz.mb").read_bytes())
    assert status == 0
    assert facts["kind"] == "MapBuffer" and facts["format_version"] == 1
    assert facts["compression"] == "gzip"
    assert facts["keys"] == 200 and facts["key_range"] == {"min": 0, "max": 199 * 7}
    assert facts["file_bytes"] == size
    assert facts["index_bytes"] == 200 * ENTRY
    assert facts["value_bytes"] == size - HEADER - 200 * ENTRY
    assert facts["value_size"]["min"] > 0 and facts["value_size"]["max"] < 60


def test_info_text_and_intmap(maps, capsys) -> None:
    status, out, _ = run(capsys, "info", str(maps / "plain.mb"))
    assert status == 0
    lines = dict(line.split(":", 1) for line in out.splitlines())
    assert lines["compression"].strip() == "none"
    # "value 0" .. "value 199": 10 of 7 bytes, 90 of 8, 100 of 9, stored as they are.
    assert lines["value size"].strip() == "min 7, median 8.5, max 9 (bytes, as stored)"
    status, out, _ = run(capsys, "info", str(maps / "ints.im"), "--json")
    facts = json.loads(out)
    assert (status, facts["kind"], facts["keys"], facts["key_range"]) == (
        0, "IntMap", 3, {"min": 1, "max": 9})
    assert "compression" not in facts


def test_get_prints_a_value_in_each_format(maps, capsys) -> None:
    assert run(capsys, "get", str(maps / "gz.mb"), "14") == (0, "value 2\n", "")
    assert run(capsys, "get", str(maps / "plain.mb"), "14", "--format", "json") == (
        0, '"value 2"\n', "")
    assert run(capsys, "get", str(maps / "ints.im"), "9") == (0, "81\n", "")
    assert run(capsys, "get", str(maps / "ints.im"), "9", "--format", "hex") == (
        0, "5100000000000000\n", "")


def test_get_raw_through_the_console_script(maps) -> None:
    assert ok("get", "gz.mb", "1393", "--format", "raw", cwd=maps) == b"value 199"


def test_get_of_a_missing_key(maps) -> None:
    # A key not in the map is a wrong argument: status 2.
    assert fails("get", "plain.mb", "15", cwd=maps, status=2) == (
        "sackli get: error: plain.mb: key 15 not found (see 'sackli get --help')")
    assert fails("get", "plain.mb", "-1", cwd=maps, status=2) == (
        "sackli get: error: plain.mb: key -1 not found (see 'sackli get --help')")


def test_missing_map_file(maps) -> None:
    assert fails("info", "absent.mb", cwd=maps).startswith("sackli: error: absent.mb")


def test_verify_a_sound_map(maps, capsys) -> None:
    path = str(maps / "gz.mb")
    assert run(capsys, "verify", path) == (
        0, f"verify: OK, 200 keys in {path} (MapBuffer, every value checked)\n", "")
    path = str(maps / "ints.im")
    assert run(capsys, "verify", path) == (
        0, f"verify: OK, 3 keys in {path} (IntMap, index checked)\n", "")


def position_of(data: bytes, key: int) -> int:
    count = struct.unpack_from("<I", data, 12)[0]
    for position in range(count):
        if struct.unpack_from("<Q", data, HEADER + ENTRY * position)[0] == key:
            return position
    raise KeyError(key)


def value_offset(data: bytes, key: int) -> int:
    return struct.unpack_from("<Q", data, HEADER + ENTRY * position_of(data, key) + 8)[0]


def test_verify_names_every_crc_mismatch(maps) -> None:
    path = maps / "plain.mb"
    data = bytearray(path.read_bytes())
    for key in (21, 700):
        data[value_offset(data, key)] ^= 0x20  # "value" -> "Value"
    path.write_bytes(data)
    result = ok_or_status("verify", "plain.mb", cwd=maps)
    lines = result.splitlines()
    assert len(lines) == 3
    for line, key in zip(sorted(lines[:2], key=lambda line: " 700:" in line), (21, 700)):
        assert line.startswith(f"plain.mb: value of key {key}: crc32c mismatch")
        assert line.endswith(f"(byte offset {value_offset(data, key)})")
    assert lines[2] == "verify: 2 problem(s) in plain.mb"


def ok_or_status(*args: str, cwd, status: int = 1) -> str:
    """The stdout of a command that exits with `status` and prints nothing on stderr."""
    result = sackli_cli(*args, cwd=cwd)
    assert (result.returncode, result.stderr) == (status, b""), result.stderr.decode()
    return result.stdout.decode()


def test_verify_finds_a_value_that_does_not_decompress(tmp_path, capsys) -> None:
    # Format 0 has no crc32c: only decoding finds the damage.
    data = bytearray(mapbuffer.MapBuffer(DATA, compress="gzip", compute_crc=False).tobytes())
    data[value_offset(data, 7) + 12] ^= 0xFF  # inside the deflate stream
    (tmp_path / "v0.mb").write_bytes(data)
    status, out, _ = run(capsys, "verify", str(tmp_path / "v0.mb"))
    assert status == 1
    assert f"v0.mb: value of key 7: does not decompress (gzip:" in out
    assert out.splitlines()[-1] == f"verify: 1 problem(s) in {tmp_path / 'v0.mb'}"


def test_verify_reports_offsets_out_of_order_and_fail_fast(maps, capsys) -> None:
    path = maps / "plain.mb"
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, HEADER + ENTRY * 3 + 8, len(data) + 100)  # past the end
    path.write_bytes(data)
    status, out, _ = run(capsys, "verify", str(path))
    assert status == 1
    lines = out.splitlines()
    assert str(path) in lines[0] and "offset" in lines[0]
    key = struct.unpack_from("<Q", data, HEADER + ENTRY * 3)[0]
    assert any(f"key {key}" in line for line in lines[1:-1])
    assert lines[-1] == f"verify: {len(lines) - 1} problem(s) in {path}"
    status, out, _ = run(capsys, "verify", str(path), "--fail-fast")
    assert (status, out.splitlines()[1:]) == (1, ["verify: stopped at the first problem (--fail-fast)"])


def test_verify_reports_keys_out_of_order_in_an_intmap(maps, capsys) -> None:
    path = maps / "ints.im"
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 10, 1000)  # the root key, larger than its right child
    path.write_bytes(data)
    status, out, _ = run(capsys, "verify", str(path))
    assert status == 1
    assert str(path) in out.splitlines()[0] and "order" in out.splitlines()[0]


@pytest.mark.parametrize("damage", ["magic", "truncated"])
def test_verify_and_info_of_what_is_not_a_map(maps, damage) -> None:
    path = maps / "plain.mb"
    data = path.read_bytes()
    path.write_bytes(b"notamap" + data[7:] if damage == "magic" else data[:HEADER + 40])
    lines = ok_or_status("verify", "plain.mb", cwd=maps).splitlines()
    assert lines[0].startswith("plain.mb cannot be opened: plain.mb: ")
    assert lines[-1] == "verify: 1 problem(s) in plain.mb"
    assert fails("info", "plain.mb", cwd=maps).startswith("sackli: error: plain.mb: ")
    assert fails("get", "plain.mb", "7", cwd=maps).startswith("sackli: error: plain.mb: ")


def test_get_of_a_damaged_value_names_the_key(maps) -> None:
    path = maps / "plain.mb"
    data = bytearray(path.read_bytes())
    data[value_offset(data, 21)] ^= 0x20
    path.write_bytes(data)
    assert fails("get", "plain.mb", "21", cwd=maps).startswith(
        "sackli: error: plain.mb: value of key 21: crc32c mismatch")
    assert ok("get", "plain.mb", "28", cwd=maps) == b"value 4\n"


def test_remote_maps(remote, capsys) -> None:  # noqa: F811
    remote.put("m.mb", mapbuffer.MapBuffer(DATA, compress="zstd").tobytes())
    remote.put("i.im", mapbuffer.IntMap({3: 4}).tobytes())
    url = remote.url("m.mb")
    status, out, _ = run(capsys, "info", url, "--json")
    assert (status, json.loads(out)["keys"], json.loads(out)["compression"]) == (0, 200, "zstd")
    assert run(capsys, "get", url, "21") == (0, "value 3\n", "")
    assert run(capsys, "get", remote.url("i.im"), "3") == (0, "4\n", "")
    remote.proxy.reset_counts()
    assert run(capsys, "verify", url) == (
        0, f"verify: OK, 200 keys in {url} (MapBuffer, every value checked)\n", "")
    # The size, header and index, then the values in a coalesced GET or two.
    assert remote.proxy.counts["GET"] <= 4, remote.proxy.counts


def test_remote_damaged_map(remote, capsys) -> None:  # noqa: F811
    data = bytearray(mapbuffer.MapBuffer(DATA).tobytes())
    data[value_offset(data, 70)] ^= 0x20
    remote.put("d.mb", bytes(data))
    url = remote.url("d.mb")
    status, out, _ = run(capsys, "verify", url)
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"{url}: value of key 70: crc32c mismatch")
    assert lines[0].endswith(f"(byte offset {value_offset(data, 70)})")
    assert lines[1:] == [f"verify: 1 problem(s) in {url}"]
