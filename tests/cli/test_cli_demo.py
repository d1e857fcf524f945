"""`sackli demo` (sackli/cli/_demo.py)."""

from __future__ import annotations

from cli_helpers import (  # registered by conftest.py
    sackli_cli,
)


# --- demo ---------------------------------------------------------------------


def test_demo_runs(tmp_path) -> None:
    result = sackli_cli("demo", "--dir", "d", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert "converted 2000 records from animals.jsonl to 4 shards" in out
    assert ("global index 500 (shard 1, record 0): zoo-00001-of-00004.bagz: record 0 is corrupt: "
            "not a zstd frame (byte offset 0)") in out
    assert "log.bag: recovered 100 record(s)\n" in out
    assert out.endswith("That was sackli. Try `sackli COMMAND --help` for each command's options.\n")
    again = sackli_cli("demo", "--dir", "d", cwd=tmp_path)  # the same folder again
    assert again.returncode == 0, again.stderr.decode()
    assert again.stdout.decode().replace("\n", "") == out.replace("\n", "")
