"""The read paths of sackli.datasets, each judged against dataset_oracle.

A dataset mutant (a seed of kind "dataset": one shard folder) is read with
`DatasetReader(folder, cache_index=...)` through single datapoints, masks,
batches and iteration.

Rules (see docs/fuzzing.md, "Datasets"):
  single    r[i], r[i, mask]: the oracle's datapoint, or an error of one of
            the kinds its problems give (IndexError out of range).
  batches   read_indices: an error of a kind some requested datapoint gives,
            when one does; else exactly the datapoints.
  iteration for d in r: right datapoints in order; the error no later than
            the first bad one (read-ahead reads a batch at a time), and only
            if there is one.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable

from .dataset_oracle import DatapointError, OracleDataset, column, open_dataset
from .oracle import OracleError
from .paths import MAX_CALLS, Judge, Raised, _iterate, capture, judge_read_ahead

__all__ = ["DATASET_COMBOS", "DATASET_KIND", "DATASET_PATHS", "dataset_combos", "evaluate_pair",
           "open_oracle"]

DATASET_KIND = "dataset"
# cache_index True / False, and the folder uploaded to the fuzzer's moto (s3://).
DATASET_COMBOS = ["dataset/index", "dataset/noindex", "remote/dataset"]


def dataset_combos(remote: bool) -> list[str]:
    return [c for c in DATASET_COMBOS if remote or not c.startswith("remote/")]


class DatasetContext:
    def __init__(self, folder: str, combo: str, oracle: OracleDataset | OracleError, seed: int,
                 url: str | None = None) -> None:
        # The folder sackli reads: the mutant's, or its uploaded copy.
        self.folder = url if combo.startswith("remote/") else folder
        self.cache_index = combo != "dataset/noindex"
        self.oracle = oracle
        self.rng = random.Random(seed)

    def open(self) -> Any:
        from sackli import datasets

        return datasets.DatasetReader(self.folder, cache_index=self.cache_index)

    def rows(self) -> list[int]:
        assert isinstance(self.oracle, OracleDataset)
        return list(range(min(len(self.oracle), MAX_CALLS)))

    def masks(self) -> list[tuple[Any, Any]]:
        """(mask for sackli, the same for the oracle) over this dataset's fields."""
        assert isinstance(self.oracle, OracleDataset)
        scalars = [f.name for f in self.oracle.fields if not f.is_list]
        lists = [f.name for f in self.oracle.fields if f.is_list]
        masks: list[tuple[Any, Any]] = []
        if scalars:
            name = self.rng.choice(scalars)
            masks.append(({name: True}, {name: True}))
        if lists:
            name = self.rng.choice(lists)
            first, last = self.rng.choice([(1, 3), (0, 1), (2, 2), (0, 50)])
            # As bags: an empty range (falsy) leaves the field out; a slice never does.
            selection = (first, last) if first < last else False
            masks.append(({name: range(first, last)}, {name: selection}))
            masks.append(({name: slice(1, None)}, {name: (1, None)}))
            if scalars:
                both = {lists[0]: True, scalars[-1]: True}
                masks.append((both, both))
        return masks


def _judge_datapoint(judge: Judge, call: str, expected: Any, actual: Any) -> None:
    if isinstance(expected, DatapointError):
        judge.error(call, expected.kinds, actual, expected=expected)
    elif isinstance(actual, Raised):
        judge.raised_for_data(call, expected, actual)
    elif type(actual) is dict and actual == expected:
        judge.agree(call)
    else:
        judge.fail("mismatch", call, "wrong datapoint", expected, actual)


def _judge_batch(judge: Judge, call: str, expected: list[Any], actual: Any) -> None:
    kinds = sorted({k for e in expected if isinstance(e, DatapointError) for k in e.kinds})
    if kinds:
        judge.error(call, kinds, actual)
    elif isinstance(actual, Raised):
        judge.raised_for_data(call, expected[0] if expected else None, actual)
    elif type(actual) is list and actual == expected:
        judge.agree(call)
    else:
        judge.fail("mismatch", call, f"wrong datapoints ({len(expected)} wanted)", expected, actual)


# --- the paths ------------------------------------------------------------------------------


def d_open(ctx: DatasetContext, judge: Judge) -> None:
    """Opening the shard folder and len(r)."""
    reader = capture(ctx.open)
    length = reader if isinstance(reader, Raised) else capture(lambda: len(reader))
    if isinstance(ctx.oracle, OracleError):
        kinds = getattr(ctx.oracle, "alternatives", [ctx.oracle.kind])
        judge.error("open, len(r)", kinds, length, expected=ctx.oracle)
    else:
        judge.value("open, len(r)", len(ctx.oracle), length)


def d_getitem(ctx: DatasetContext, judge: Judge) -> None:
    """r[i] for every datapoint, negative indices and out-of-range ones."""
    assert isinstance(ctx.oracle, OracleDataset)
    reader = ctx.open()
    n = len(ctx.oracle)
    for row in ctx.rows():
        _judge_datapoint(judge, f"r[{row}]", ctx.oracle.datapoint(row), capture(lambda: reader[row]))
    for row in (-1, -n):
        if n:
            _judge_datapoint(judge, f"r[{row}]", ctx.oracle.datapoint(row + n),
                             capture(lambda: reader[row]))
    for row in (n, -n - 1):
        judge.error(f"r[{row}]", ["index"], capture(lambda: reader[row]))


def d_masks(ctx: DatasetContext, judge: Judge) -> None:
    """r[i, mask] for masks of one scalar, list ranges and slices, and both."""
    assert isinstance(ctx.oracle, OracleDataset)
    reader = ctx.open()
    for mask, selection in ctx.masks():
        for row in ctx.rows():
            _judge_datapoint(judge, f"r[{row}, {mask}]", ctx.oracle.datapoint(row, selection),
                             capture(lambda: reader[row, mask]))


def d_read_indices(ctx: DatasetContext, judge: Judge) -> None:
    """read_indices of the whole dataset, a shuffled sample with repeats, and with masks."""
    assert isinstance(ctx.oracle, OracleDataset)
    reader = ctx.open()
    rows = ctx.rows()
    sample = rows[:]
    ctx.rng.shuffle(sample)
    sample = sample[: max(1, len(sample) // 2)] + sample[:3]
    for name, indices in (("all", rows), ("sample", sample)):
        _judge_batch(judge, f"read_indices({name})", [ctx.oracle.datapoint(r) for r in indices],
                     capture(lambda: reader.read_indices(indices)))
    for mask, selection in ctx.masks():
        _judge_batch(judge, f"read_indices(sample, {mask})",
                     [ctx.oracle.datapoint(r, selection) for r in sample],
                     capture(lambda: reader.read_indices(sample, mask)))


def d_iter(ctx: DatasetContext, judge: Judge) -> None:
    """Iteration with read-ahead."""
    assert isinstance(ctx.oracle, OracleDataset)
    if len(ctx.oracle) > MAX_CALLS:
        return
    reader = ctx.open()
    yielded, error = _iterate(lambda: iter(reader))
    expected = [ctx.oracle.datapoint(r) for r in range(len(ctx.oracle))]
    # Read ahead a batch at a time: the error may be any bad datapoint's (of
    # the batch with the first one: here the whole dataset).
    kinds = sorted({k for e in expected if isinstance(e, DatapointError) for k in e.kinds})
    judge_read_ahead(judge, "for d in r", expected, yielded, error, kinds,
                     lambda got, want: type(got) is dict and got == want)


def d_arrow(ctx: DatasetContext, judge: Judge) -> None:
    """sackli.arrow.read_table(folder, fields=[f]) for each field: the
    column as the oracle makes it, or an error of a kind its problems give."""
    assert isinstance(ctx.oracle, OracleDataset)
    if len(ctx.oracle) > MAX_CALLS:
        return
    import sackli.arrow

    for field in ctx.oracle.fields:
        expected = column(ctx.oracle, field.name)
        table = capture(lambda: sackli.arrow.read_table(ctx.folder, fields=[field.name]))
        actual = table if isinstance(table, Raised) else capture(
            lambda: table.column(field.name).to_pylist())
        call = f"read_table(fields=[{field.name!r}])"
        if isinstance(expected, DatapointError):
            judge.error(call, expected.kinds, actual, expected=expected)
        elif isinstance(actual, Raised):
            judge.raised_for_data(call, expected[:3], actual)
        elif actual == expected:
            judge.agree(call)
        else:
            k = next((k for k, (a, e) in enumerate(zip(actual, expected)) if a != e), len(expected))
            judge.fail("mismatch", call, f"wrong column at datapoint {k}",
                       expected[k] if k < len(expected) else None, actual[k] if k < len(actual) else None)


DATASET_PATHS: dict[str, Callable[[DatasetContext, Judge], None]] = {
    "dataset_open": d_open,
    "dataset_getitem": d_getitem,
    "dataset_masks": d_masks,
    "dataset_read_indices": d_read_indices,
    "dataset_iter": d_iter,
    "dataset_arrow": d_arrow,
}


def open_oracle(folder: str, remote: bool = False) -> OracleDataset | OracleError:
    return open_dataset(folder, remote)


def evaluate_pair(folder: str, oracle: OracleDataset | OracleError, combo: str, path: str,
                  seed: int, remote_prefix: str | None = None) -> Judge:
    """Runs one (combo, path) pair of a dataset mutant; the judge holds the verdict."""
    names = [folder] + [os.path.join(folder, name) for name in os.listdir(folder)]
    if remote_prefix:
        names += [remote_prefix] + [f"{remote_prefix}/{name}" for name in os.listdir(folder)]
    judge = Judge(names)
    DATASET_PATHS[path](DatasetContext(folder, combo, oracle, seed, remote_prefix), judge)
    return judge
