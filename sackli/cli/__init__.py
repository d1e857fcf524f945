"""The `sackli` command line: inspect, print, verify, recover and convert bags.

`main(argv)` parses the arguments, runs one subcommand and returns the exit
status: 0 on success, 1 when the subcommand fails or finds problems, 2 for
wrong arguments (usage errors). Expected errors (missing or corrupt files,
I/O, bad arguments, Ctrl-C) are one line on stderr; anything else is a bug
and keeps its traceback.

No other package imports the command line.
Internal interface: none
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Sequence

import sackli

from . import _maps
from ._arguments import USAGE_STATUS, join_negative_values, usage_line
from ._commands import build_parser
from ._escapes import escape_lines
from ._errors import EXPECTED_ERRORS, BadArgument, error_message
from ._recover import with_unfinished_notes

__all__ = ["main"]

_PROGRAM = "sackli"
# 128 + SIGPIPE: what a shell reports for a process whose reader went away.
_BROKEN_PIPE_STATUS = 141
_INTERRUPTED_STATUS = 130


def _fail(message: str, status: int) -> int:
    # Messages name files, whose names may hold terminal control characters.
    print(f"{_PROGRAM}: error: {escape_lines(message)}", file=sys.stderr)
    return status


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Runs a subcommand, turning expected failures into one line on stderr."""
    try:
        status = command(args)
        sys.stdout.flush()  # a broken pipe must surface here, not at exit
        return status
    except BrokenPipeError:
        # The reader of our output went away (`| head`): stop quietly. Point
        # stdout at devnull so the interpreter's final flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _BROKEN_PIPE_STATUS
    except KeyboardInterrupt:
        return _fail("interrupted", _INTERRUPTED_STATUS)
    except BadArgument as error:
        # A wrong argument found after parsing (UsageError, or one wrong for
        # this input, e.g. an index outside the bag): the same line and
        # status as argparse's own usage errors.
        prog = f"{_PROGRAM} {args.command_name}"
        print(usage_line(prog, error_message(error)), file=sys.stderr)
        return USAGE_STATUS
    except EXPECTED_ERRORS as error:
        return _fail(error_message(error), 1)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the `sackli` command line with `argv` (default: sys.argv[1:])."""
    parser = build_parser(_PROGRAM)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(join_negative_values(argv))
    # info, verify and get of a .mb / .im map file run its own command
    # (info and verify with their notes on unfinished writes).
    command = args.command
    map_command = _maps.command_for(args)
    if map_command is not None:
        noted = args.command_name in ("info", "verify")
        command = with_unfinished_notes(map_command) if noted else map_command
    return _run(command, args)
