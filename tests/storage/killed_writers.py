"""A shard-set writer killed with SIGKILL at a chosen step of its publish on
a bucket (sackli/_bucket_journal.py): no clean-up of its runs, as after a
crash or the OOM killer. Used by the recover and clean tests."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import sackli

# Each kill point: the code the child runs before writing, patching one
# step so that the process kills itself when it is reached.
_KILLER = """
import os, signal
import sackli._bucket_journal as journal, sackli._storage as storage
import sackli._storage._staged as staged

def kill_at(module, name, when):
    original, calls = getattr(module, name), [0]
    def call(*args, **kwargs):
        calls[0] += 1
        if when(calls[0], *args):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    setattr(module, name, call)
"""
KILL_POINTS = {
    "first upload": "kill_at(staged, '_open_upload', lambda n, url: n == 1)",
    "middle upload": "kill_at(staged, '_open_upload', lambda n, url: n == 3)",
    "schema": "kill_at(journal, 'write_object', lambda n, url, *_: 'companion.' in url)",
    "manifest": "kill_at(storage, 'write_object', lambda n, url, *_: url.endswith('.sackli_set'))",
    "copy 1": "kill_at(journal, 'copy_object', lambda n, *_: n == 1)",
    "copy 3": "kill_at(journal, 'copy_object', lambda n, *_: n == 3)",
    "final manifest": "kill_at(storage, 'write_object', "
                      "lambda n, url, *_: url.endswith('.sackli_set') and n > 1)",
    "clean-up": "kill_at(journal, 'remove_staging', lambda n, *_: True)",
}
# Where the publish was decided (the manifest says "publishing").
FORWARD = {"copy 1", "copy 3", "final manifest", "clean-up"}


def killed_writer(kill_point: str, code: str) -> None:
    """Runs `code` in a child that kills itself at `kill_point`."""
    package_parent = str(pathlib.Path(sackli.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": package_parent}
    imports = "import sackli" + (", sackli.arrow, pyarrow as pa\n" if "pa." in code else "\n")
    script = (_KILLER + KILL_POINTS[kill_point] + "\n" + imports + textwrap.dedent(code)
              + "\nprint('finished')\n")
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == -9, (child.returncode, child.stdout, child.stderr)


