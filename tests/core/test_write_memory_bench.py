"""The writer memory benchmark's harness (benchmarks/write_memory.py) on a tiny
configuration: every case runs in its subprocess and reports a peak; sackli
and bagz write files of the same size (the same bytes: test_writer_memory
checks them). No timings are asserted: the benchmark measures, this checks
that its rows are real."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "write_memory.py"


def test_tiny_run(tmp_path) -> None:
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, "-P", str(SCRIPT), "--sizes", "1KiB", "--records", "50",
                           "--parallelism", "2", "--repeat", "1", "--folder", str(tmp_path), "--json", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert any(line.startswith("# machine: ") for line in result["header"])
    assert any(line.startswith("# command: python benchmarks/write_memory.py --sizes 1KiB") for line in result["header"])
    rows = {row["library"]: row for row in result["rows"]}
    assert set(rows) == {"bagz", "sackli", "zstd"}
    assert rows["sackli"]["max_parallelism"] == 2 and rows["sackli"]["records"] == 50
    for name in ("bagz", "sackli"):
        assert rows[name]["peak_mib"] > 0 and rows[name]["extra_mib"] >= 0 and rows[name]["seconds"] > 0
    # sackli's frames carry zstd's 4-byte content checksum; bagz's do not.
    assert rows["sackli"]["file_bytes"] == rows["bagz"]["file_bytes"] + 50 * 4 > 50 * 12
    assert "| 1 KiB | 50 | sackli | 2 |" in done.stdout
    assert list(tmp_path.iterdir()) == [out]  # the bags were deleted
