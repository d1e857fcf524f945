"""The loader peers benchmark's own logic (benchmarks/loader_peers.py), with
no peer virtualenv: the images it makes, sackli's side of every measurement
(benchmarks/_loader_formats.py, as its worker runs it) and the tables, with
"n/a" rows. No timing is asserted; the real run lives in benchmarks/."""

from __future__ import annotations

import argparse
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import _loader_charts  # noqa: E402
import _loader_formats  # noqa: E402
import loader_peers  # noqa: E402


@pytest.fixture(scope="module")
def samples():
    return loader_peers.make_samples(60, seed=3)


def test_images_are_pngs_of_the_documented_size(samples):
    assert len(samples) == 60
    for image, label in samples:
        assert image.startswith(b"\x89PNG\r\n\x1a\n")
        assert 4 * 1024 < len(image) < 21 * 1024
        assert 0 <= label < 1000
    assert loader_peers.make_samples(60, seed=3) == samples  # the same images every run


def test_the_samples_file_round_trips(samples, tmp_path):
    loader_peers.save_samples(samples, tmp_path / "samples")
    assert _loader_formats._samples(str(tmp_path / "samples")) == samples


def test_sackli_side_reads_back_what_it_wrote(samples, tmp_path):
    sackli_side = _loader_formats.FORMATS["sackli"]
    loader_peers.save_samples(samples, tmp_path / "samples")
    (tmp_path / "data").mkdir()
    written = _loader_formats.run({"loader": "write", "format": "sackli", "source": str(tmp_path / "samples"),
                                   "folder": str(tmp_path / "data"), "shards": 4})
    assert written["meta"] == {"shards": 4}
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        f"images-0000{i}-of-00004.bag" for i in range(4)]
    where = {"local": str(tmp_path / "data")}
    request = {"format": "sackli", "where": where, "meta": written["meta"]}
    epoch = _loader_formats.run({**request, "loader": "epoch", "seed": 5})
    assert (epoch["checksum"], epoch["records"]) == _loader_formats.digest(iter(samples))
    assert 0 < epoch["first_seconds"] <= epoch["seconds"]
    order = list(sackli_side.epoch(where, written["meta"], 5))
    assert sorted(order) == sorted(samples) and order != samples  # shuffled, each sample once
    singles = _loader_formats.run({**request, "loader": "random", "indices": [0, 59, 7]})
    assert singles["checks"] == [_loader_formats.digest(iter([samples[i]]))[0] for i in (0, 59, 7)]
    assert len(singles["micros"]) == 3 and min(singles["micros"]) > 0
    resumed = _loader_formats.run({**request, "loader": "resume", "seed": 5, "position": 30,
                                   "scratch": str(tmp_path)})
    assert resumed["exact"] is True and resumed["how"] == "EpochStream.load_state_dict"
    assert sackli_side.restore(where, written["meta"], 5,
                               sackli_side.checkpoint(where, written["meta"], 5, 30, str(tmp_path))[0]) == order[30]


def _run_with(na):
    args = argparse.Namespace(records=100, repeat=1, singles=10)
    run = loader_peers.Run(args, pathlib.Path("."), (0, 100))
    run.versions = {"sackli": "1", "webdataset": "1.0.2"}
    run.meta = {"sackli": {"shards": 8, "bytes": 10}, "webdataset": {"shards": 8, "bytes": 12}}
    run.epochs = {("sackli", "local"): [{"seconds": 0.01, "first": 0.001}, {"seconds": 0.02, "first": 0.002},
                                        {"seconds": 0.03, "first": 0.004}],
                  ("webdataset", "local"): [{"seconds": 0.08, "first": 0.05}],
                  ("sackli", "bucket cold"): [{"seconds": 0.1, "first": 0.01, "requests": 9}]}
    run.random = {"sackli": [float(i) for i in range(1, 101)]}
    run.resumes = {"sackli": [0.001], "webdataset": [0.004]}
    run.resume_how = {"sackli": "EpochStream.load_state_dict", "webdataset": "skip to the position"}
    run.resume_exact = {"sackli": True, "webdataset": False}
    run.na = na
    return run


def test_results_and_tables_say_why_a_row_is_missing():
    run = _run_with({("webdataset", "random"): "n/a: WebDataset reads records in order only",
                     ("tfrecord", "bucket cold"): "n/a: UnimplementedError: File system scheme 's3' not implemented"})
    result = loader_peers.results(run)
    sackli_row, wds = result["formats"]["sackli"], result["formats"]["webdataset"]
    assert sackli_row["local"] == {"records_per_s": 100 / 0.02, "runs": 3, "first_ms": 2.0, "requests": None}
    assert sackli_row["bucket cold"]["requests"] == 9
    assert sackli_row["random"] == {"median_us": 50.5, "p99_us": 99.0, "reads": 100}
    assert wds["na"]["random"] == "n/a: WebDataset reads records in order only"
    assert result["formats"]["tfrecord"]["na"]["bucket cold"].startswith("n/a: UnimplementedError")
    assert result["formats"]["mosaicml"]["na"]["resume"] == "n/a: not run"
    lines = loader_peers.tables(result)
    assert "| sackli | local | 5,000 | 1.00 | 2.0 | - | |" in lines
    assert "| sackli | bucket cold | 1,000 | 1.00 | 10.0 | 9 | |" in lines
    assert "| WebDataset | local | 1,250 | 0.25 | 50.0 | - | |" in lines
    assert "| WebDataset | 4.0 | 4.00 | no | skip to the position |" in lines
    assert "| WebDataset | - | - | - | n/a: WebDataset reads records in order only |" in lines
    assert _loader_charts.short_reason(result["formats"]["tfrecord"]["na"]["bucket cold"]) == "n/a: no s3:// reader"
    assert _loader_charts.short_reason("n/a: WebDataset reads records in order only") == "n/a: sequential format"


def test_arguments():
    args = loader_peers.parse_args(["--quick"])
    assert (args.records, args.repeat, args.singles, args.shards) == (1_000, 2, 200, 8)
    assert loader_peers.parse_args([]).records == 4_000
    with pytest.raises(SystemExit):
        loader_peers.parse_args(["--records", "0"])
