"""sackli.__version__ (written once, in sackli/_version.py, and read from there
by the build) and sackli.zstd_version()."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import subprocess
import sys

import sackli

ROOT = pathlib.Path(__file__).resolve().parent.parent


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
