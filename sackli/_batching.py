"""How many records one batch holds, from a byte budget.

Every bulk loop (read-ahead, Arrow batches, CLI scans, shard splits) bounds
its memory the same way: about `budget_bytes` per batch, from the bag's
stored bytes per record, clamped to [1, max_records].
"""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator, TypeVar

__all__ = ["DEFAULT_MAX_RECORDS", "batched", "records_per_batch"]

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
