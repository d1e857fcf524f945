"""The command line at the limits (issue 49 §3): running out of memory, or a
record over the cap, is one `sackli: error:` line, never a traceback or an
abort; names from files (field names, folder names, paths) are printed with
their control characters escaped, as records are."""

from __future__ import annotations

import json
import os

import pytest

import sackli
from sackli import datasets

from bombs import GiB, run_limited, unsized_bomb, write_bag
from cli_helpers import fails, ok, sackli_cli

# A terminal title change and a screen clear.
HOSTILE = "t\x1b]0;owned\x07\x1b[2J"
ESCAPED = "t\\x1b]0;owned\\x07\\x1b[2J"


def test_get_of_a_bomb_under_a_memory_limit_is_one_error_line(tmp_path):
    write_bag(tmp_path / "bomb.bagz", [unsized_bomb(3 * GiB)])
    result = run_limited("", 768 << 20, tmp_path, command=["sackli", "get", "bomb.bagz", "0"])
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "Traceback" not in stderr
    assert stderr.startswith("sackli: error: bomb.bagz: record 0 (byte offset 0): out of memory")
    assert len(stderr.splitlines()) == 1


def test_a_hostile_field_name_is_escaped_by_head_info_and_schema(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", {HOSTILE: "utf8"}) as writer:
        writer.append({HOSTILE: "v"})
    for command in (["head", "ds"], ["info", "ds"], ["schema", "ds"]):
        result = sackli_cli(*command, cwd=tmp_path)
        assert result.returncode == 0, result.stderr.decode()
        out = result.stdout.decode()
        assert "\x1b" not in out and "\x07" not in out, command
        assert ESCAPED in out, command
    # JSON escapes them itself, and keeps the name.
    assert json.loads(ok("info", "ds", "--json", cwd=tmp_path))["fields"][0]["name"] == HOSTILE


def test_a_hostile_path_is_escaped_in_the_error_line(tmp_path):
    line = fails("info", f"{HOSTILE}.bag", cwd=tmp_path)
    assert "\x1b" not in line and ESCAPED in line


def test_a_hostile_unfinished_write_is_escaped_in_info_notes(tmp_path):
    writer = sackli.Writer(tmp_path / f"{HOSTILE}.bag")
    writer.write(b"record")
    writer.flush()
    with pytest.warns(ResourceWarning):
        del writer  # dropped without close(): its hidden folder stays
    assert any(HOSTILE in name for name in os.listdir(tmp_path))
    result = sackli_cli("info", f"{HOSTILE}.bag", cwd=tmp_path)
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "Traceback" not in stderr and "\x1b" not in stderr and "\x07" not in stderr
    assert "sackli: error:" in stderr and ESCAPED in stderr
