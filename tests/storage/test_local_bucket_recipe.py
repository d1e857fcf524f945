"""docs/cloud.md's "A local bucket to try it on" works as written: its
shell block starts moto and gcp-storage-emulator and points the SDKs at
them, then its Python block, run in that shell, writes and reads a set on
each. Both blocks are taken from the page, so the test follows it."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import socket
import subprocess
import sys

import pytest

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cloud.md"
SECTION = "### A local bucket to try it on"


def _blocks() -> tuple[str, str]:
    """The section's ```bash and ```python blocks."""
    text = PAGE.read_text()
    section = text[text.index(SECTION):]
    section = section[: section.find("\n#", len(SECTION))]
    bash = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    python = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert bash and python, f"{PAGE}: {SECTION!r} lost its blocks"
    return bash[1], python[1]


def _free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_the_local_bucket_recipe_runs_as_written(tmp_path):
    shell, program = _blocks()
    ports = [int(port) for port in re.findall(r"(?:-p|--port) (\d+)", shell)]
    assert ports == [5000, 9023]
    if not all(_free(port) for port in ports):
        pytest.fail(f"ports {ports} are taken on this machine: the recipe cannot run here")
    (tmp_path / "try.py").write_text(program)
    # The scripts of the interpreter running the tests (moto_server,
    # gcp-storage-emulator) first on PATH, as in an activated environment.
    scripts = pathlib.Path(sys.executable).parent
    # The servers are stopped however the script ends.
    script = (f"set -e\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n"
              f"export PATH={shlex.quote(str(scripts))}:$PATH\n{shell}\n"
              f"{shlex.quote(sys.executable)} try.py\n")
    ran = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONSAFEPATH": "1"})
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "s3://my-bucket/demo@2.bagz 10 b'record 3'", "gs://my-bucket/demo@2.bagz 10 b'record 3'"]
