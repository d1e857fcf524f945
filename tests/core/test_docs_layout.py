"""The layout section of docs/development.md mirrors the tree: every
folder of the repository, of the Python packages, of the engine's parts
and bindings, and of the test suite is named there (as `path/`), and
every folder it names exists."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "development.md"

# Made by builds, virtualenvs and tools, not part of the tree.
_NOT_TREE = re.compile(r"^(\.|_|build$|dist$|site$|venv|.*\.egg-info$)")
# Folders whose sub-folders the section names one by one.
_WALKED = ["sackli", "native", "native/python", "tests", "fuzz"]


def _layout_section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("## Repository layout")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _folders() -> list[str]:
    """The folders the section must name."""
    found = [p.name for p in ROOT.iterdir() if p.is_dir() and not _NOT_TREE.match(p.name)]
    for parent in _WALKED:
        for path in (ROOT / parent).iterdir():
            name = f"{parent}/{path.name}"
            if path.is_dir() and path.name != "__pycache__" and not path.name.startswith("."):
                found.append(name)
                if parent == "native" and (path / "tests").is_dir():
                    found.append(f"{name}/tests")
    return sorted(found)


def test_every_folder_is_in_the_layout_section() -> None:
    section = _layout_section()
    missing = [f for f in _folders() if f"`{f}/`" not in section]
    assert not missing, f"docs/development.md, Repository layout, does not name: {missing}"


def test_every_folder_the_section_names_exists() -> None:
    named = re.findall(r"`([A-Za-z0-9_.][A-Za-z0-9_./]*)/`", _layout_section())
    absent = sorted({n for n in named if "*" not in n and not (ROOT / n).is_dir()})
    assert not absent, f"docs/development.md, Repository layout, names folders that do not exist: {absent}"


def test_the_layout_section_walks_the_packages_and_parts() -> None:
    # A guard on the test itself: the tree has these, so the walk must find them.
    folders = _folders()
    for expected in ("sackli/_storage", "native/bagz", "native/python/bagz", "tests/core", "fuzz"):
        assert expected in folders
