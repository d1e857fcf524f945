"""Progress bars on stderr, shown only when it is a terminal.

Bars count records when the total is known (bags), else the bytes read of
the source files (TFRecord, JSON Lines, text, standard input): their size is
the total, so the bar still shows the time left. A byte bar is redrawn twice
a second by a thread of its own, also while a slow source sends nothing.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import threading
from typing import Any, Callable, Iterable, Iterator

# A known total: percentage, bar, count, elapsed < remaining (the ETA), rate.
_WITH_TOTAL = "{desc}: {percentage:3.0f}%|{bar}| {n:,}/{total:,} [{elapsed}<{remaining}, {rate_fmt}]"
_WITHOUT_TOTAL = "{desc}: {n:,}{unit} [{elapsed}, {rate_fmt}]"
# Bytes, scaled (kB, MB...: powers of 1000), with or without a known total.
_BYTES_WITH_TOTAL = ("{desc}: {percentage:3.0f}%|{bar}| {n_fmt}{unit}/{total_fmt}{unit} "
                     "[{elapsed}<{remaining}, {rate_fmt}]")
_BYTES_WITHOUT_TOTAL = "{desc}: {n_fmt}{unit} [{elapsed}, {rate_fmt}]"
# How often a byte bar is redrawn: at least once a second, as promised.
_REDRAW_SECONDS = 0.5
# Large reads: records are parsed in many small pieces.
_READ_BUFFER_BYTES = 1 << 20


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


class _BytesBar:
    """What `byte_progress` yields: `update(records)` and `clear()` as on a
    record bar, doing nothing (the bar follows the bytes read itself)."""

    def update(self, records: int = 1) -> None:
        pass

    def clear(self) -> None:
        pass


@contextlib.contextmanager
def byte_progress(total: int | None, description: str, position: Callable[[], int], *,
                  show: bool = True) -> Iterator[_BytesBar]:
    """A bar of the bytes read so far, `position()`, out of `total` bytes
    (None: unknown, a count and a rate only), redrawn every half second
    until the block ends. Silent unless `show` and stderr is a terminal."""
    from tqdm import tqdm  # imported by the commands that draw a bar

    if not progress_shown(show):
        yield _BytesBar()
        return
    bar = tqdm(
        total=total, desc=description, unit="B", unit_scale=True, unit_divisor=1000,
        file=sys.stderr, leave=False, dynamic_ncols=True, smoothing=0,
        bar_format=_BYTES_WITH_TOTAL if total is not None else _BYTES_WITHOUT_TOTAL,
    )
    done = threading.Event()

    def redraw() -> None:
        # Only this thread moves the bar, so no lock beyond tqdm's own.
        while not done.wait(_REDRAW_SECONDS):
            bar.n = position()
            bar.refresh()

    thread = threading.Thread(target=redraw, name="sackli-progress", daemon=True)
    thread.start()
    try:
        yield _BytesBar()
    finally:
        done.set()
        thread.join()
        bar.close()


class _CountedFile(io.RawIOBase):
    """A file read through, adding the bytes it hands out to `count`."""

    def __init__(self, path: str, count: "ByteCount") -> None:
        super().__init__()
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self._count = count
        self.name = path  # what messages call it; `.gz` names are read through gzip

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = self._file.readinto(buffer) or 0
        self._count.read += size
        return size

    def close(self) -> None:
        self._file.close()
        super().close()


class ByteCount:
    """The bytes read so far of a source's files (`read`), for a bar by
    bytes: `records(read, paths)` streams each file through a counter."""

    def __init__(self) -> None:
        self.read = 0

    def records(self, read: Callable[[Any], Iterator[bytes]], paths: Iterable[str]) -> Iterator[bytes]:
        """The records `read(stream)` finds in each file, in order."""
        for path in paths:
            with io.BufferedReader(_CountedFile(path, self), _READ_BUFFER_BYTES) as stream:
                yield from read(stream)

    @staticmethod
    def total(paths: Iterable[str]) -> int | None:
        """The bytes these files hold; None when one is not a regular file
        (a pipe: its size is not known)."""
        sizes = [os.stat(path) for path in paths]
        if not all(stat.S_ISREG(size.st_mode) for size in sizes):
            return None
        return sum(size.st_size for size in sizes)
