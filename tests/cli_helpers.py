"""What the `sackli` command-line tests share: running the console script
(`sackli_cli`, `ok`, `fails`), small bags (`write_bag`, the `bag` fixture,
`_corrupt_set`) and the TFRecord spec in plain Python.

Loaded by conftest.py as the module `cli_helpers` (the tests are not a
package: pytest runs them with --import-mode=importlib)."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import struct
import subprocess
import sys

import pytest

import sackli


def _load_spec_module():
    path = pathlib.Path(__file__).with_name("tfrecord_spec.py")
    spec = importlib.util.spec_from_file_location("tfrecord_spec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The TFRecord spec in plain Python (tests are not importable as a package).
tfrecord_spec = _load_spec_module()


RECORDS = [b"alpha", b"", b"caf\xc3\xa9", b"line\nbreak", b"\xff\xfe"]


def sackli_cli(*args: str, cwd, module: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "sackli"] if module else ["sackli"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, timeout=60)


def ok(*args: str, cwd, module: bool = False) -> bytes:
    result = sackli_cli(*args, cwd=cwd, module=module)
    assert (result.returncode, result.stderr) == (0, b""), result.stderr.decode()
    return result.stdout


def fails(*args: str, cwd, status: int = 1, module: bool = False) -> str:
    """Runs a failing command; returns its one stderr line."""
    result = sackli_cli(*args, cwd=cwd, module=module)
    assert result.returncode == status
    lines = result.stderr.decode().splitlines()
    assert "Traceback" not in result.stderr.decode()
    return lines[-1]


def write_bag(path, records, **options) -> None:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)


@pytest.fixture
def bag(tmp_path):
    write_bag(tmp_path / "small.bagz", RECORDS)
    return tmp_path


def _corrupt_set(folder):
    """concat@3.bag: shard 0 fine, shard 1 with non-monotonic limits at record 1 and a
    bad zstd... (raw bag: limits only), shard 2 truncated."""
    for shard in range(3):
        write_bag(folder / f"c-{shard:05d}-of-00003.bag", [b"abc", b"de", b"fghij"])
    shard1 = folder / "c-00001-of-00003.bag"
    data = shard1.read_bytes()
    shard1.write_bytes(data[:10] + struct.pack("<QQQ", 3, 1, 10))  # limit 1 < limit 0
    shard2 = folder / "c-00002-of-00003.bag"
    shard2.write_bytes(shard2.read_bytes()[:-3])
    return folder


def on_terminal(*args: str, cwd, stdout_on_terminal: bool = False,
                feed=None, module: bool = False) -> tuple[int, bytes, str]:
    """Runs the CLI with stderr (and optionally stdout) on a pseudo-terminal
    of 100 columns; `feed(stdin)` writes standard input (then closed).
    Returns (status, stdout, what the terminal showed)."""
    import fcntl
    import pty
    import termios
    import threading

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        [*([sys.executable, "-m", "sackli"] if module else ["sackli"]), *args], cwd=cwd, stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
        stderr=slave, stdout=slave if stdout_on_terminal else subprocess.PIPE)
    os.close(slave)
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO once the process has closed the terminal
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    if feed:
        feed(process.stdin)  # communicate() closes it
    stdout, _ = process.communicate(timeout=60)
    reader.join(timeout=10)
    os.close(master)
    return process.returncode, stdout or b"", b"".join(shown).decode("utf-8", "replace")
