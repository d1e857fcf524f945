"""Bounded differential fuzzing of sackli (see docs/fuzzing.md).

Replays every regression case of fuzz/regressions, then reads fresh mutants
of the seed corpus (fixed seed) through every read path and option
combination in child processes, comparing each outcome with the pure-Python
oracle of docs/format.md. Fails on any crash, hang or mismatch, listing them
with their recipes. New kinds of failure are minimised into the test's temp
folder (not into the repository): copy them to fuzz/regressions to keep them.
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

SEED = 20251123
FUZZ_SECONDS = 45
MAX_MUTANTS = 400


def _runner():
    # Tests run with --import-mode=importlib and PYTHONSAFEPATH=1: the fuzz
    # package is found through the repository root, appended (not inserted),
    # so that `import sackli` still finds the installed package, not the
    # source tree's (which has no compiled engine).
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    from fuzz import runner

    return runner


def test_fuzz(tmp_path):
    runner = _runner()
    fuzzer = runner.Fuzzer(tmp_path / "work", jobs=2, save_dir=tmp_path / "new-regressions",
                           max_minimize=2, idle_timeout=20)
    try:
        fuzzer.replay()
        report = fuzzer.fuzz(FUZZ_SECONDS, SEED, MAX_MUTANTS)
    finally:
        fuzzer.close()
    print(report.table())
    assert report.mutants > 0
    assert not report.harness_errors, "\n".join(report.harness_errors)
    failing = report.failing()
    assert not failing, (
        f"{len(failing)} crash/hang/mismatch outcomes in {report.mutants} mutants and "
        f"{report.regressions} regression cases:\n{report.format_failures()}")
