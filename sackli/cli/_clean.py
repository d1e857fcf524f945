"""`sackli clean URL_PREFIX`: removes what killed writers left on a bucket
(`sackli._bucket_clean`), one line per leftover, then what it freed."""

from __future__ import annotations

import argparse
import re

import sackli

from ._escapes import escape_name

__all__ = ["clean", "parse_duration"]

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|sec|min|m|h|d)?\s*", re.IGNORECASE)
_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """Seconds from `90`, `90s`, `30m` / `30min`, `1h`, `2d` (argparse
    type: a clear one-line error otherwise)."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write a number with s, min (or m), h or d, e.g. 1h or 30min")
    return float(match[1]) * _SECONDS[(match[2] or "s").lower()]


def clean(args: argparse.Namespace) -> int:
    """Cleans URL_PREFIX; prints each leftover, then what was freed."""
    report = sackli.clean(args.prefix, older_than=args.older_than, dry_run=args.dry_run)
    for entry in report.entries:
        print(escape_name(entry.line()))
    print(report.summary() if report.entries else
          f"{escape_name(args.prefix)}: nothing left behind")
    return 0
