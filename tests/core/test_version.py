"""sackli.__version__ (written once, in sackli/_version.py, and read from there
by the build), sackli.zstd_version(), and the zstd compiled in from
third_party/zstd."""

from __future__ import annotations

import hashlib
import importlib.metadata
import pathlib
import re
import subprocess
import sys

import pytest

import sackli

ROOT = pathlib.Path(__file__).resolve().parents[2]
ZSTD = ROOT / "third_party" / "zstd"
# The release in third_party/zstd (third_party/zstd/VERSION.md).
ZSTD_VERSION = "1.5.7"


def test_version_is_the_installed_distributions() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)*", sackli.__version__), sackli.__version__
    assert importlib.metadata.version("sackli-bagz") == sackli.__version__


def test_version_is_written_once() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert 'dynamic = ["version"]' in project
    assert not re.search(r"^version\s*=", project, re.MULTILINE)
    assert 'input = "sackli/_version.py"' in pyproject
    assert f'__version__ = "{sackli.__version__}"' in (ROOT / "sackli" / "_version.py").read_text()


def test_cli_reports_the_version() -> None:
    completed = subprocess.run([sys.executable, "-m", "sackli", "--version"],
                               capture_output=True, text=True, check=True)
    assert completed.stdout.split() == ["sackli", sackli.__version__]


def test_zstd_version_is_the_engines() -> None:
    version = sackli.zstd_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    assert tuple(int(part) for part in version.split(".")) >= (1, 4, 0)
    assert "zstd_version" in sackli.__all__
    assert sackli.zstd_version.__doc__


def test_the_engine_runs_the_compiled_in_zstd() -> None:
    # Every build compiles in third_party/zstd (only -DSACKLI_SYSTEM_ZSTD=ON
    # links the system's, and nothing here builds that way).
    assert sackli.zstd_version() == ZSTD_VERSION


@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
def test_the_engine_loads_no_shared_libzstd() -> None:
    code = ("import sackli._engine, sys; "
            "sys.stdout.write(open('/proc/self/maps').read())")
    maps = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout
    assert "sackli/_engine" in maps
    assert "libzstd" not in maps, [line for line in maps.splitlines() if "libzstd" in line]


def test_third_party_zstd_is_the_release_noted() -> None:
    listed = {}
    for line in (ZSTD / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        listed[name] = digest
    assert set(listed) == {"zstd.c", "zstd.h", "zdict.h", "zstd_errors.h", "LICENSE", "COPYING"}
    for name, digest in listed.items():
        assert hashlib.sha256((ZSTD / name).read_bytes()).hexdigest() == digest, name
        assert digest in (ZSTD / "VERSION.md").read_text(), name
    header = (ZSTD / "zstd.h").read_text()
    major, minor, release = ZSTD_VERSION.split(".")
    for part, value in (("MAJOR", major), ("MINOR", minor), ("RELEASE", release)):
        assert re.search(rf"^#define ZSTD_VERSION_{part}\s+{value}$", header, re.MULTILINE), part
