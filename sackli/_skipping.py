"""Skipping damaged records: the opt-in of scans that go on past corruption.

Reads are strict by default: the first record that does not decode raises
its `sackli.CorruptionError`. A scan given `skip_corrupt=handler` instead
leaves such a record out, calls `handler(SkippedRecord(index, error))` at
its place in the order of the scan, and goes on. `SkippedRecords` is the
ready-made handler that collects them. Only `CorruptionError` is skipped
(that includes records missing from a file truncated under the reader):
other I/O errors, bad indices and Ctrl-C still raise. A handler may raise to stop the scan (iterators have then yielded
every record before the damaged one).

How: a batch is read whole, as a strict read would; only when it fails is
it split in halves, so just the damaged region is read record by record.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

from ._engine import CorruptionError

__all__ = ["SCAN_BATCH_BYTES", "SkipHandler", "SkippedRecord", "SkippedRecords", "checked_handler",
           "one_by_one", "read_skipping", "resolved_indices"]

# A skipping scan reads batches of about this many bytes (a failed batch is
# re-read in halves, so batches stay moderate).
SCAN_BATCH_BYTES = 16 << 20


class SkippedRecord(NamedTuple):
    """A record a scan left out: its index in the reader (or view) that was
    read, and the error that decoding it raised (naming file and offset)."""

    index: int
    error: CorruptionError


SkipHandler = Callable[[SkippedRecord], Any]
"""Called with each skipped record, in scan order."""


class SkippedRecords:
    """A `skip_corrupt` handler that collects what a scan skipped.

    Example:
      >>> skipped = sackli.SkippedRecords()
      >>> records = reader.read(skip_corrupt=skipped)
      >>> for index, error in skipped:
      ...     print(f"record {index}: {error}")
    """

    def __init__(self) -> None:
        self._records: list[SkippedRecord] = []

    def __call__(self, skipped: SkippedRecord) -> None:
        self._records.append(skipped)

    @property
    def indices(self) -> list[int]:
        """The indices of the skipped records, in scan order."""
        return [record.index for record in self._records]

    def __iter__(self) -> Iterator[SkippedRecord]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, position: int) -> SkippedRecord:
        return self._records[position]

    def __repr__(self) -> str:
        return f"<sackli.SkippedRecords: {len(self._records)} skipped, indices {self.indices}>"


def checked_handler(skip_corrupt: Any) -> SkipHandler | None:
    """`skip_corrupt` as a handler, None for strict reads; TypeError for
    anything but None, False or a callable."""
    if skip_corrupt is None or skip_corrupt is False:
        return None
    if not callable(skip_corrupt):
        raise TypeError(
            "skip_corrupt takes a callable that receives each sackli.SkippedRecord, e.g. "
            f"sackli.SkippedRecords() (or None/False for strict reads), not {skip_corrupt!r}")
    return skip_corrupt


def _read_halving(fetch: Callable[[int, int], list[bytes]], start: int, count: int,
                  index_of: Callable[[int], int], on_skip: SkipHandler) -> list[bytes]:
    try:
        return fetch(start, count)
    except CorruptionError as error:
        if count == 1:
            on_skip(SkippedRecord(index_of(start), error))
            return []
    half = count // 2
    return (_read_halving(fetch, start, half, index_of, on_skip)
            + _read_halving(fetch, start + half, count - half, index_of, on_skip))


def read_skipping(fetch: Callable[[int, int], list[bytes]], count: int, batch: int,
                  on_skip: SkipHandler, index_of: Callable[[int], int] = int) -> list[bytes]:
    """Positions [0, count) of a selection, read `batch` at a time by
    `fetch(start, n)`, leaving out records that do not decode (reported to
    `on_skip` with `index_of(position)`)."""
    records: list[bytes] = []
    for start in range(0, count, batch):
        records += _read_halving(fetch, start, min(batch, count - start), index_of, on_skip)
    return records


def one_by_one(core: Any, positions: Iterable[int], on_skip: SkipHandler | None) -> Iterator[bytes]:
    """The records at view `positions`, read singly: strict, the first bad
    one raises after the good ones before it came out; with `on_skip`, bad
    ones are reported and left out."""
    for position in positions:
        if on_skip is None:
            yield core.get(position)
            continue
        try:
            record = core.get(position)
        except CorruptionError as error:
            on_skip(SkippedRecord(operator.index(position) % len(core), error))
            continue
        yield record


def resolved_indices(indices: Any, length: int) -> Sequence[int]:
    """`indices` (a sequence, array or slice) as non-negative ints; raises
    IndexError (with the numbers) or TypeError as the engine would."""
    if isinstance(indices, slice):
        return range(length)[indices]
    resolved = []
    for value in indices:
        try:
            index = operator.index(value)
        except TypeError:
            raise TypeError(f"indices must be integers, not {type(value).__name__}") from None
        if not -length <= index < length:
            raise IndexError(f"index {index} out of range for a reader of {length} records")
        resolved.append(index % length)
    return resolved
