"""`DatapointSequence`: what dataset readers share: indexing, views, batch
reads and iteration with read-ahead, on top of one method that reads a batch
of datapoints (`_read_rows`)."""

from __future__ import annotations

import concurrent.futures
import copy
import itertools
import operator
from typing import Any, Iterable, Iterator, Mapping

from .. import IndexStream

__all__ = ["DatapointSequence"]

Datapoint = dict[str, Any]
Mask = Mapping[str, Any]

# Datapoints per batch of iteration and of `read_indices_iter`.
_DEFAULT_READ_AHEAD = 256


class DatapointSequence:
    """A sequence of datapoints: `len(r)`, `r[i]`, `r[i, mask]`, `r[a:b:c]`
    (a view sharing the open files), `read_indices`, `read_indices_iter` and
    iteration. Subclasses set `_rows` (a range over their datapoints) and
    implement `_read_rows`."""

    _rows: range

    def _read_rows(self, rows: list[int], mask: Mask | None) -> list[Datapoint]:
        """The datapoints at `rows` (valid indices of the whole dataset),
        each field read as one batch."""
        raise NotImplementedError

    def _read_row(self, row: int, mask: Mask | None) -> Datapoint:
        """The datapoint at `row`; subclasses may read one faster than a batch."""
        return self._read_rows([row], mask)[0]

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, key: Any) -> Any:
        """`r[i]`: the datapoint at i (negative counts from the end;
        IndexError outside). `r[i, mask]`: only the fields (and list items)
        the mask selects. `r[a:b:c]`: a view of those datapoints."""
        mask = None
        if isinstance(key, tuple):
            if len(key) != 2:
                raise TypeError("index a dataset as r[i] or r[i, mask]")
            key, mask = key
        if type(key) is int:  # the common case, first
            try:
                row = self._rows[key]
            except IndexError:
                row = self._row(key)  # raises, naming the index
            return self._read_row(row, mask)
        if isinstance(key, slice) and mask is None:
            view = copy.copy(self)
            view._rows = self._rows[key]
            return view
        return self._read_row(self._row(key), mask)

    def _row(self, index: Any) -> int:
        try:
            return self._rows[operator.index(index)]
        except IndexError:
            raise IndexError(
                f"datapoint index {index} out of range for {len(self._rows)} datapoints"
            ) from None

    def _rows_of(self, indices: Iterable[int]) -> list[int]:
        """The rows of `indices` (see `_row`): checked for the whole batch at
        once (a call per index costs more than the rest of a label-only
        batch), one by one only for other types or to name a bad index."""
        indices = indices if type(indices) is list else list(indices)
        rows = self._rows
        if indices and set(map(type, indices)) <= {int}:
            low, high = min(indices), max(indices)
            if low >= 0 and high < len(rows) and rows.start == 0 and rows.step == 1:
                return indices  # a whole dataset: rows are the indices
            if -len(rows) <= low and high < len(rows):
                return list(map(rows.__getitem__, indices))
        return [self._row(i) for i in indices]

    def read_indices(self, indices: Iterable[int], mask: Mask | None = None) -> list[Datapoint]:
        """The datapoints at `indices` (negative ones count from the end;
        duplicates allowed), in order. Each field is read by one parallel
        engine batch with the GIL released."""
        return self._read_rows(self._rows_of(indices), mask)

    def __getitems__(self, indices: Iterable[int]) -> list[Datapoint]:
        """The datapoints at `indices`: PyTorch's batched fetch (a
        `DataLoader` calls it with a batch's indices). As `read_indices`."""
        return self.read_indices(indices)

    def read_indices_iter(
        self, indices: Iterable[int], mask: Mask | None = None,
        read_ahead: int = _DEFAULT_READ_AHEAD,
    ) -> Iterator[Datapoint]:
        """Iterates over the datapoints at `indices` (any iterable, infinite
        ones too), reading the next `read_ahead` datapoints in a background
        thread while the current ones are consumed. An error of the iterable
        or a bad index surfaces at its position.

        The iterator keeps its position for checkpoints: `state_dict()` and
        `load_state_dict(state)`, as `sackli.Reader.read_indices_iter`'s."""
        if read_ahead < 1:
            raise ValueError(f"read_ahead must be at least 1, not {read_ahead}")
        return IndexStream.over(
            indices, len(self._rows),
            lambda chosen, _: _read_ahead(self, iter(chosen), mask, read_ahead))

    def __iter__(self) -> Iterator[Datapoint]:
        """Iterates over all datapoints, reading ahead in batches."""
        return self.read_indices_iter(range(len(self._rows)))


def _chunk(source: Iterator[Any], size: int) -> tuple[list[Any], BaseException | None]:
    chunk: list[Any] = []
    try:
        chunk.extend(itertools.islice(source, size))
    except Exception as error:  # raised after the datapoints before it
        return chunk, error
    return chunk, None


def _read_ahead(
    sequence: DatapointSequence, source: Iterator[Any], mask: Mask | None, size: int
) -> Iterator[list[Datapoint]]:
    """The datapoints at the indices of `source`, in batches of `size`."""
    executor = concurrent.futures.ThreadPoolExecutor(1, "sackli-datasets-read-ahead")

    def submit() -> tuple[Any, BaseException | None, bool]:
        chunk, error = _chunk(source, size)
        try:
            rows = sequence._rows_of(chunk)
        except (IndexError, TypeError) as bad:
            # Read the datapoints before the bad index, then raise.
            rows = [sequence._row(i) for i in itertools.takewhile(_valid(sequence), chunk)]
            error = bad
        done = error is not None or len(chunk) < size
        return executor.submit(sequence._read_rows, rows, mask), error, done

    try:
        pending = submit()
        while True:
            future, error, done = pending
            if not done:
                pending = submit()
            yield future.result()
            if error is not None:
                raise error
            if done:
                return
    finally:
        executor.shutdown(wait=False, cancel_futures=True)


def _valid(sequence: DatapointSequence) -> Any:
    def valid(index: Any) -> bool:
        try:
            sequence._row(index)
        except (IndexError, TypeError):
            return False
        return True
    return valid
