"""Runs Python code in a child process under tests/core/syscall_trace.c (an
LD_PRELOAD library built here with the C compiler) and returns the fsync
and rename calls it made, in order: how the tests see what a durable write
does, since a power cut cannot be staged."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys

SOURCE = pathlib.Path(__file__).with_name("syscall_trace.c")


@dataclasses.dataclass(frozen=True)
class Call:
    """One successful call: "fsync" of `path`, or "rename" of `path` onto `to`."""

    name: str
    path: str
    to: str = ""


def build(folder: pathlib.Path) -> pathlib.Path:
    """Compiles the library into `folder`; the tests need a C compiler, as
    the engine's build does."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    assert compiler, "tests/core/syscall_trace.py needs a C compiler (cc or gcc)"
    library = folder / "syscall_trace.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(SOURCE), "-ldl"],
                   check=True, capture_output=True)
    return library


def run(library: pathlib.Path, code: str, log: pathlib.Path) -> list[Call]:
    """Runs `code` with `python -c` under the library; its calls, in order."""
    env = dict(os.environ, LD_PRELOAD=str(library), SACKLI_SYSCALL_LOG=str(log))
    # The child imports the same sackli as this process.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    log.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    calls = []
    for line in log.read_text().splitlines() if log.exists() else []:
        name, path, to = line.split("\t")
        calls.append(Call(name, path, to))
    return calls
