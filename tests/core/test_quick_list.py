"""tests/quick.txt, the subset `bash scripts/test.sh --quick` runs, names
only what exists: a renamed or deleted test file makes this fail here,
not the quick run (which would then collect less than it says)."""

from __future__ import annotations

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _entries() -> list[str]:
    lines = (ROOT / "tests" / "quick.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_every_entry_of_the_quick_list_exists():
    entries = _entries()
    assert entries
    folders = []
    for entry in entries:
        ignored = entry.removeprefix("--ignore=")
        path = ROOT / ignored
        assert path.exists(), f"tests/quick.txt names {ignored}, which does not exist"
        if entry.startswith("--ignore="):
            # An ignored file is of a folder the list runs.
            assert any(path.is_relative_to(folder) for folder in folders), entry
        else:
            assert not entry.startswith("-"), f"tests/quick.txt: {entry!r} is not a path"
            if path.is_dir():
                folders.append(path)


def test_the_quick_run_reads_the_list():
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "tests/quick.txt" in script and '"--quick"' in script
