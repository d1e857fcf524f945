"""How `sackli verify` ends, for bags and maps alike: one line (stopped at the
first problem, how many problems, or OK) and the exit status."""

from __future__ import annotations


def verdict(problems: list[str], spec: str, ok_line: str, stopped: bool = False) -> int:
    """Prints the last line of a verification of `spec` that found `problems`
    (`stopped`: cut short by --fail-fast) and returns the exit status."""
    if stopped:
        print("verify: stopped at the first problem (--fail-fast)")
        return 1
    if problems:
        print(f"verify: {len(problems)} problem(s) in {spec}")
        return 1
    print(ok_line)
    return 0
