"""The engine's own C++ tests (native/*/tests/, GoogleTest), built with CMake
and Ninja into build/native-tests (kept between runs, so only changed files
recompile) and run; a failing C++ test fails this test with its output.
scripts/dev_tools.sh provides cmake, ninja and GoogleTest (libgtest-dev)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "native-tests"
TOOLS_HINT = "cmake, ninja and GoogleTest are needed: bash scripts/dev_tools.sh installs them"


def _run(command: list[str], what: str, timeout: float) -> str:
    completed = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if completed.returncode != 0:
        pytest.fail(f"{what} failed (exit code {completed.returncode}):\n"
                    f"$ {' '.join(command)}\n{completed.stdout[-20000:]}", pytrace=False)
    return completed.stdout


@pytest.fixture(scope="module")
def engine_tests() -> pathlib.Path:
    """The built test binary."""
    cmake, ninja = shutil.which("cmake"), shutil.which("ninja")
    assert cmake and ninja, TOOLS_HINT
    # The engine alone (no Python module), with the compiled-in zstd.
    _run([cmake, "-S", str(ROOT), "-B", str(BUILD), "-G", "Ninja",
          f"-DCMAKE_MAKE_PROGRAM={ninja}", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
          "-DSACKLI_BUILD_TESTS=ON", "-DSACKLI_ENGINE_ONLY=ON"],
         f"configuring the C++ tests ({TOOLS_HINT})", timeout=300)
    _run([cmake, "--build", str(BUILD), "--target", "sackli_engine_tests"],
         "building the C++ tests", timeout=1200)
    return BUILD / "sackli_engine_tests"


@pytest.mark.timeout(1500)
def test_engine_cpp_tests_pass(engine_tests: pathlib.Path, tmp_path: pathlib.Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    completed = subprocess.run([str(engine_tests), "--gtest_brief=1"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=600)
    assert completed.returncode == 0, f"C++ engine tests failed:\n{completed.stdout[-20000:]}"
    assert "PASSED" in completed.stdout, completed.stdout[-5000:]
    # Every test file contributed (a source left out of CMakeLists.txt would
    # silently run nothing).
    listed = subprocess.run([str(engine_tests), "--gtest_list_tests"], stdout=subprocess.PIPE,
                            text=True, check=True).stdout
    for suite in ("ReadPlanTest", "ThreadPool", "BackgroundTask", "Writer", "ArrowStream",
                  "LimitsCache", "RemoteShard", "MapIndexTest", "MapLookupTest", "MapCrc32c"):
        assert suite in listed, f"no {suite} tests in:\n{listed}"
