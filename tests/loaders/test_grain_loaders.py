"""Readers as Grain sources: `grain.MapDataset.source(reader)` pipelines
checkpoint with Grain's own `get_state` / `set_state` and resume exactly,
for a Reader and a sackli.datasets reader, in this process and in Grain's
worker processes (which get the reader pickled)."""

from __future__ import annotations

import pytest

import sackli
from sackli import datasets

grain = pytest.importorskip("grain")

N = 101  # records of the bag that conftest.py writes



def _resumed(pipeline, k):
    """The first k elements, the rest from a new iterator given the state,
    and an uninterrupted run."""
    iterator = iter(pipeline)
    first = [next(iterator) for _ in range(k)]
    state = iterator.get_state()
    later = iter(pipeline)
    later.set_state(state)
    return first, list(later), list(iter(pipeline))


@pytest.mark.parametrize("k", [0, 1, 9, 25])
def test_a_reader_pipeline_resumes_exactly(path, records, k) -> None:
    pipeline = grain.MapDataset.source(sackli.Reader(path)).shuffle(seed=4).batch(4)
    first, rest, whole = _resumed(pipeline, k)
    assert [batch.tolist() for batch in first + rest] == [batch.tolist() for batch in whole]
    assert sorted(record for batch in whole for record in batch.tolist()) == sorted(records)


def test_a_dataset_reader_is_a_grain_source(tmp_path) -> None:
    folder = str(tmp_path / "ds")
    with datasets.ShardedDatasetWriter(folder, {"i": "int(32)", "text": "utf8"},
                                       shard_length=30) as writer:
        for i in range(N):
            writer.append({"i": i, "text": f"text {i}"})
    reader = datasets.ShardedDatasetReader(folder)
    pipeline = grain.MapDataset.source(reader).shuffle(seed=2).batch(5)
    first, rest, whole = _resumed(pipeline, 7)
    labels = [batch["i"].tolist() for batch in first + rest]
    assert labels == [batch["i"].tolist() for batch in whole]
    assert sorted(i for batch in labels for i in batch) == list(range(N))
    assert whole[0]["text"][0] == f"text {whole[0]['i'][0]}"


def test_grain_worker_processes_resume_exactly(path, run_python) -> None:
    """Grain's multiprocessing prefetch, two workers: the reader travels to
    them pickled, and the pipeline's state resumes it. (In a subprocess:
    Grain's workers outlive their iterators a little.)"""
    outcome = run_python(f"""
        import grain, sackli
        reader = sackli.Reader({str(path)!r})
        pipeline = (grain.MapDataset.source(reader).shuffle(seed=4).to_iter_dataset()
                    .batch(4).mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))
        def resume():
            iterator = iter(pipeline)
            first = [next(iterator).tolist() for _ in range(6)]
            state = iterator.get_state()
            iterator.close()
            later = iter(pipeline)
            later.set_state(state)
            rest = [batch.tolist() for batch in later]
            whole = [batch.tolist() for batch in iter(pipeline)]
            return first + rest == whole and sorted(r for b in whole for r in b) == sorted(reader)
        report(resume)
    """, timeout=240)
    assert outcome.outcome() == {"ok": "True"}
