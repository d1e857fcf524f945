"""The command line keeps the contract of its docs (docs/cli.md): wrong
arguments exit 2 with the subcommand's usage prefix; a file that is not a bag
is named for what it is; dataset folders read in every reading subcommand;
convert's dictionaries are named for their side; enum flags ignore case.
Run as the console script (issue 31, section 3)."""

from __future__ import annotations

import gzip
import json

import pytest

import sackli
import sackli.maps
from sackli import datasets
from cli_helpers import RECORDS, bag, fails, ok, sackli_cli, write_bag  # noqa: F401,F811 (bag: a fixture)


def _usage_line(args, cwd) -> str:
    """Runs a command that must be a usage error; returns its one line."""
    result = sackli_cli(*args, cwd=cwd)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert result.stdout == b""
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# --- 1. wrong arguments: exit 2, the subcommand's prefix ----------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["cat", "small.bagz", "--range", "x"], "'x' is not A:B"),
        (["cat", "small.bagz", "--indices", "1,x"], "not a comma-separated list of integers"),
        (["head", "small.bagz", "-n", "-1"], "must be >= 0"),
        (["convert", "small.bagz", "out.bagz", "--level", "99"], "zstd level 99 is outside"),
        (["convert", "small.bagz", "out.bagz", "--max-shard-bytes", "1MB"],
         "--max-shard-bytes with a name@*.ext destination"),
        (["convert", "small.bagz", "out.bag", "--level", "3"], "apply to .bagz destinations only"),
        (["convert", "small.bagz", "out.csv"], "cannot tell the format from the name"),
        (["convert", "small.bagz", "small.bagz"], "both source and destination"),
        (["convert", "small.bagz", "out.jsonl", "--encoding", "json"],
         "apply to Parquet conversions only"),
        # An argument that is wrong for this bag is still a wrong argument.
        (["get", "small.bagz", "5"], "index 5 out of range for a reader of 5 records"),
        (["cat", "small.bagz", "--indices", "0,5"], "index 5 out of range"),
    ],
)
def test_wrong_arguments_exit_2_with_the_subcommand_prefix(bag, args, words) -> None:
    line = _usage_line(args, cwd=bag)
    command = args[0]
    assert line.startswith(f"sackli {command}: error: "), line
    assert line.endswith(f" (see 'sackli {command} --help')"), line
    assert words in line
    assert not (bag / "out.bagz").exists() and not (bag / "out.bag").exists()


def test_a_wrong_argument_for_a_dataset_or_a_map_exits_2(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 2)
    line = _usage_line(["info", "ds", "--layout", "INTERLEAVED"], cwd=tmp_path)
    assert line == ("sackli info: error: ds is a dataset folder; --layout is for bags "
                    "(see 'sackli info --help')")
    sackli.maps.write(str(tmp_path / "m.mb"), [(1, b"one")])
    assert _usage_line(["get", "m.mb", "15"], cwd=tmp_path) == (
        "sackli get: error: m.mb: key 15 not found (see 'sackli get --help')")
    assert _usage_line(["info", "m.mb", "--layout", "interleaved"], cwd=tmp_path) == (
        "sackli info: error: m.mb is a map; --layout is for bags (see 'sackli info --help')")


def test_failures_that_are_not_arguments_still_exit_1(bag) -> None:
    assert fails("count", "missing.bag", cwd=bag) == (
        "sackli: error: missing.bag: open: No such file or directory")


# --- 2. a file that is not a bag says what it is -------------------------------


def _parquet(path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1, 2, 3]}), str(path))


@pytest.mark.parametrize("command", ["info", "count", "cat", "head", "get", "verify", "schema"])
def test_a_parquet_file_is_named_as_one(tmp_path, command) -> None:
    _parquet(tmp_path / "events.parquet")
    args = [command, "events.parquet"] + (["0"] if command == "get" else [])
    result = sackli_cli(*args, cwd=tmp_path)
    output = (result.stdout + result.stderr).decode()
    assert result.returncode == 1, output
    assert "Traceback" not in output
    assert "events.parquet: not a bag: it is a Parquet file: try sackli convert" in output
    assert "limits section" not in output


@pytest.mark.parametrize("command", ["count", "cat", "head"])
def test_a_map_is_named_as_one(tmp_path, command) -> None:
    sackli.maps.write(str(tmp_path / "m.mb"), [(1, b"one"), (2, b"two")])
    line = fails(command, "m.mb", cwd=tmp_path)
    assert line.startswith("sackli: error: m.mb: not a bag: it is a map (MapBuffer)"), line
    assert "sackli info" in line


def _tfrecord(path) -> None:
    from sackli import formats

    with formats.TFRecordWriter(str(path)) as writer:
        writer.write_many([b"a", b"bc"])


@pytest.mark.parametrize(
    ("name", "make", "what"),
    [
        ("lines.bag", lambda p: p.write_text('{"a": 1}\n{"a": 2}\n'), "it is JSON Lines"),
        ("notes.bag", lambda p: p.write_text("just some words\nand more\n"), "it is text"),
        ("data.gz", lambda p: p.write_bytes(gzip.compress(b"x" * 100)), "it is gzip-compressed"),
        ("data.zst", lambda p: p.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(1, 40))),
         "it is zstd-compressed"),
        ("rec.bag", _tfrecord, "it is a TFRecord file"),
        ("t.arrow", lambda p: p.write_bytes(b"ARROW1\0\0" + bytes(40) + b"ARROW1"),
         "it is an Arrow IPC file"),
    ],
)
def test_other_kinds_of_file_are_named(tmp_path, name, make, what) -> None:
    make(tmp_path / name)
    line = fails("count", name, cwd=tmp_path)
    assert line.startswith(f"sackli: error: {name}: not a bag: {what}"), line


def test_a_shard_count_that_does_not_exist_names_the_counts_that_do(tmp_path) -> None:
    # The library's open hint (sackli/_open_hints.py), on the command line too.
    with sackli.ShardedWriter(str(tmp_path / "imgs@4.bagz")) as writer:
        writer.write_many([b"%d" % i for i in range(8)])
    assert fails("count", "imgs@8.bagz", cwd=tmp_path) == (
        "sackli: error: imgs-00000-of-00008.bagz: open: No such file or directory; imgs@8.bagz "
        "has no shard 0 of 8, but shard sets of other counts exist: imgs@4.bagz")


def test_a_damaged_bag_keeps_its_own_message(tmp_path) -> None:
    (tmp_path / "junk.bag").write_bytes(b"\x00\x01\x02\xff" * 10)
    assert "not a bag: it is" not in fails("count", "junk.bag", cwd=tmp_path)
    write_bag(tmp_path / "sep.bag", [b"a"], limits_placement=sackli.LimitsPlacement.SEPARATE)
    assert "--limits-placement SEPARATE" in fails("count", "sep.bag", cwd=tmp_path)


# --- 3. dataset folders in head, cat, count and schema -------------------------

_SPEC = {"blob": "bytes", "label": "int(8)", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"blob": b"\xff" * i, "label": i, "words": ["w"] * i}


def _write_dataset(directory, count: int, **options) -> None:
    with datasets.ShardedDatasetWriter(directory, _SPEC, **options) as writer:
        for i in range(count):
            writer.append(_point(i))


def _expected_json(i: int) -> dict:
    import base64

    return {"blob": base64.b64encode(b"\xff" * i).decode(), "label": i, "words": ["w"] * i}


def test_count_of_a_dataset(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 5, shard_length=2)
    assert ok("count", "ds", cwd=tmp_path) == b"5\n"
    assert ok("count", "ds/000001", cwd=tmp_path) == b"2\n"


def test_head_and_cat_of_a_dataset_print_json_objects(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 5, shard_length=2)
    head = ok("head", "ds", "-n", "2", "--format", "json", cwd=tmp_path).decode().splitlines()
    assert [json.loads(line) for line in head] == [_expected_json(0), _expected_json(1)]
    tail = ok("cat", "ds", "--range", "-2:", "--format", "json", cwd=tmp_path).decode()
    assert [json.loads(line) for line in tail.splitlines()] == [_expected_json(3), _expected_json(4)]
    chosen = ok("cat", "ds", "--indices", "4,0", "--format", "json", cwd=tmp_path).decode()
    assert [json.loads(line)["label"] for line in chosen.splitlines()] == [4, 0]


def test_cat_of_a_dataset_prints_a_table(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 3)
    lines = ok("cat", "ds", cwd=tmp_path).decode().splitlines()
    assert lines[0].split() == ["blob", "label", "words"]
    assert len(lines) == 4
    assert lines[3].split()[1] == "2"


def test_raw_output_of_a_dataset_is_a_usage_error(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 2)
    line = _usage_line(["cat", "ds", "--format", "raw"], cwd=tmp_path)
    assert line.startswith("sackli cat: error: ")


def test_schema_of_a_dataset(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 3)
    text = ok("schema", "ds", cwd=tmp_path).decode()
    assert "label" in text and "int(8)" in text and "utf8[]" in text
    facts = json.loads(ok("schema", "ds", "--json", cwd=tmp_path))
    assert facts["spec"] == _SPEC


# --- 4. convert's dictionaries: --source-dictionary, --output-dictionary --------


def test_convert_names_its_dictionaries_by_side(tmp_path) -> None:
    dictionary = b"a shared zstd dictionary of raw content " * 20
    (tmp_path / "dict").write_bytes(dictionary)
    lines = b"zstd dictionary of raw content a shared\nof raw content a shared zstd dictionary\n"
    (tmp_path / "in.txt").write_bytes(lines)
    ok("convert", "in.txt", "d.bagz", "--output-dictionary", "dict", cwd=tmp_path)
    assert ok("cat", "d.bagz", "--dictionary", "dict", cwd=tmp_path) == lines
    ok("convert", "d.bagz", "e.bagz", "--source-dictionary", "dict", "--output-dictionary", "dict",
       cwd=tmp_path)
    assert ok("cat", "e.bagz", "--dictionary", "dict", cwd=tmp_path) == lines
    # The old spelling still means the output's dictionary.
    ok("convert", "in.txt", "f.bagz", "--dictionary", "dict", cwd=tmp_path)
    assert ok("cat", "f.bagz", "--dictionary", "dict", cwd=tmp_path) == lines
    help_text = ok("convert", "--help", cwd=tmp_path).decode()
    assert "--output-dictionary" in help_text and "--source-dictionary" in help_text


# --- 5. enum flags ignore case -------------------------------------------------


def test_enum_flags_ignore_case(bag) -> None:
    assert ok("cat", "small.bagz", "--layout", "interleaved", "--format", "HEX", cwd=bag) == b"".join(
        record.hex().encode() + b"\n" for record in RECORDS)
    assert ok("head", "small.bagz", "-n", "1", "--format", "Json", "--decode", "RAW",
              cwd=bag) == b'"alpha"\n'
    ok("convert", "small.bagz", "sep.bag", "--output-limits-placement", "separate", cwd=bag)
    assert ok("count", "sep.bag", "--limits-placement", "Separate", cwd=bag) == b"5\n"
    help_text = ok("cat", "--help", cwd=bag).decode()
    assert "{CONCATENATED,INTERLEAVED}" in help_text and "{text,raw,hex,json}" in help_text


def test_an_unknown_enum_value_is_still_refused(bag) -> None:
    line = _usage_line(["cat", "small.bagz", "--layout", "diagonal"], cwd=bag)
    assert line == ("sackli cat: error: argument --layout: invalid choice: 'diagonal' (choose "
                    "from 'CONCATENATED', 'INTERLEAVED') (see 'sackli cat --help')")


def test_get_of_a_datapoint_and_a_folder_of_parquet_files(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 3)
    assert json.loads(ok("get", "ds", "-1", "--format", "json", cwd=tmp_path)) == _expected_json(2)
    assert _usage_line(["get", "ds", "3"], cwd=tmp_path) == (
        "sackli get: error: index 3 out of range for a dataset of 3 datapoints "
        "(see 'sackli get --help')")
    (tmp_path / "events").mkdir()
    _parquet(tmp_path / "events" / "part-0.parquet")
    assert fails("count", "events", cwd=tmp_path) == (
        "sackli: error: events: not a bag: it is a folder of Parquet files: try sackli convert "
        "events events.bagz")


def test_a_dataset_datapoint_that_does_not_read(tmp_path) -> None:
    _write_dataset(tmp_path / "ds", 3)
    # Field 'label' loses its last record: datapoint 2's ref points past it.
    field = tmp_path / "ds" / "000000" / "label.bag"
    records = list(datasets.BagReader(str(field))[0:2])
    field.unlink()
    with datasets.BagWriter(str(field)) as writer:
        writer.extend(records)
    stopped = sackli_cli("cat", "ds", "--format", "json", cwd=tmp_path)
    assert stopped.returncode == 1
    assert [json.loads(line)["label"] for line in stopped.stdout.decode().splitlines()] == [0, 1]
    assert stopped.stderr.decode().startswith("sackli: error: datapoint 2: ")
    skipped = sackli_cli("cat", "ds", "--format", "json", "--skip-corrupt", cwd=tmp_path)
    assert skipped.returncode == 1
    assert len(skipped.stdout.decode().splitlines()) == 2
    assert skipped.stderr.decode().splitlines()[0].startswith("sackli: skipped datapoint 2: ")
