"""Progress bars on stderr, shown only when it is a terminal."""

from __future__ import annotations

import sys
from typing import Any

# A known total: percentage, bar, count, elapsed < remaining (the ETA), rate.
_WITH_TOTAL = "{desc}: {percentage:3.0f}%|{bar}| {n:,}/{total:,} [{elapsed}<{remaining}, {rate_fmt}]"
_WITHOUT_TOTAL = "{desc}: {n:,}{unit} [{elapsed}, {rate_fmt}]"


def progress_shown(show: bool = True) -> bool:
    """Whether `progress(..., show=show)` draws a bar (stderr is a terminal)."""
    return show and sys.stderr.isatty()


def progress(total: int | None, description: str, *, unit: str = " records",
             show: bool = True) -> Any:
    """A tqdm bar counting `unit`s up to `total` (None: unknown, a count
    and a rate only). Silent unless `show` and stderr is a terminal; it
    disappears when done, so that only results remain on the screen."""
    from tqdm import tqdm  # imported by the commands that draw a bar

    enabled = progress_shown(show)
    return tqdm(
        total=total, desc=description, unit=unit, unit_scale=True, file=sys.stderr,
        disable=not enabled, leave=False, dynamic_ncols=True, mininterval=0.2,
        bar_format=_WITH_TOTAL if total is not None else _WITHOUT_TOTAL,
    )
