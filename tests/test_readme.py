"""Every ```python block of README.md runs as written.

Each block runs in a fresh interpreter, in a fresh temporary working folder,
with a timeout. An HTML comment on the line before a block changes that:

    <!-- readme-test: continue -->       runs the block after the one before
                                         it (same section), in one program
    <!-- readme-test: skip (reason) -->  does not run it; the reason is listed

The skipped blocks are pinned in SKIPPED below, so a new skip is a visible
change to this file.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
TIMEOUT_SECONDS = 180

# (section, reason) of every block the README marks to skip.
SKIPPED = [
    ("Data loaders", "needs PyTorch"),
    ("Cloud storage: `gs://` and `s3://`", "needs a GCS bucket and an S3 bucket"),
]

_MARK = re.compile(r"<!--\s*readme-test:\s*(continue|skip\s*\((?P<reason>[^)]*)\))\s*-->")


@dataclasses.dataclass
class Program:
    """One or more blocks run together: the first block's line and section,
    the code, and why it is skipped (None: it runs)."""

    line: int
    section: str
    code: str
    skip: str | None = None

    @property
    def name(self) -> str:
        return f"README.md:{self.line} ({self.section})"


def programs(text: str) -> list[Program]:
    """The README's python blocks, joined where marked `continue`."""
    found: list[Program] = []
    lines = text.splitlines()
    section = "(top)"
    mark = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        match = _MARK.fullmatch(line.strip())
        if match:
            mark = match
        elif line.startswith("```"):
            start = index + 1
            end = lines.index("```", start)
            index = end + 1
            if line.strip() != "```python":
                mark = None
                continue
            code = "\n".join(lines[start:end]) + "\n"
            if mark is not None and mark.group(1) == "continue":
                if not found or found[-1].section != section:
                    raise ValueError(f"README.md:{start}: 'continue' without a block before it "
                                     "in the same section")
                found[-1].code += code
            else:
                reason = mark.group("reason") if mark is not None and mark.group("reason") else None
                found.append(Program(start, section, code, reason))
            mark = None
            continue
        elif line.strip():
            mark = None  # a mark applies to the block right after it
        index += 1
    return found


PROGRAMS = programs(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks() -> None:
    assert len(PROGRAMS) >= 6


def test_skipped_blocks_are_listed_with_their_reasons() -> None:
    skipped = [(program.section, program.skip) for program in PROGRAMS if program.skip]
    assert skipped == SKIPPED


@pytest.mark.parametrize("program", PROGRAMS, ids=[program.name for program in PROGRAMS])
def test_readme_block_runs(program: Program, tmp_path) -> None:
    if program.skip:
        pytest.skip(f"{program.name}: {program.skip}")
    completed = subprocess.run(
        [sys.executable, "-c", program.code], cwd=tmp_path, capture_output=True, text=True,
        timeout=TIMEOUT_SECONDS, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    assert completed.returncode == 0, (
        f"{program.name} failed:\n{program.code}\n--- stdout\n{completed.stdout}\n"
        f"--- stderr\n{completed.stderr}")
