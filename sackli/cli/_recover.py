"""`sackli recover`: complete an interrupted write into a valid bag."""

from __future__ import annotations

import argparse

import sackli


def recover(args: argparse.Namespace) -> int:
    """Recovers one interrupted bag file and says what was saved."""
    report = sackli.recover(args.path)
    dropped = ""
    if report.dropped_limits or report.dropped_bytes:
        dropped = (f"; dropped {report.dropped_limits} invalid limit(s) and "
                   f"{report.dropped_bytes} trailing byte(s)")
    print(f"{args.path}: recovered {report.records} record(s){dropped}")
    return 0
