"""How many records one batch holds, from a byte budget.

Every bulk loop (read-ahead, Arrow batches, CLI scans, shard splits) bounds
its memory the same way: about `budget_bytes` per batch, from the bag's
stored bytes per record, clamped to [1, max_records].
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Iterator, TypeVar

__all__ = ["DEFAULT_MAX_RECORDS", "Gatherer", "batched", "records_per_batch"]

# No batch holds more records than this, however small they are: per-record
# bookkeeping (offsets, Python objects) stays bounded too.
DEFAULT_MAX_RECORDS = 65536

T = TypeVar("T", bound=bytes)


def records_per_batch(
    budget_bytes: float, bytes_per_record: float, max_records: int = DEFAULT_MAX_RECORDS
) -> int:
    """Records that fit `budget_bytes` at `bytes_per_record` each (at least
    one byte per record is assumed), clamped to [1, max_records]."""
    wanted = int(budget_bytes / max(bytes_per_record, 1.0))
    return max(1, min(max_records, wanted))


def batched(records: Iterable[T], max_records: int, max_bytes: int) -> Iterator[list[T]]:
    """`records` grouped into lists of at most `max_records` records; a list
    ends early once it holds `max_bytes` or more (so a list may pass
    `max_bytes` by its last record)."""
    iterator = iter(records)
    while True:
        batch: list[T] = []
        size = 0
        for record in itertools.islice(iterator, max_records):
            batch.append(record)
            size += len(record)
            if size >= max_bytes:
                break
        if not batch:
            return
        yield batch


class Gatherer:
    """Gathers records pushed one at a time into batches of at most
    `max_records` records, or until they hold `max_bytes`, and hands each
    full batch to `flush_batch` (a list, in order). `flush()` hands on what
    is gathered so far. For writers fed a record at a time that write
    cheaper in batches (compression runs on all cores)."""

    def __init__(self, flush_batch: Callable[[list[Any]], None], max_records: int,
                 max_bytes: int) -> None:
        self._flush_batch = flush_batch
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._batch: list[Any] = []
        self._bytes = 0

    def __bool__(self) -> bool:
        """Whether records are waiting."""
        return bool(self._batch)

    def add(self, record: Any) -> None:
        """Gathers `record` (anything with a length in bytes)."""
        self._batch.append(record)
        self._bytes += len(record)
        if len(self._batch) >= self._max_records or self._bytes >= self._max_bytes:
            self.flush()

    def extend(self, records: Iterable[Any], convert: Callable[[Any], Any] | None = None) -> None:
        """Gathers each of `records`, passed through `convert` unless it is
        bytes already (the loop stays inline: it runs once per record)."""
        batch, max_records, max_bytes = self._batch, self._max_records, self._max_bytes
        for record in records:
            if convert is not None and type(record) is not bytes:
                record = convert(record)
            batch.append(record)
            self._bytes += len(record)
            if len(batch) >= max_records or self._bytes >= max_bytes:
                self.flush()
                batch = self._batch

    def flush(self) -> None:
        """Hands on the records gathered so far, if any."""
        if self._batch:
            batch, self._batch, self._bytes = self._batch, [], 0
            self._flush_batch(batch)
