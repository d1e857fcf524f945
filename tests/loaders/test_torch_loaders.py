"""sackli.EpochStream under torchdata's StatefulDataLoader and PyTorch's
DataLoader, with worker processes: a checkpoint taken after k batches and a
new loader started from it read exactly one epoch together, and a resume
with another world size reads each remaining record once."""

from __future__ import annotations

import pytest

import sackli
from sackli import datasets

torch = pytest.importorskip("torch")
stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader")

# torchdata 0.11 calls a torch function that torch 2.13 deprecates; three
# workers are more than this 2-core machine's suggestion, on purpose.
pytestmark = [pytest.mark.filterwarnings("ignore:'set_vital' is deprecated"),
              pytest.mark.filterwarnings("ignore:This DataLoader will create")]

N = 101  # records of the bag that conftest.py writes


class Stream(sackli.EpochStream, torch.utils.data.IterableDataset):
    pass



@pytest.fixture(scope="module")
def dataset_folder(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("dataset") / "ds")
    with datasets.ShardedDatasetWriter(folder, {"i": "int(32)"}, shard_length=30) as writer:
        for i in range(N):
            writer.append({"i": i})
    return folder


def _stateful(dataset):
    return stateful_dataloader.StatefulDataLoader(
        dataset, batch_size=3, num_workers=2, collate_fn=list)


def _first_batches(loader, k):
    """The records of the loader's first k batches, and its state then."""
    batches = iter(loader)
    first = [record for _, batch in zip(range(k), batches) for record in batch]
    return first, loader.state_dict()


@pytest.mark.parametrize("k", [0, 1, 4, 7, 33])
def test_a_stateful_loader_resumes_the_epoch_exactly(path, records, k) -> None:
    dataset = Stream(sackli.Reader(path), seed=7)
    dataset.set_epoch(2)
    first, state = _first_batches(_stateful(dataset), k)
    assert len(first) == 3 * k

    resumed = Stream(sackli.Reader(path), seed=7)
    resumed.set_epoch(0)  # the checkpoint's epoch wins
    loader = _stateful(resumed)
    loader.load_state_dict(state)
    rest = [record for batch in loader for record in batch]
    assert sorted(first + rest) == sorted(records)
    assert set(first).isdisjoint(rest)
    # The next epoch starts afresh.
    resumed.set_epoch(3)
    assert sorted(record for batch in loader for record in batch) == sorted(records)


def test_a_datasets_reader_resumes_under_a_stateful_loader(dataset_folder) -> None:
    reader = datasets.ShardedDatasetReader(dataset_folder)
    first, state = _first_batches(_stateful(Stream(reader, seed=1)), 5)
    loader = _stateful(Stream(datasets.ShardedDatasetReader(dataset_folder), seed=1))
    loader.load_state_dict(state)
    rest = [datapoint["i"] for batch in loader for datapoint in batch]
    assert sorted([datapoint["i"] for datapoint in first] + rest) == list(range(N))


def test_loaders_of_a_bigger_world_finish_the_epoch(path, records) -> None:
    """Two ranks (plain DataLoaders with two workers, batches of 3) take two
    rounds of batches each; three ranks then read the rest once."""
    taken = []
    for rank in range(2):
        dataset = Stream(sackli.Reader(path), seed=5, rank=rank, world_size=2)
        loader = torch.utils.data.DataLoader(dataset, batch_size=3, num_workers=2,
                                             collate_fn=list)
        taken += [record for _, batch in zip(range(4), loader) for record in batch]
    consumed = 2 * 4 * 3  # world size, batches per rank, batch size
    assert len(set(taken)) == len(taken) == consumed
    rest = []
    for rank in range(3):
        dataset = Stream(sackli.Reader(path), seed=5, rank=rank, world_size=3)
        dataset.set_epoch(0, consumed=consumed)
        loader = torch.utils.data.DataLoader(dataset, batch_size=3, num_workers=2,
                                             collate_fn=list)
        share = [record for batch in loader for record in batch]
        assert len(share) == 26  # 77 left: ceil(77 / 3), one repeated
        rest += share
    assert set(taken).isdisjoint(rest)
    assert set(taken + rest) == set(records) and len(rest) == N - consumed + 1


def _label(record: bytes) -> int:
    """A transform: the record's number (in the loader's workers)."""
    return int(record.split()[1])


def test_a_transform_runs_in_the_workers_and_resumes(path) -> None:
    dataset = Stream(sackli.Reader(path), seed=3, batch_size=3, transform=_label)
    loader = _stateful(dataset)
    first, state = _first_batches(loader, 5)
    assert all(type(label) is int for label in first)
    resumed = _stateful(Stream(sackli.Reader(path), seed=3, batch_size=3, transform=_label))
    resumed.load_state_dict(state)
    assert sorted(first + [label for batch in resumed for label in batch]) == list(range(N))
    # Collated by torch's default collate: a tensor of labels per batch.
    tensors = torch.utils.data.DataLoader(dataset, batch_size=3, num_workers=2)
    assert sorted(torch.cat(list(tensors)).tolist()) == list(range(N))


def test_batches_dealt_whole_do_not_depend_on_the_number_of_workers(path) -> None:
    """With the loader's batch size, a rank's batches come in the same order
    from one, two or three workers."""
    def batches(num_workers):
        dataset = Stream(sackli.Reader(path), seed=8, batch_size=4)
        dataset.set_epoch(1)
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=num_workers,
                                             collate_fn=list)
        return list(loader)

    one = batches(0)
    assert [len(batch) for batch in one] == [4] * 25 + [1]
    assert batches(2) == one and batches(3) == one
