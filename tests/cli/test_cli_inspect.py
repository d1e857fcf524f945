"""`sackli info` (sackli/cli/_inspect.py)."""

from __future__ import annotations

import json
import os

from cli_helpers import (  # registered by conftest.py
    ok, write_bag, bag,
)


# --- info ---------------------------------------------------------------------


def test_info_text_and_json(bag) -> None:
    text = ok("info", "small.bagz", cwd=bag).decode()
    payload = os.path.getsize(bag / "small.bagz") - 8 * 5
    assert text.splitlines() == [
        "spec:             small.bagz",
        "shards:           1 (records per shard: 5)",
        "records:          5",
        f"payload bytes:    {payload} (as stored)",
        "limits bytes:     40",
        "compression:      zstd",
        "rows:             none (raw records: no schema file)",
        "limits placement: TAIL",
        "layout:           CONCATENATED",
        "record size:      min 0, median 5, max 10 (bytes, decoded)",
        "size histogram:",
        "              0 B           1  ####################",
        "            2-3 B           1  ####################",
        "            4-7 B           2  ########################################",
        "           8-15 B           1  ####################",
    ]
    facts = json.loads(ok("info", "small.bagz", "--json", cwd=bag))
    assert facts["record_size"] == {"min": 0, "median": 5, "max": 10}
    assert facts["shards"] == [{"path": "small.bagz", "records": 5}]
    assert (facts["records"], facts["payload_bytes"], facts["limits_bytes"]) == (5, payload, 40)
    assert facts["size_histogram"][0] == {"min": 0, "max": 0, "count": 1}


def test_info_of_mixed_shards(tmp_path) -> None:
    write_bag(tmp_path / "a.bag", [b"xy", b"xyzw"])
    write_bag(tmp_path / "b.bagz", [])
    facts = json.loads(ok("info", "a.bag,b.bagz", "--json", cwd=tmp_path))
    assert facts["compression"] == "mixed (none: 1 files, zstd: 1 files)"
    assert facts["record_size"] == {"min": 2, "median": 3.0, "max": 4}
    assert facts["payload_bytes"] == 6
