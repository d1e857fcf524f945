"""The import contracts (pyproject.toml, [tool.importlinter]) hold for the
source tree: no import cycles, the packages' layers, and no package
importing another's private module outside its declared interface (see
scripts/import_contracts.py).

The checkout's `sackli/` is analysed, not the installed package (whose
sources are the same): import-linter finds `sackli` from the working
folder, the repository's root, and reads its sources without importing
them.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

# import-linter (the test extra) needs Python 3.11; the sources it checks
# are the same for every Python.
pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="import-linter needs Python 3.11")

_LINT = ("import sys\n"
         "from importlinter.cli import lint_imports\n"
         "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n")


def _repository_root() -> pathlib.Path:
    """The folder holding pyproject.toml (and sackli/), above this file."""
    for folder in pathlib.Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file() and (folder / "sackli").is_dir():
            return folder
    raise AssertionError(f"no repository root above {__file__}")


def test_import_contracts_are_kept() -> None:
    environment = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    result = subprocess.run([sys.executable, "-c", _LINT], cwd=_repository_root(),
                            env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"broken import contracts:\n{result.stdout}\n{result.stderr}"
    assert "Contracts: 3 kept, 0 broken." in result.stdout, result.stdout
