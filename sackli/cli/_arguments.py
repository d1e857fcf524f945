"""Argument parsing details: one-line usage errors, option values that start
with a minus sign, case-insensitive choices, and typed values (byte sizes
with units, counts, zstd levels)."""

from __future__ import annotations

import argparse
import re
from typing import Callable, NoReturn, Sequence

from .._bulk import check_zstd_level

__all__ = ["OneLineParser", "USAGE_STATUS", "any_case", "join_negative_values",
           "non_negative_int", "parse_size", "usage_line", "zstd_level"]

USAGE_STATUS = 2


def usage_line(prog: str, message: str) -> str:
    """The one line of a usage error of `prog` ("sackli cat"), the same for
    argparse's own errors and for those found after parsing."""
    return f"{prog}: error: {message} (see '{prog} --help')"


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr (the
    problem and where to find help), with exit status 2; subcommand parsers
    created from it are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_STATUS, usage_line(self.prog, message) + "\n")


def any_case(choices: Sequence[str]) -> Callable[[str], str]:
    """An argparse `type` for an option with `choices`: a value in any case
    becomes the choice's own spelling (`interleaved` -> `INTERLEAVED`), so
    that help and stored values keep the canonical one; any other value is
    left as it is, for argparse's "invalid choice" error."""
    canonical = {choice.lower(): choice for choice in choices}

    def convert(text: str) -> str:
        return canonical.get(text.lower(), text)

    convert.__name__ = "choice"  # what argparse would name it in an error
    return convert


def non_negative_int(text: str) -> int:
    """An argparse `type`: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def zstd_level(text: str) -> int:
    """An argparse `type`: a zstd level, within zstd's own range."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    try:
        check_zstd_level(value)  # the rule and message of CompressionZstd
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


# Values that argparse would take for options because they start with "-":
# --range -3: / --range -10:-2, and --indices -1,2.
_NEGATIVE_VALUES = {
    "--range": re.compile(r"-\d*:-?\d*"),
    "--indices": re.compile(r"-\d+(,-?\d+)*"),
}


def join_negative_values(argv: Sequence[str]) -> list[str]:
    """`argv` with `--range -3:` written as `--range=-3:` (and the same for
    --indices), so that argparse does not take the value for an option."""
    out: list[str] = []
    arguments = iter(argv)
    for argument in arguments:
        pattern = _NEGATIVE_VALUES.get(argument)
        if argument == "--":
            out.append(argument)
            out.extend(arguments)
            break
        if pattern is not None:
            value = next(arguments, None)
            if value is not None and pattern.fullmatch(value):
                out.append(f"{argument}={value}")
                continue
            out.append(argument)
            if value is not None:
                out.append(value)
            continue
        out.append(argument)
    return out


_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """A byte size: a number with an optional unit, case-insensitive: B;
    kB, MB, GB, TB, PB (powers of 1000); KiB, MiB, GiB, TiB, PiB (powers of
    1024). `20MB` is 20,000,000, `1GiB` 1,073,741,824, `1.5kB` 1500.

    Raises argparse.ArgumentTypeError (a clear one-line message) otherwise.
    """
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: write a number of bytes, optionally with a unit: "
            "kB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB (x1024), e.g. 20MB or 1GiB")
    number = match.group(1)
    multiplier = _UNITS[unit]
    if "." in number:
        whole, _, fraction = number.partition(".")
        value = int(whole or "0") * multiplier + int(fraction or "0") * multiplier // 10 ** len(fraction)
    else:
        value = int(number) * multiplier
    return value
