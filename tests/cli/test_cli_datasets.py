"""`sackli info` and `sackli verify` on sackli.datasets folders (one shard
and sharded; local, and remote on the moto S3 server and fake-gcs-server),
run as the console script. Damaged datasets are made by rewriting their
files, and every problem must be reported with its field and file."""

from __future__ import annotations

import json

import bags

from sackli import datasets
from sackli.datasets._refs import pack_refs
from cli_helpers import fails, ok, sackli_cli
from remote_helpers import remote, servers  # noqa: F401 (fixtures, loaded through conftest.py)

SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"image": bytes(10 + i), "label": i, "words": ["a"] * (i % 3)}


def _write(directory, count: int, **options) -> None:
    with datasets.ShardedDatasetWriter(directory, SPEC, **options) as writer:
        for i in range(count):
            writer.append(_point(i))


def _verify(*args, cwd) -> tuple[int, list[str]]:
    result = sackli_cli("verify", *args, cwd=cwd)
    assert "Traceback" not in result.stderr.decode()
    return result.returncode, result.stdout.decode().splitlines()


def test_info_of_a_sharded_dataset(tmp_path):
    _write(tmp_path / "ds", 12, shard_length=5, compression={"image": "zstd"})
    facts = json.loads(ok("info", "ds", "--json", cwd=tmp_path))
    assert facts["layout"] == "sharded"
    assert [s["datapoints"] for s in facts["shards"]] == [5, 5, 2]
    assert facts["shards"][2]["path"] == "ds/000002"
    assert facts["datapoints"] == 12
    by_name = {field["name"]: field for field in facts["fields"]}
    assert by_name["words"] == {
        "name": "words", "type": "utf8[]", "file": "words.bag", "compression": "none",
        "records": sum(i % 3 for i in range(12)),
        "bytes": sum((tmp_path / "ds" / s / "words.bag").stat().st_size
                     for s in ("000000", "000001", "000002"))}
    assert by_name["image"]["file"] == "image.bagz" and by_name["image"]["compression"] == "zstd"
    assert by_name["label"]["type"] == "int(8)" and by_name["label"]["records"] == 12
    all_bags = [p for p in (tmp_path / "ds").rglob("*.bag*")]
    assert facts["bytes"] == sum(p.stat().st_size for p in all_bags)
    text = ok("info", "ds", cwd=tmp_path).decode()
    assert "shards:     3 (datapoints per shard: 5, 5, 2)" in text
    assert "datapoints: 12" in text
    assert any(line.split()[:5] == ["label", "int(8)", "label.bag", "none", "12"]
               for line in text.splitlines())
    assert any(line.split()[:4] == ["image", "bytes", "image.bagz", "zstd"]
               for line in text.splitlines())


def test_info_of_one_shard_written_by_bags(tmp_path):
    with bags.DatasetWriter(tmp_path / "shard", SPEC, bags.encoders) as writer:
        for i in range(4):
            writer.append(_point(i))
    facts = json.loads(ok("info", "shard", "--json", cwd=tmp_path))
    assert facts["layout"] == "one shard" and facts["datapoints"] == 4
    assert facts["shards"] == [{"path": "shard", "datapoints": 4}]


def test_verify_accepts_a_good_dataset(tmp_path):
    _write(tmp_path / "ds", 9, shard_length=4)
    assert _verify("ds", cwd=tmp_path) == (0, ["verify: OK, dataset of 9 datapoints in 3 shard(s)"])
    assert _verify("ds/000001", cwd=tmp_path)[0] == 0


def _replace_bag(path, records) -> None:
    path.unlink()
    with datasets.BagWriter(str(path)) as writer:
        writer.extend(records)


def test_verify_reports_refs_past_a_field_file(tmp_path):
    _write(tmp_path / "ds", 6, shard_length=3)
    # Shard 1's label.bag loses its last value: datapoint 2 of it points past the end.
    _replace_bag(tmp_path / "ds" / "000001" / "label.bag", [b"\0" * 8] * 2)
    status, lines = _verify("ds", cwd=tmp_path)
    assert status == 1
    assert lines[0] == ("ds/000001/refs.bag: datapoint 2 refers to 2 in field 'label', but "
                        "ds/000001/label.bag has 2 records")
    assert lines[-1] == "verify: 1 problem(s) in dataset ds"


def test_verify_reports_list_ranges_out_of_bounds_and_unreferenced_records(tmp_path):
    _write(tmp_path / "ds", 3, shard_length=3)
    shard = tmp_path / "ds" / "000000"
    _replace_bag(shard / "refs.bag", [pack_refs([0, 0, []]), pack_refs([1, 1, [0, 1]]),
                                      pack_refs([2, 2, [1, 5]])])
    status, lines = _verify("ds", cwd=tmp_path)
    assert status == 1
    assert "datapoint 2 refers to [1, 5] in field 'words'" in lines[0]
    _replace_bag(shard / "refs.bag", [pack_refs([0, 0, []]), pack_refs([1, 1, []])])
    status, lines = _verify("ds", "--fail-fast", cwd=tmp_path)
    assert status == 1
    assert lines == [
        "field 'image' (ds/000000/image.bag) holds 3 records, but the datapoints' refs "
        "(ds/000000/refs.bag) refer to 2",
        "verify: stopped at the first problem (--fail-fast)"]


def test_verify_reports_corrupt_and_missing_files(tmp_path):
    _write(tmp_path / "ds", 6, shard_length=3, compression={"image": "zstd"})
    image = tmp_path / "ds" / "000000" / "image.bagz"
    data = bytearray(image.read_bytes())
    data[0:4] = b"\xff\xff\xff\xff"  # datapoint 0's zstd frame
    image.write_bytes(bytes(data))
    (tmp_path / "ds" / "000001" / "words.bag").unlink()
    status, lines = _verify("ds", cwd=tmp_path)
    assert status == 1
    assert lines[0].startswith("field 'image' (ds/000000/image.bagz), record 0: ")
    assert lines[1].startswith("shard ds/000001 cannot be opened: ")
    assert "ds/000001/words.bag" in lines[1]
    assert lines[-1] == "verify: 2 problem(s) in dataset ds"


def test_verify_reports_a_refs_record_that_is_not_a_ref_list(tmp_path):
    _write(tmp_path / "ds", 2)
    _replace_bag(tmp_path / "ds" / "000000" / "refs.bag", [pack_refs([0, 0, []]), b"\xc1"])
    status, lines = _verify("ds", cwd=tmp_path)
    assert status == 1
    assert lines[0] == ("ds/000000/refs.bag: the refs of datapoint 1 are not a msgpack list of "
                        "3 entries (one per field of spec.json)")


def test_bag_reading_options_are_refused(tmp_path):
    _write(tmp_path / "ds", 2)
    assert fails("info", "ds", "--layout", "INTERLEAVED", cwd=tmp_path, status=2) == (
        "sackli info: error: ds is a dataset folder; --layout is for bags "
        "(see 'sackli info --help')")
    assert "--limits-placement is for bags" in fails(
        "verify", "ds", "--limits-placement", "SEPARATE", cwd=tmp_path, status=2)


def test_a_directory_that_is_not_a_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    message = fails("info", "empty", cwd=tmp_path)
    assert "empty: a directory, but not a dataset" in message
    assert "empty: a directory, but not a dataset" in fails("verify", "empty", cwd=tmp_path)


def test_remote_info_and_verify(remote, tmp_path):
    _write(remote.url("ds"), 7, shard_length=4)
    facts = json.loads(ok("info", remote.url("ds"), "--json", cwd=tmp_path))
    assert [s["path"] for s in facts["shards"]] == [remote.url("ds/000000"), remote.url("ds/000001")]
    assert facts["datapoints"] == 7
    assert _verify(remote.url("ds"), cwd=tmp_path)[0] == 0
    remote.delete("ds/000001/label.bag")
    status, lines = _verify(remote.url("ds"), cwd=tmp_path)
    assert status == 1 and remote.url("ds/000001/label.bag") in lines[0]


def test_verify_reports_shards_with_different_specs(tmp_path):
    _write(tmp_path / "ds", 2)
    with datasets.DatasetWriter(tmp_path / "ds" / "000001", {"label": "int(8)"}) as writer:
        writer.append({"label": 3})
    status, lines = _verify("ds", cwd=tmp_path)
    assert status == 1
    assert lines[0] == "shard ds/000001: its spec.json differs from that of ds/000000"
