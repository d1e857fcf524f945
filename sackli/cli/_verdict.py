"""How `sackli verify` reports, for bags, maps and datasets alike: each
problem on its own line as it is found (--fail-fast stops at the first),
then one last line (stopped, how many problems, or OK) and the exit
status."""

from __future__ import annotations

from typing import Any, Callable

from ._escapes import escape_name


class FailFast(Exception):
    """Stops verification at the first problem (`--fail-fast`)."""


def reporter(problems: list[str], fail_fast: bool, bars: list[Any]) -> Callable[[str], None]:
    """The function a verification calls with each problem: it is kept in
    `problems` and printed (the progress bars in `bars`, which may be added
    to later, cleared first); with `fail_fast` it then raises FailFast."""

    def report(problem: str) -> None:
        problems.append(problem)
        for bar in bars:
            bar.clear()
        print(escape_name(problem), flush=True)
        if fail_fast:
            raise FailFast

    return report


def verdict(problems: list[str], spec: str, ok_line: str, stopped: bool = False) -> int:
    """Prints the last line of a verification of `spec` that found `problems`
    (`stopped`: cut short by --fail-fast) and returns the exit status."""
    if stopped:
        print("verify: stopped at the first problem (--fail-fast)")
        return 1
    if problems:
        print(f"verify: {len(problems)} problem(s) in {escape_name(spec)}")
        return 1
    print(escape_name(ok_line))
    return 0
