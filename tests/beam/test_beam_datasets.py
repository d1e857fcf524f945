"""`WriteToSackliDataset` and `ReadFromSackliDataset`: real pipelines on the
DirectRunner (in memory and multi-processing) and the portable runner, the
splitting contract (`source_test_utils`), replacement of an older dataset,
failed writes, interchange with the real `bags` package, and gs:// / s3://
against the test servers (tests/remote_helpers.py)."""

from __future__ import annotations

import os
import shutil

import apache_beam as beam
import bags
import pytest
from apache_beam.io import source_test_utils
from apache_beam.testing.util import assert_that, equal_to

from sackli import datasets
from sackli.beam import ReadFromSackliDataset, WriteToSackliDataset
from sackli.beam._dataset_publish import publish_dataset
from sackli.beam._dataset_sink import DatasetSink
from sackli.beam._dataset_source import DatasetSource, shard_sources
from beam_helpers import _quiet_beam, make_pipeline, run_and_expect_failure  # noqa: F401
from remote_helpers import remote, servers  # noqa: F401 (fixtures)

SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}


def point(i: int) -> dict:
    return {"image": bytes([i % 256]) * (i % 50), "label": i,
            "words": [f"w{i}.{j}" for j in range(i % 5)]}


def points(n: int, first: int = 0) -> list[dict]:
    return [point(i) for i in range(first, first + n)]


def _numbered_folders(directory: str):
    """A matcher: the output is the shard folders 000000, 000001, ... of
    `directory`, each holding its spec.json already."""
    def check(folders):
        assert sorted(folders) == [f"{directory}/{k:06}" for k in range(len(folders))]
        assert folders
        if "://" not in directory:
            assert all(os.path.isfile(os.path.join(f, "spec.json")) for f in folders)
    return check


def write(directory, datapoints, runner: str = "direct", **kwargs) -> None:
    """Runs WriteToSackliDataset, checking the shard folders it outputs."""
    with make_pipeline(runner) as p:
        folders = p | beam.Create(datapoints) | WriteToSackliDataset(str(directory), SPEC, **kwargs)
        assert_that(folders, _numbered_folders(str(directory)))


def read_all(directory) -> list[dict]:
    with datasets.ShardedDatasetReader(str(directory)) as reader:
        return list(reader)


def by_label(datapoints: list[dict]) -> list[dict]:
    return sorted(datapoints, key=lambda d: d["label"])


def bags_dataset(directory, datapoints, shard_length=None) -> None:
    with bags.ShardedDatasetWriter(directory, SPEC, bags.encoders,
                                   shard_length=shard_length) as writer:
        for datapoint in datapoints:
            writer.append(datapoint)


# --- Writing ------------------------------------------------------------------


class TestWrite:
    @pytest.mark.parametrize("runner", ["direct", "multi_processing", "portable"])
    def test_round_trip(self, tmp_path, runner):
        target = tmp_path / "ds"
        write(target, points(95), runner, shard_length=20)
        names = sorted(os.listdir(target))
        assert names == [f"{k:06}" for k in range(len(names))]
        assert len(names) >= 5  # 95 datapoints, at most 20 a shard
        with datasets.ShardedDatasetReader(str(target)) as reader:
            assert all(len(shard) <= 20 for shard in reader.shard_readers)
            assert by_label(list(reader)) == points(95)
        assert os.listdir(tmp_path) == ["ds"]  # no temporary folder left

    def test_bags_reads_what_it_writes(self, tmp_path):
        write(tmp_path / "ds", points(30), shard_length=7)
        reader = bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders)
        assert by_label([reader[i] for i in range(len(reader))]) == points(30)

    def test_shards_are_the_bytes_bags_writes(self, tmp_path):
        # One bundle writes the shards in order: the same bytes as bags.
        write(tmp_path / "ours", points(12), shard_length=12)
        bags_dataset(tmp_path / "theirs", points(12))
        for name in sorted(os.listdir(tmp_path / "theirs" / "000000")):
            ours = (tmp_path / "ours" / "000000" / name).read_bytes()
            assert ours == (tmp_path / "theirs" / "000000" / name).read_bytes(), name

    def test_a_rewrite_replaces_the_older_dataset(self, tmp_path):
        target = tmp_path / "ds"
        write(target, points(60), shard_length=10)
        assert len(os.listdir(target)) >= 6
        write(target, points(3, first=100))
        assert sorted(os.listdir(target)) == ["000000"]
        assert by_label(read_all(target)) == points(3, first=100)
        assert os.listdir(tmp_path) == ["ds"]

    def test_a_failed_write_keeps_the_older_dataset(self, tmp_path):
        target = tmp_path / "ds"
        write(target, points(25), shard_length=10)
        before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
        bad = points(10) + [{"label": 1}]  # no image, no words
        run_and_expect_failure(
            lambda p: p | beam.Create(bad) | WriteToSackliDataset(str(target), SPEC),
            "ValueError", "missing fields: 'image', 'words'")
        assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} == before
        # What the failed write left is hidden, and no reader takes it.
        visible = [n for n in os.listdir(tmp_path) if not n.startswith(".")]
        assert visible == ["ds"]
        assert by_label(read_all(target)) == points(25)

    def test_an_encoder_that_rejects_a_value_fails_the_pipeline(self, tmp_path):
        bad = points(5) + [{**point(5), "label": "five"}]
        run_and_expect_failure(
            lambda p: p | beam.Create(bad) | WriteToSackliDataset(str(tmp_path / "ds"), SPEC),
            "field 'label'", "encoder rejected")
        assert not (tmp_path / "ds").exists()
        assert all(name.startswith(".") for name in os.listdir(tmp_path))

    def test_a_folder_with_other_files_is_not_replaced(self, tmp_path):
        target = tmp_path / "mine"
        target.mkdir()
        (target / "notes.txt").write_text("keep me")
        run_and_expect_failure(
            lambda p: p | beam.Create(points(3)) | WriteToSackliDataset(str(target), SPEC),
            "FileExistsError", "'notes.txt'", "not dataset shards")
        assert os.listdir(target) == ["notes.txt"]

    def test_an_empty_pcollection_writes_one_empty_shard(self, tmp_path):
        with make_pipeline() as p:
            _ = (p | beam.Create([]).with_output_types(dict)
                 | WriteToSackliDataset(str(tmp_path / "ds"), SPEC))
        assert os.listdir(tmp_path / "ds") == ["000000"]
        with datasets.ShardedDatasetReader(str(tmp_path / "ds")) as reader:
            assert len(reader) == 0 and reader.shards == 1
        with make_pipeline() as p:
            assert_that(p | ReadFromSackliDataset(str(tmp_path / "ds")), equal_to([]))

    def test_custom_encoders_and_compression(self, tmp_path):
        encode, decode = upper_codecs()
        encoders = {**datasets.encoders, "upper": encode}
        spec = {"name": "upper", "n": "int(2)"}
        with make_pipeline("multi_processing") as p:
            _ = (p | beam.Create([{"name": "ab", "n": i} for i in range(9)])
                 | WriteToSackliDataset(str(tmp_path / "ds"), spec, encoders, shard_length=4,
                                        compression={"name": "zstd"}))
        decoders = {**datasets.decoders, "upper": decode}
        with datasets.ShardedDatasetReader(str(tmp_path / "ds"), decoders) as reader:
            assert sorted(d["n"] for d in reader) == list(range(9))
            assert {d["name"] for d in reader} == {"AB!"}
        assert sorted(os.listdir(tmp_path / "ds" / "000000")) == [
            "n.bag", "name.bagz", "refs.bag", "spec.json"]

    @pytest.mark.parametrize("args,kwargs,error,message", [
        (({"a": "nope("},), {}, ValueError, "bad type"),
        (({"a": "jpeg2"},), {}, ValueError, "no encoder for type 'jpeg2'"),
        ((SPEC,), {"shard_length": 0}, ValueError, "shard_length"),
        ((SPEC,), {"compression": {"x": "zstd"}}, ValueError, "field 'x'"),
        ((SPEC, []), {}, TypeError, "encoders must be a dict"),
    ])
    def test_bad_arguments(self, tmp_path, args, kwargs, error, message):
        with pytest.raises(error, match=message):
            WriteToSackliDataset(str(tmp_path / "ds"), *args, **kwargs)
        assert not (tmp_path / "ds").exists()  # no I/O at construction

    def test_display_data(self, tmp_path):
        items = {d.key: d.value for d in beam.transforms.display.DisplayData.create_from(
            WriteToSackliDataset(str(tmp_path / "ds"), SPEC, shard_length=5)).items}
        assert items["directory"] == str(tmp_path / "ds")
        assert items["shard_length"] == 5
        assert "label: int(8)" in items["spec"]


def upper_codecs():
    """(encode, decode) of a custom type. Made here, not at module level, so
    that workers of other processes get them by value: they cannot import
    this test module."""
    def encode(value, *args):
        return value.upper().encode()

    def decode(buffer, *args):
        return buffer.decode() + "!"

    return encode, decode


# --- Reading ------------------------------------------------------------------


@pytest.fixture
def bags_ds(tmp_path):
    """(folder, datapoints) of a dataset written by the real bags package:
    5 shards of up to 11 datapoints, one of them 1 datapoint long."""
    datapoints = points(45)
    bags_dataset(tmp_path / "bags", datapoints, shard_length=11)
    return tmp_path / "bags", datapoints


class TestRead:
    @pytest.mark.parametrize("runner", ["direct", "multi_processing", "portable"])
    def test_reads_a_bags_dataset(self, bags_ds, runner):
        folder, datapoints = bags_ds
        with make_pipeline(runner) as p:
            assert_that(p | ReadFromSackliDataset(str(folder)), equal_to(datapoints))

    @pytest.mark.parametrize("mask,project", [
        ({"label": True}, lambda d: {"label": d["label"]}),
        ({"words": range(1, 3), "label": False}, lambda d: {"words": d["words"][1:3]}),
        ({"words": slice(2, None), "image": True},
         lambda d: {"words": d["words"][2:], "image": d["image"]}),
        ({}, lambda d: {}),
    ])
    def test_masks(self, bags_ds, mask, project):
        folder, datapoints = bags_ds
        with make_pipeline() as p:
            assert_that(p | ReadFromSackliDataset(folder, mask=mask),
                        equal_to([project(d) for d in datapoints]))

    def test_custom_decoders(self, bags_ds):
        folder, datapoints = bags_ds
        decoders = {**datasets.decoders, "utf8": upper_codecs()[1]}
        with make_pipeline("multi_processing") as p:
            assert_that(p | ReadFromSackliDataset(str(folder), decoders, {"words": True}),
                        equal_to([{"words": [w + "!" for w in d["words"]]} for d in datapoints]))

    def test_no_io_at_construction(self, tmp_path):
        ReadFromSackliDataset(str(tmp_path / "not yet"))
        assert os.listdir(tmp_path) == []

    def test_a_missing_dataset_fails_the_pipeline(self, tmp_path):
        run_and_expect_failure(
            lambda p: p | ReadFromSackliDataset(str(tmp_path / "none")),
            "FileNotFoundError", "none")

    def test_a_mask_with_an_unknown_field_fails_the_pipeline(self, bags_ds):
        folder, _ = bags_ds
        run_and_expect_failure(
            lambda p: p | ReadFromSackliDataset(str(folder), mask={"caption": True}),
            "ValueError", "'caption'", str(folder))

    def test_a_missing_field_file_fails_the_pipeline(self, bags_ds):
        folder, _ = bags_ds
        os.remove(folder / "000002" / "words.bag")
        run_and_expect_failure(
            lambda p: p | ReadFromSackliDataset(str(folder)),
            "FileNotFoundError", "words.bag")

    @pytest.mark.parametrize("mask,error,message", [
        ([("label", True)], TypeError, "mask must be a dict"),
        ({"label": 1}, TypeError, "field 'label' must be a bool"),
        (None, None, None),
    ])
    def test_mask_checked_at_construction(self, tmp_path, mask, error, message):
        if error is None:
            ReadFromSackliDataset(str(tmp_path), mask=mask)
            return
        with pytest.raises(error, match=message):
            ReadFromSackliDataset(str(tmp_path), mask=mask)

    def test_display_data(self, bags_ds):
        folder, _ = bags_ds
        items = {d.key: d.value for d in beam.transforms.display.DisplayData.create_from(
            ReadFromSackliDataset(str(folder), mask={"label": True})).items}
        assert items == {"directory": str(folder), "mask": "{'label': True}"}


class TestSplitting:
    @pytest.mark.parametrize("desired", [1, 40, 300, 10**9])
    def test_bundles_equal_the_whole(self, bags_ds, desired):
        folder, datapoints = bags_ds
        source = DatasetSource(str(folder), None, None)
        bundles = list(source.split(desired))
        shards = 5
        if desired == 10**9:
            assert len(bundles) == shards
        else:
            assert len(bundles) > shards
        assert by_label(source_test_utils.read_from_source(source, None, None)) == datapoints
        source_test_utils.assert_sources_equal_reference_source(
            (source, None, None), [(b.source, b.start_position, b.stop_position) for b in bundles])

    def test_bundle_sizes_follow_the_files(self, bags_ds):
        folder, _ = bags_ds
        shard = shard_sources(str(folder), None, None)[0]
        size = sum(p.stat().st_size for p in (folder / "000000").iterdir())
        assert shard.estimate_size() == size
        bundles = list(shard.split(size // 4))  # 11 datapoints: ranges of 2 or 3
        assert [(b.start_position, b.stop_position) for b in bundles][0] == (0, 2)
        assert bundles[-1].stop_position == 11
        assert DatasetSource(str(folder), None, None).estimate_size() == sum(
            p.stat().st_size for p in folder.rglob("*") if p.is_file())

    def test_split_at_fraction_exhaustive(self, bags_ds):
        folder, _ = bags_ds
        for shard in shard_sources(str(folder), None, {"label": True, "words": range(1, 2)}):
            if len(source_test_utils.read_from_source(shard, None, None)) > 1:
                source_test_utils.assert_split_at_fraction_exhaustive(
                    shard, perform_multi_threaded_test=False)

    def test_split_at_fraction_cases(self, bags_ds):
        folder, _ = bags_ds
        shard = shard_sources(str(folder), None, None)[1]
        stu = source_test_utils
        stu.assert_split_at_fraction_succeeds_and_consistent(shard, 1, 0.5)
        stu.assert_split_at_fraction_succeeds_and_consistent(shard, 5, 0.9)
        stu.assert_split_at_fraction_fails(shard, 10, 0.2)

    def test_empty_shards_are_skipped(self, tmp_path):
        bags_dataset(tmp_path / "ds", points(4), shard_length=4)
        with datasets.DatasetWriter(tmp_path / "ds" / "000001", SPEC):
            pass  # an empty shard
        sources = shard_sources(str(tmp_path / "ds"), None, None)
        assert [s.folder for s in sources] == [str(tmp_path / "ds" / "000000")]


# --- gs:// and s3:// ----------------------------------------------------------


class TestRemote:
    @pytest.mark.parametrize("runner", ["direct", "multi_processing"])
    def test_write_rewrite_and_read(self, remote, runner):
        url = remote.url("ds")
        write(url, points(33), runner, shard_length=10)
        shard_objects = {"spec.json", "refs.bag", "image.bag", "label.bag", "words.bag"}
        objects = set(remote.objects())
        shards = sorted({name.split("/")[1] for name in objects})
        assert shards == [f"{k:06}" for k in range(len(shards))] and len(shards) >= 4
        assert objects == {f"ds/{s}/{n}" for s in shards for n in shard_objects}  # no temp left
        with make_pipeline() as p:
            assert_that(p | ReadFromSackliDataset(url, mask={"label": True}),
                        equal_to([{"label": i} for i in range(33)]))
        # A rewrite with fewer shards: the older ones are gone.
        write(url, points(2, first=50))
        assert set(remote.objects()) == {f"ds/000000/{n}" for n in shard_objects}
        assert by_label(read_all(url)) == points(2, first=50)

    def test_multi_processing_read_of_a_bags_dataset(self, remote, tmp_path):
        bags_dataset(tmp_path / "ds", points(21), shard_length=8)
        for path in (tmp_path / "ds").rglob("*.*"):
            remote.put(f"ds/{path.parent.name}/{path.name}", path.read_bytes())
        with make_pipeline("multi_processing") as p:
            assert_that(p | ReadFromSackliDataset(remote.url("ds")), equal_to(points(21)))

    def test_splitting_lists_the_dataset_once(self, remote, tmp_path):
        # Sizes come from one listing of the whole dataset (not one per
        # shard), the shards' lengths from their refs.bag tails, read
        # overlapped (the proxy holds each request 20 ms).
        bags_dataset(tmp_path / "ds", points(40), shard_length=5)
        for path in (tmp_path / "ds").rglob("*.*"):
            remote.put(f"ds/{path.parent.name}/{path.name}", path.read_bytes())
        remote.proxy.latency = 0.02
        source = DatasetSource(remote.url("ds"), None, None)
        assert source.estimate_size() == sum(
            p.stat().st_size for p in (tmp_path / "ds").rglob("*.*"))
        assert remote.proxy.counts["LIST"] == 1
        remote.proxy.reset_counts()
        bundles = list(source.split(1 << 20))
        assert [b.source.folder for b in bundles] == [remote.url(f"ds/{k:06}") for k in range(8)]
        assert remote.proxy.counts["LIST"] == 1
        assert remote.proxy.max_in_flight >= 4, remote.proxy.max_in_flight
        remote.proxy.reset_counts()
        list(source.split(1 << 20))  # the same copy of the source: listed already
        assert sum(remote.proxy.counts.values()) == 0

    def test_a_failed_write_keeps_the_older_dataset(self, remote):
        url = remote.url("ds")
        write(url, points(12), shard_length=5)
        before = {name: remote.get(name) for name in remote.objects()}
        run_and_expect_failure(
            lambda p: p | beam.Create(points(4) + [{"label": 3}]) | WriteToSackliDataset(url, SPEC),
            "missing fields")
        after = {name: remote.get(name) for name in remote.objects()}
        # Only hidden temporary objects were added, and no reader takes them.
        assert {n: v for n, v in after.items() if "/." not in "/" + n} == before
        assert by_label(read_all(url)) == points(12)


# --- Finalisation, step by step -------------------------------------------------


def _temp_shards(sink: DatasetSink, counts: list[int]) -> tuple[str, list[str]]:
    """What the bundles of a write leave before finalisation: the temporary
    folder and its complete shards (with `counts` datapoints each)."""
    temp = sink.initialize_write()
    shards, first = [], 0
    for n, count in enumerate(counts):
        writer = sink.open_writer(temp, f"bundle-{n}")
        for datapoint in points(count, first):
            writer.write(datapoint)
        shards.append(writer.close())
        first += count
    return temp, shards


@pytest.mark.parametrize("where", ["local", "remote"])
def test_a_retried_finalisation_skips_what_it_moved(tmp_path, remote, where):
    directory = str(tmp_path / "ds") if where == "local" else remote.url("ds")
    sink = DatasetSink(directory, SPEC, None, None)
    temp, shards = _temp_shards(sink, [3, 2])
    finals = list(publish_dataset(temp, shards, directory))
    assert finals == [f"{directory}/000000", f"{directory}/000001"]
    assert list(publish_dataset(temp, shards, directory)) == finals  # again: nothing to do
    assert by_label(read_all(directory)) == points(5)


def test_a_finalisation_retried_after_the_swap_only_cleans_up(tmp_path, monkeypatch):
    """A local finalisation that swapped the folders but died before
    deleting its temporary folder: the retry finds the dataset in place."""
    directory = str(tmp_path / "ds")
    sink = DatasetSink(directory, SPEC, None, None)
    temp, shards = _temp_shards(sink, [3, 2])
    real_rmtree = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", lambda *args, **kwargs: None)  # dies before cleaning
    finals = list(publish_dataset(temp, shards, directory))
    monkeypatch.setattr(shutil, "rmtree", real_rmtree)
    assert os.path.isdir(temp)
    assert list(publish_dataset(temp, shards, directory)) == finals
    assert not os.path.exists(temp)
    assert by_label(read_all(directory)) == points(5)


@pytest.mark.parametrize("where", ["local", "remote"])
def test_a_lost_shard_stops_the_finalisation(tmp_path, remote, where):
    directory = str(tmp_path / "ds") if where == "local" else remote.url("ds")
    write(directory, points(4))
    sink = DatasetSink(directory, SPEC, None, None)
    temp, shards = _temp_shards(sink, [2])
    with pytest.raises(FileNotFoundError, match="missing before finalisation"):
        list(publish_dataset(temp, shards + [shards[0] + "-lost"], directory))
    # Nothing was replaced: the older dataset is still the dataset.
    assert by_label(read_all(directory)) == points(4)
