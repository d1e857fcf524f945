"""Killing writers mid-write, for the tests of interrupted writes: a child
process that writes, prints "ready" once enough has reached the disk, and
waits; the test kills it with SIGKILL, as a crash or the OOM killer would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import sackli


def child_env() -> dict[str, str]:
    """The environment of a child that imports this sackli (the tree under
    test, first on its path)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(sackli.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def kill_when_ready(code: str, argument: str, folder) -> None:
    """Runs `python -c code argument` in `folder`, waits for its "ready"
    line, then kills it with SIGKILL."""
    child = subprocess.Popen([sys.executable, "-c", code, argument], cwd=folder,
                             stdout=subprocess.PIPE, env=child_env())
    try:
        assert child.stdout.readline().strip() == b"ready"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()


def sackli_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    """`python -m sackli ARGS` in `cwd`, its output captured as text."""
    return subprocess.run([sys.executable, "-m", "sackli", *args], cwd=cwd, env=child_env(),
                          capture_output=True, text=True, timeout=120)
