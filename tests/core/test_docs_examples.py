"""Every ```python block of README.md and of docs/**/*.md runs as written.

Each block runs in a fresh interpreter, in a fresh temporary working folder,
with a timeout. Then all of them run again in one folder, README first and
the pages in path order, as a reader trying every example in turn would: an
example must not trip on the files an earlier one left (use names of its
own, or overwrite=True where replacing is the point). An HTML comment on the
line before a block changes what runs:

    <!-- docs-test: continue -->       runs the block after the one before
                                       it on the same page, in one program
    <!-- docs-test: skip (reason) -->  does not run it; the reason is listed
    <!-- docs-test: needs (a, b) -->    runs it where modules a and b are
                                       installed (CI installs them), else
                                       skips it

The skipped blocks are pinned in SKIPPED below, so a new skip is a visible
change to this file. Signatures and other text that is not a program go in
blocks without a language (or ```text), which this test does not run.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 240
# Every block in one folder, one after another (Beam's take most of it).
ONE_FOLDER_TIMEOUT_SECONDS = 900

# (page, section, reason) of every block the pages mark to skip: only what
# cannot run on a test machine (real cloud buckets). Blocks that need a package
# CI installs apart (PyTorch, Grain) are marked `needs` instead.
SKIPPED = [
    ("docs/cache.md", "The read cache: remote bytes on local disk", "needs a bucket"),
    ("docs/cloud.md", "Cloud storage: `gs://` and `s3://`",
     "needs a GCS bucket and an S3 bucket"),
    ("docs/cloud.md", "A local bucket to try it on",
     "runs on the servers above: tests/storage/test_local_bucket_recipe.py"),
]

_MARK = re.compile(r"<!--\s*docs-test:\s*(continue|skip\s*\((?P<reason>[^)]*)\)"
                   r"|needs\s*\((?P<modules>[^)]*)\))\s*-->")


def pages() -> list[pathlib.Path]:
    """README.md, then every page under docs/, in path order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclasses.dataclass
class Program:
    """One or more blocks run together: the page, the first block's line and
    section, the code, and why it is skipped (None: it runs)."""

    page: str
    line: int
    section: str
    code: str
    skip: str | None = None
    needs: tuple[str, ...] = ()

    def missing(self) -> list[str]:
        """The modules it needs that are not installed here."""
        return [module for module in self.needs if importlib.util.find_spec(module) is None]

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line} ({self.section})"


def programs(page: str, text: str) -> list[Program]:
    """A page's python blocks, joined where marked `continue`."""
    found: list[Program] = []
    lines = text.splitlines()
    section = "(top)"
    mark = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        match = _MARK.fullmatch(line.strip())
        if match:
            mark = match
        elif line.lstrip().startswith("```"):
            fence = line.lstrip()
            indent = line[: len(line) - len(fence)]
            start = index + 1
            end = start
            while lines[end].strip() != "```":
                end += 1
            index = end + 1
            if fence.strip() != "```python":
                mark = None
                continue
            code = "\n".join(body[len(indent):] if body.startswith(indent) else body
                             for body in lines[start:end]) + "\n"
            if mark is not None and mark.group(1) == "continue":
                if not found:
                    raise ValueError(f"{page}:{start}: 'continue' without a block before it")
                found[-1].code += code
            else:
                reason = mark.group("reason") if mark is not None and mark.group("reason") else None
                needs = mark.group("modules") if mark is not None and mark.group("modules") else ""
                found.append(Program(page, start, section, code, reason,
                                     tuple(name.strip() for name in needs.split(",") if name.strip())))
            mark = None
            continue
        elif line.strip():
            mark = None  # a mark applies to the block right after it
        index += 1
    return found


PROGRAMS = [program
            for path in pages()
            for program in programs(path.relative_to(ROOT).as_posix(),
                                    path.read_text(encoding="utf-8"))]


def test_the_pages_have_python_blocks() -> None:
    readme = [program for program in PROGRAMS if program.page == "README.md"]
    assert len(readme) >= 1
    assert len(PROGRAMS) >= 20


def test_skipped_blocks_are_listed_with_their_reasons() -> None:
    skipped = [(program.page, program.section, program.skip)
               for program in PROGRAMS if program.skip]
    assert skipped == SKIPPED


def test_marks_sit_right_before_a_python_block() -> None:
    """A mark anywhere else would silently do nothing."""
    misplaced = []
    for path in pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if _MARK.fullmatch(line.strip()) and (
                    number + 1 >= len(lines) or lines[number + 1].strip() != "```python"):
                misplaced.append(f"{path.relative_to(ROOT)}:{number + 1}")
    assert misplaced == []


def test_readme_links_lead_somewhere() -> None:
    """The README is the package's long description and the repository's
    front page: its relative links (to docs/*.md, examples/) must exist.
    Links between docs pages are checked by `mkdocs build --strict`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text)
               if "://" not in link and not link.startswith("#")]
    assert targets
    assert [target for target in targets if not (ROOT / target).exists()] == []


# A requirement that names the `sackli` project: `sackli`, `sackli[arrow]`,
# `sackli==1.0` (quoted or not), but not `sackli-bagz` or `sackli_bagz-*.whl`.
_OTHER_PROJECT = re.compile(r"""^['"]?sackli(\[[^\]]*\])?([<>=!~;].*)?['"]?$""")


def _install_commands(text: str) -> list[str]:
    """What follows each `pip install` (or `uv pip install`, `pipx install`) in
    `text`, to the end of its line (a trailing backslash continues it)."""
    text = text.replace("\\\n", " ")
    return re.findall(r"(?:pip|pipx) install ([^\n`]*)", text)


def test_install_lines_name_the_distribution() -> None:
    """The distribution is sackli-bagz: `pip install sackli` would install
    another project (the upstream Säckli fork). Checked in the README, every
    docs page, the examples and the messages the package prints."""
    sources = [*pages(), *sorted((ROOT / "examples").rglob("*.py")),
               *sorted((ROOT / "sackli").rglob("*.py"))]
    found = [f"{path.relative_to(ROOT)}: pip install {command}"
             for path in sources
             for command in _install_commands(path.read_text(encoding="utf-8"))
             if any(_OTHER_PROJECT.match(word) for word in command.split())]
    assert found == []


def test_the_install_line_check_finds_the_other_project() -> None:
    lines = "pip install sackli\npip install 'sackli[arrow]'\npip install -U \"sackli==0.3\"\n"
    assert [command for command in _install_commands(lines)
            if any(_OTHER_PROJECT.match(word) for word in command.split())] == [
        "sackli", "'sackli[arrow]'", '-U "sackli==0.3"']
    fine = "pip install sackli-bagz 'sackli-bagz[arrow]' '.[arrow]' sackli_bagz-0.1.tar.gz\n"
    assert not any(_OTHER_PROJECT.match(word)
                   for command in _install_commands(fine) for word in command.split())


@pytest.mark.parametrize("module,page", [
    ("sackli", "sackli.md"), ("sackli.arrow", "arrow.md"), ("sackli.beam", "beam.md"),
    ("sackli.datasets", "datasets.md"), ("sackli.maps", "maps.md"),
])
def test_api_reference_lists_every_public_name(module: str, page: str) -> None:
    """docs/api/<page> names everything in the module's `__all__` (read from
    the source, which mkdocstrings documents), so a new public name needs
    its entry."""
    source = ROOT.joinpath(*module.split("."), "__init__.py").read_text(encoding="utf-8")
    public = next(ast.literal_eval(node.value) for node in ast.parse(source).body
                  if isinstance(node, ast.Assign)
                  and any(getattr(target, "id", None) == "__all__" for target in node.targets))
    text = (ROOT / "docs" / "api" / page).read_text(encoding="utf-8")
    # `::: module.name`, a `- name` line of a `members:` list, or a heading
    # written by hand (`module.name`, for what griffe cannot read).
    missing = [name for name in public if not re.search(
        rf"^(::: {re.escape(module)}\.{name}|\s+- {name}|#+ `{re.escape(module)}\.{name}`)\s*$",
        text, re.MULTILINE)]
    assert missing == []


@pytest.mark.parametrize("program", PROGRAMS, ids=[program.name for program in PROGRAMS])
def test_docs_block_runs(program: Program, tmp_path) -> None:
    if program.skip:
        pytest.skip(f"{program.name}: {program.skip}")
    if program.missing():
        pytest.skip(f"{program.name}: needs {', '.join(program.missing())}")
    completed = subprocess.run(
        [sys.executable, "-c", program.code], cwd=tmp_path, capture_output=True, text=True,
        timeout=TIMEOUT_SECONDS, env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    assert completed.returncode == 0, (
        f"{program.name} failed:\n{program.code}\n--- stdout\n{completed.stdout}\n"
        f"--- stderr\n{completed.stderr}")


# Runs programs one after another in one interpreter and one folder, each in a
# namespace of its own named __main__ with the argv of `python -c` (Beam
# parses it), the working folder restored after each; stops at the first
# that raises, naming it.
_ONE_FOLDER_DRIVER = """
import json, os, sys, traceback
folder = os.getcwd()
with open(sys.argv[1], encoding="utf-8") as listing:
    runnable = json.load(listing)
sys.argv = ["-c"]
for name, code in runnable:
    print(f"=== {name}", flush=True)
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except BaseException:
        traceback.print_exc()
        print(f"FAILED: {name}", file=sys.stderr, flush=True)
        sys.exit(1)
    finally:
        os.chdir(folder)
"""


def test_docs_blocks_run_in_one_folder(tmp_path) -> None:
    """The blocks that `test_docs_block_runs` runs, all in one folder in page
    order (README first): a reader who tries the examples one after another
    must not hit the files an earlier example left."""
    runnable = [(program.name, program.code) for program in PROGRAMS
                if not program.skip and not program.missing()]
    assert runnable[0][0].startswith("README.md:")
    listing = tmp_path / "programs.json"
    listing.write_text(json.dumps(runnable), encoding="utf-8")
    folder = tmp_path / "work"
    folder.mkdir()
    completed = subprocess.run(
        [sys.executable, "-c", _ONE_FOLDER_DRIVER, str(listing)], cwd=folder,
        capture_output=True, text=True, timeout=ONE_FOLDER_TIMEOUT_SECONDS,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    assert completed.returncode == 0, (
        f"--- stdout\n{completed.stdout[-20000:]}\n--- stderr\n{completed.stderr[-20000:]}")
