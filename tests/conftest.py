"""Shared fixtures: the bagz golden files, running code in a subprocess
(so that a crash fails one test instead of killing the test runner), and
the helper modules the test files share (importable by name)."""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

DATA = pathlib.Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def golden_dir() -> pathlib.Path:
    """The folder of files written by bagz 0.3.8 (copied from shared/testdata)."""
    return DATA


@pytest.fixture(scope="session")
def golden_manifest() -> dict:
    """MANIFEST.json of the golden files, with hex records decoded to bytes."""
    manifest = json.loads((DATA / "MANIFEST.json").read_text())
    sets = {name: [bytes.fromhex(h) for h in hexes] for name, hexes in manifest["record_sets"].items()}
    for entry in manifest["files"].values():
        if "records" in entry:
            entry["expected"] = sets[entry["records"]]
        elif "records_hex" in entry:
            entry["expected"] = [bytes.fromhex(h) for h in entry["records_hex"]]
    return manifest


class SubprocessResult:
    def __init__(self, completed: subprocess.CompletedProcess):
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr

    def outcome(self) -> dict:
        """The JSON object the snippet printed last (see run_python)."""
        assert self.returncode == 0, (
            f"subprocess died with code {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )
        return json.loads(self.stdout.strip().splitlines()[-1])


_PRELUDE = '''
import json, sys, traceback
def report(fn):
    """Runs fn() and prints {"ok": repr} or {"error": type name, "message", "mro"}."""
    try:
        value = fn()
    except BaseException as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e),
                          "mro": [c.__name__ for c in type(e).__mro__]}))
    else:
        print(json.dumps({"ok": repr(value)}))
'''


@pytest.fixture
def run_python(tmp_path):
    """run_python(code, timeout=60) runs `code` in a fresh interpreter with
    cwd=tmp_path. The code may call report(fn) to print fn's outcome as JSON;
    SubprocessResult.outcome() parses it and fails the test if the process
    crashed (e.g. a segfault) instead of raising."""

    def run(code: str, timeout: float = 60) -> SubprocessResult:
        completed = subprocess.run(
            [sys.executable, "-c", _PRELUDE + textwrap.dedent(code)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
        return SubprocessResult(completed)

    return run


class _HelperModules(importlib.abc.MetaPathFinder):
    """Makes the helper modules of tests/ importable by name from every test
    folder, loaded when a test file first imports one: the suite runs with
    --import-mode=importlib, so tests/ is not on sys.path. Each lives in the
    folder of the tests that use it, or at tests/ when several folders do."""

    FOLDERS = {
        "arrow_helpers": "arrow", "beam_helpers": "beam", "beam_workers": "beam",
        "bombs": ".", "cli_helpers": ".", "crash_helpers": ".", "datasets_helpers": "datasets",
        "fault_campaign": ".", "killed_writers": "storage", "remote_helpers": ".", "remote_servers": ".",
        "syscall_trace": "core"}

    def find_spec(self, name: str, path: object = None, target: object = None):
        if path is None and name in self.FOLDERS:
            return importlib.util.spec_from_file_location(
                name, pathlib.Path(__file__).parent / self.FOLDERS[name] / f"{name}.py")
        return None


sys.meta_path.append(_HelperModules())


@pytest.fixture(params=[0o022, 0o027, 0o077, 0o002], ids=lambda mask: f"umask{mask:03o}")
def umask(request):
    """Runs the test under each of these umasks (the one set is the value)."""
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)
