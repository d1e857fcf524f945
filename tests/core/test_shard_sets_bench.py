"""The shard-set benchmark's harness (benchmarks/shard_sets.py) on two tiny
sets: every implementation's process runs, checks the records it read, and
fills its rows. No timings are asserted: the benchmark measures speed, this
checks that its rows are real."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "shard_sets.py"


def test_tiny_run(tmp_path):
    out = tmp_path / "out.json"
    done = subprocess.run([sys.executable, "-P", str(SCRIPT), "--shards", "20,50", "--repeat", "1",
                           "--json", str(out), "--folder", str(tmp_path / "sets")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["header"][1] == "# command: python benchmarks/shard_sets.py --shards 20,50 --repeat 1 " \
        f"--json {out} --folder {tmp_path / 'sets'}"
    rows = result["rows"]
    assert [(row["shards"], row["workload"]) for row in rows] == [
        (n, w) for n in (20, 50) for w in ("open+len", "first reads", "batch")]
    for row in rows:
        for implementation in ("sackli", "bagz"):
            assert row[implementation + " note"] == "", row
            assert row[implementation] > 0, row
    assert "| 50 | first reads |" in done.stdout
    assert not (tmp_path / "sets" / "20").exists()  # each set is deleted after its rows
