"""The `sackli` console script, run as a real subprocess."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import struct
import subprocess
import sys
import time

import pytest

import sackli


def _load_spec_module():
    path = pathlib.Path(__file__).with_name("tfrecord_spec.py")
    spec = importlib.util.spec_from_file_location("tfrecord_spec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The TFRecord spec in plain Python (tests are not importable as a package).
tfrecord_spec = _load_spec_module()

RECORDS = [b"alpha", b"", b"caf\xc3\xa9", b"line\nbreak", b"\xff\xfe"]


def sackli_cli(*args: str, cwd, module: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "sackli"] if module else ["sackli"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, timeout=60)


def ok(*args: str, cwd) -> bytes:
    result = sackli_cli(*args, cwd=cwd)
    assert (result.returncode, result.stderr) == (0, b""), result.stderr.decode()
    return result.stdout


def fails(*args: str, cwd, status: int = 1) -> str:
    """Runs a failing command; returns its one stderr line."""
    result = sackli_cli(*args, cwd=cwd)
    assert result.returncode == status
    lines = result.stderr.decode().splitlines()
    assert "Traceback" not in result.stderr.decode()
    return lines[-1]


def write_bag(path, records, **options) -> None:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)


@pytest.fixture
def bag(tmp_path):
    write_bag(tmp_path / "small.bagz", RECORDS)
    return tmp_path


def test_crc32c_check_value() -> None:
    assert tfrecord_spec.crc32c(b"123456789") == 0xE3069283


# --- help and arguments -----------------------------------------------------------

def test_help_lists_every_command(tmp_path) -> None:
    text = ok("--help", cwd=tmp_path).decode()
    for command in ["info", "count", "head", "cat", "get", "verify", "recover", "convert", "demo"]:
        assert f"\n    {command} " in text
        sub = ok(command, "--help", cwd=tmp_path).decode()
        assert "example:\n  sackli " + command in sub


def test_python_dash_m_runs_the_same_cli(bag) -> None:
    result = sackli_cli("count", "small.bagz", cwd=bag, module=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"5\n", b"")


@pytest.mark.parametrize(
    ("args", "status", "line"),
    [
        (["count", "missing.bag"], 1,
         "sackli: error: missing.bag: open: No such file or directory"),
        (["get", "small.bagz", "5"], 1,
         "sackli: error: index 5 out of range for a reader of 5 records"),
        (["cat", "small.bagz", "--range", "1-2"], 1,
         "sackli: error: --range '1-2' is not A:B (e.g. 10:20, :5 or -3:)"),
        (["cat", "small.bagz", "--indices", "1,x"], 1,
         "sackli: error: --indices '1,x' is not a comma-separated list of integers"),
        (["head", "small.bagz", "-n", "-1"], 1, "sackli: error: -n must be >= 0, not -1"),
        (["count", "."], 1, "sackli: error: .: open: Is a directory"),
        (["convert", "in.parquet", "out.bag"], 1,
         "sackli: error: in.parquet: no such Parquet file or folder"),
        (["convert", "in.parquet", "out.jsonl"], 1,
         "sackli: error: Parquet converts to and from bags (.bag, .bagz) only"),
        (["convert", "small.bagz", "out.parquet", "--column", "x"], 1,
         "sackli: error: --column and --skip-nulls apply to Parquet sources"),
        (["convert", "small.bagz", "out.jsonl", "--encoding", "json"], 1,
         "sackli: error: --column, --skip-nulls, --encoding and --decode apply to Parquet "
         "conversions only"),
        (["convert", "small.bagz", "out.csv"], 1,
         "sackli: error: out.csv: cannot tell the format from the name (known: .bag, .bagz, "
         ".jsonl, .jsonl.gz, .ndjson, .parquet, .tfrecord, .tfrecord.gz, .tfrecords, "
         ".tfrecords.gz, .txt, .txt.gz)"),
        (["convert", "small.bagz", "small.bagz"], 1,
         "sackli: error: small.bagz is both source and destination; write elsewhere"),
        (["convert", "small.bagz", "out.bag", "--level", "9"], 1,
         "sackli: error: --level and --dictionary apply to .bagz destinations only"),
        (["convert", "small.bagz", "out@*.bag"], 1,
         "sackli: error: use --max-shard-bytes with a name@*.ext destination, and only then"),
        (["recover", "small.bagz"], 1,
         "sackli: error: small.bagz: nothing to recover: neither limits.small.bagz nor an "
         "unfinished write (.small.bagz.sackli-partial-*) exists beside it (the bag is complete, "
         "or it was never written)"),
        (["recover", "absent.bagz"], 1, "sackli: error: absent.bagz: no such file"),
        (["frobnicate"], 2, None),
        (["get", "small.bagz", "x"], 2,
         "sackli get: error: argument INDEX: invalid int value: 'x' (see 'sackli get --help')"),
    ],
)
def test_errors_are_one_line(bag, args, status, line) -> None:
    got = fails(*args, cwd=bag, status=status)
    if line is not None:
        assert got == line
    assert not (bag / "out.bag").exists()


# --- printing ---------------------------------------------------------------------

@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["cat", "small.bagz"], b"alpha\n\ncaf\xc3\xa9\nline\\nbreak\n\\xff\\xfe\n"),
        (["cat", "small.bagz", "--format", "raw"], b"alphacaf\xc3\xa9line\nbreak\xff\xfe"),
        (["cat", "small.bagz", "--format", "hex"], b"616c706861\n\n636166c3a9\n6c696e650a627265616b\nfffe\n"),
        (["cat", "small.bagz", "--format", "json"],
         b'"alpha"\n""\n"caf\xc3\xa9"\n"line\\nbreak"\n{"base64": "//4="}\n'),
        (["cat", "small.bagz", "--range=-2:"], b"line\\nbreak\n\\xff\\xfe\n"),
        (["cat", "small.bagz", "--range", ":1"], b"alpha\n"),
        (["cat", "small.bagz", "--indices", "2,0,2"], b"caf\xc3\xa9\nalpha\ncaf\xc3\xa9\n"),
        (["head", "small.bagz", "-n", "2", "--format", "json"], b'"alpha"\n""\n'),
        (["head", "small.bagz"], b"alpha\n\ncaf\xc3\xa9\nline\\nbreak\n\\xff\\xfe\n"),
        (["get", "small.bagz", "-1", "--format", "raw"], b"\xff\xfe"),
        (["get", "small.bagz", "0"], b"alpha\n"),
        (["count", "small.bagz"], b"5\n"),
    ],
)
def test_printing(bag, args, expected) -> None:
    assert ok(*args, cwd=bag) == expected


def test_reading_options_apply_to_every_reader(tmp_path) -> None:
    for shard in range(2):
        write_bag(tmp_path / f"s-{shard:05d}-of-00002.bag", [b"%d:%d" % (shard, i) for i in range(2)],
                  limits_placement=sackli.LimitsPlacement.SEPARATE)
    options = ["--limits-placement", "SEPARATE", "--layout", "INTERLEAVED"]
    assert ok("cat", "s@2.bag", *options, cwd=tmp_path) == b"0:0\n1:0\n0:1\n1:1\n"
    assert ok("count", "s@*.bag", *options, cwd=tmp_path) == b"4\n"
    assert ok("get", "s@2.bag", "1", *options, cwd=tmp_path) == b"1:0\n"
    assert ok("verify", "s@2.bag", *options, cwd=tmp_path) == b"verify: OK, 4 records in 2 shard(s)\n"


def test_dictionary_option(tmp_path) -> None:
    dictionary = b"a shared zstd dictionary of raw content " * 20
    (tmp_path / "dict").write_bytes(dictionary)
    lines = b"zstd dictionary of raw content a shared\nof raw content a shared zstd dictionary\n"
    (tmp_path / "in.txt").write_bytes(lines)
    ok("convert", "in.txt", "d.bagz", "--dictionary", "dict", cwd=tmp_path)
    assert ok("cat", "d.bagz", "--dictionary", "dict", cwd=tmp_path) == lines
    assert fails("cat", "d.bagz", cwd=tmp_path).startswith("sackli: error: index 0: d.bagz: record 0")


def test_broken_pipe_ends_quietly(tmp_path) -> None:
    write_bag(tmp_path / "big.bag", (b"%08d" % i for i in range(300_000)))
    cat = subprocess.Popen(["sackli", "cat", "big.bag", "--format", "raw"], cwd=tmp_path,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.run(["head", "-c", "10"], stdin=cat.stdout, capture_output=True)
    cat.stdout.close()
    assert cat.wait(timeout=60) == 141  # 128 + SIGPIPE, as a shell reports it
    assert cat.stderr.read() == b""
    assert head.stdout == b"0000000000"


# --- info ---------------------------------------------------------------------

def test_info_text_and_json(bag) -> None:
    text = ok("info", "small.bagz", cwd=bag).decode()
    payload = os.path.getsize(bag / "small.bagz") - 8 * 5
    assert text.splitlines() == [
        "spec:             small.bagz",
        "shards:           1 (records per shard: 5)",
        "records:          5",
        f"payload bytes:    {payload} (as stored)",
        "limits bytes:     40",
        "compression:      zstd",
        "limits placement: TAIL",
        "layout:           CONCATENATED",
        "record size:      min 0, median 5, max 10 (bytes, decoded)",
        "size histogram:",
        "              0 B           1  ####################",
        "            2-3 B           1  ####################",
        "            4-7 B           2  ########################################",
        "           8-15 B           1  ####################",
    ]
    facts = json.loads(ok("info", "small.bagz", "--json", cwd=bag))
    assert facts["record_size"] == {"min": 0, "median": 5, "max": 10}
    assert facts["shards"] == [{"path": "small.bagz", "records": 5}]
    assert (facts["records"], facts["payload_bytes"], facts["limits_bytes"]) == (5, payload, 40)
    assert facts["size_histogram"][0] == {"min": 0, "max": 0, "count": 1}


def test_info_of_mixed_shards(tmp_path) -> None:
    write_bag(tmp_path / "a.bag", [b"xy", b"xyzw"])
    write_bag(tmp_path / "b.bagz", [])
    facts = json.loads(ok("info", "a.bag,b.bagz", "--json", cwd=tmp_path))
    assert facts["compression"] == "mixed (none: 1 files, zstd: 1 files)"
    assert facts["record_size"] == {"min": 2, "median": 3.0, "max": 4}
    assert facts["payload_bytes"] == 6


# --- verify and recover -------------------------------------------------------------

def test_verify_clean(bag) -> None:
    assert ok("verify", "small.bagz", cwd=bag) == b"verify: OK, 5 records in 1 shard(s)\n"


def _corrupt_set(folder):
    """concat@3.bag: shard 0 fine, shard 1 with non-monotonic limits at record 1 and a
    bad zstd... (raw bag: limits only), shard 2 truncated."""
    for shard in range(3):
        write_bag(folder / f"c-{shard:05d}-of-00003.bag", [b"abc", b"de", b"fghij"])
    shard1 = folder / "c-00001-of-00003.bag"
    data = shard1.read_bytes()
    shard1.write_bytes(data[:10] + struct.pack("<QQQ", 3, 1, 10))  # limit 1 < limit 0
    shard2 = folder / "c-00002-of-00003.bag"
    shard2.write_bytes(shard2.read_bytes()[:-3])
    return folder


def test_verify_reports_every_problem(tmp_path) -> None:
    result = sackli_cli("verify", "c@3.bag", cwd=_corrupt_set(tmp_path))
    assert result.returncode == 1
    assert result.stderr == b""
    assert result.stdout.decode().splitlines() == [
        "global index 4 (shard 1, record 1): c-00001-of-00003.bag: limit of record 1 is 1, "
        "smaller than the previous limit 3 (10 bytes) (byte offset 18)",
        "shard 2 cannot be opened: c-00002-of-00003.bag: the last 8 bytes do not point at a "
        "limits section (not a bag with TAIL limits, or truncated) (byte offset 23)",
        "verify: 2 problem(s) in c@3.bag",
    ]


def test_verify_fail_fast(tmp_path) -> None:
    result = sackli_cli("verify", "c@3.bag", "--fail-fast", cwd=_corrupt_set(tmp_path))
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[1:] == ["verify: stopped at the first problem (--fail-fast)"]


def test_verify_finds_each_bad_record_in_a_large_compressed_bag(tmp_path) -> None:
    write_bag(tmp_path / "z.bagz", (b"record %d" % i for i in range(10_000)))
    path = tmp_path / "z.bagz"
    reader = sackli.Reader(path)
    sizes = [len(f) for f in sackli.Reader(path, compression=sackli.CompressionNone()).read_range(0, 10)]
    reader.close()
    offset_of_7 = sum(sizes[:7])
    data = bytearray(path.read_bytes())
    data[0:4] = b"XXXX"  # record 0: not a zstd frame
    data[offset_of_7 : offset_of_7 + 4] = b"YYYY"  # record 7
    path.write_bytes(bytes(data))
    lines = sackli_cli("verify", "z.bagz", cwd=tmp_path).stdout.decode().splitlines()
    assert lines == [
        "global index 0 (shard 0, record 0): z.bagz: record 0 is corrupt: not a zstd frame (byte offset 0)",
        f"global index 7 (shard 0, record 7): z.bagz: record 7 is corrupt: not a zstd frame "
        f"(byte offset {offset_of_7})",
        "verify: 2 problem(s) in z.bagz",
    ]


def _interrupted(folder, records: int, torn_bytes: bytes) -> None:
    """Kills a writer before close(): it leaves the records and limits.<name>,
    plus `torn_bytes` of a record whose limit was never written."""
    code = f"""
import os, sackli
writer = sackli.Writer("log.bagz")
writer.write_many(b"entry %d" % i for i in range({records}))
writer.flush()
with open(writer.partial_path, "ab") as file:
    file.write({torn_bytes!r})
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], cwd=folder, check=True, timeout=60)


def test_recover_an_interrupted_write(tmp_path) -> None:
    _interrupted(tmp_path, 50, torn_bytes=b"half a frame")
    message = fails("count", "log.bagz", cwd=tmp_path)
    assert message.startswith("sackli: error: log.bagz: no such file, but an unfinished write of it exists")
    assert "complete it with sackli recover PATH" in message
    verify = sackli_cli("verify", "log.bagz", cwd=tmp_path)
    assert verify.returncode == 1
    assert ok("recover", "log.bagz", cwd=tmp_path) == (
        b"log.bagz: recovered 50 record(s); dropped 0 invalid limit(s) and 12 trailing byte(s)\n")
    assert ok("verify", "log.bagz", cwd=tmp_path) == b"verify: OK, 50 records in 1 shard(s)\n"
    assert ok("get", "log.bagz", "49", cwd=tmp_path) == b"entry 49\n"
    assert not (tmp_path / "limits.log.bagz").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["log.bagz"]


def test_recover_a_shard_spec(tmp_path) -> None:
    code = """
import os, sackli
writer = sackli.ShardedWriter("set@3.bag", num_records=30)
writer.write_many(b"r%d" % i for i in range(25))
writer._set._write_gathered()  # hand the gathered records to the shard writers
writer._set._shard.writer.flush()
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=60)
    # Two shards were finished but not yet renamed, the third was being written.
    assert ok("recover", "set@3.bag", cwd=tmp_path) == (
        b"set-00000-of-00003.bag: recovered 10 record(s)\n"
        b"set-00001-of-00003.bag: recovered 10 record(s)\n"
        b"set-00002-of-00003.bag: recovered 5 record(s)\n")
    assert sackli.Reader(tmp_path / "set@3.bag").read() == [b"r%d" % i for i in range(25)]
    assert fails("recover", "other@2.bag", cwd=tmp_path) == (
        "sackli: error: other-00000-of-00002.bag: no such file")


def test_interrupted_in_place_write_names_the_cli_flags(tmp_path) -> None:
    with sackli.Writer(tmp_path / "sep.bag", limits_placement="SEPARATE") as writer:
        writer.write(b"x")
    message = fails("count", "sep.bag", cwd=tmp_path)
    assert "Read it with --limits-placement SEPARATE" in message
    assert "sackli recover PATH" in message and "sackli.recover" not in message
    assert ok("count", "sep.bag", "--limits-placement", "SEPARATE", cwd=tmp_path) == b"1\n"


# --- convert --------------------------------------------------------------------------

def test_convert_reads_a_hand_built_tfrecord(tmp_path) -> None:
    records = [b"", b"x", bytes(range(256)), b"y" * 70_000]
    (tmp_path / "in.tfrecord").write_bytes(tfrecord_spec.write(records))
    assert ok("convert", "in.tfrecord", "out.bagz", cwd=tmp_path) == (
        b"converted 4 records from in.tfrecord to out.bagz\n")
    assert sackli.Reader(tmp_path / "out.bagz").read() == records


def test_convert_rejects_a_tfrecord_with_a_bad_crc(tmp_path) -> None:
    data = bytearray(tfrecord_spec.write([b"hello", b"world"]))
    data[-5] ^= 1  # last byte of "world"
    (tmp_path / "in.tfrecord").write_bytes(bytes(data))
    assert fails("convert", "in.tfrecord", "out.bag", cwd=tmp_path) == (
        "sackli: error: in.tfrecord: bad TFRecord data CRC32C (byte offset 33)")
    assert not (tmp_path / "out.bag").exists()
    assert not (tmp_path / "limits.out.bag").exists()


def test_convert_writes_a_tfrecord_by_the_spec(bag) -> None:
    ok("convert", "small.bagz", "out.tfrecord", cwd=bag)
    assert tfrecord_spec.read((bag / "out.tfrecord").read_bytes()) == RECORDS
    ok("convert", "small.bagz", "out.tfrecord.gz", cwd=bag)
    ok("convert", "out.tfrecord.gz", "back.bag", cwd=bag)
    assert sackli.Reader(bag / "back.bag").read() == RECORDS


def test_convert_json_lines_and_text_round_trip(bag) -> None:
    ok("convert", "small.bagz", "out.jsonl", cwd=bag)
    assert (bag / "out.jsonl").read_bytes() == (
        b'"alpha"\n""\n"caf\xc3\xa9"\n"line\\nbreak"\n{"base64": "//4="}\n')
    ok("convert", "out.jsonl", "back.bagz", cwd=bag)
    assert sackli.Reader(bag / "back.bagz").read() == RECORDS
    assert fails("convert", "small.bagz", "out.txt", cwd=bag) == (
        "sackli: error: out.txt: record 3 contains a newline and cannot be written as one "
        "line of text; use .jsonl or .tfrecord")
    assert not (bag / "out.txt").exists()
    (bag / "lines.txt").write_bytes(b"first\n\nthird\n")
    ok("convert", "lines.txt", "lines.bag", cwd=bag)
    assert sackli.Reader(bag / "lines.bag").read() == [b"first", b"", b"third"]


def test_convert_recompresses_and_changes_placement(tmp_path) -> None:
    records = [b"%d" % i * 50 for i in range(1000)]
    write_bag(tmp_path / "in.bag", records)
    ok("convert", "in.bag", "out.bagz", "--level", "19", "--output-limits-placement", "SEPARATE",
       cwd=tmp_path)
    assert (tmp_path / "limits.out.bagz").stat().st_size == 8000
    out = sackli.Reader(tmp_path / "out.bagz", limits_placement="SEPARATE")
    assert out.read() == records
    ok("convert", "out.bagz", "back.bag", "--limits-placement", "SEPARATE", cwd=tmp_path)
    assert (tmp_path / "back.bag").read_bytes() == (tmp_path / "in.bag").read_bytes()


def test_convert_reshards_into_n_even_runs(tmp_path) -> None:
    for shard, size in enumerate([4, 0, 6]):
        write_bag(tmp_path / f"in-{shard:05d}-of-00003.bagz", [b"%d:%d" % (shard, i) for i in range(size)])
    assert ok("convert", "in@*.bagz", "out@4.bag", cwd=tmp_path) == (
        b"converted 10 records from in@*.bagz to 4 shards, out-00000-of-00004.bag ... "
        b"out-00003-of-00004.bag\n")
    sizes = [len(sackli.Reader(tmp_path / f"out-{s:05d}-of-00004.bag")) for s in range(4)]
    assert sizes == [3, 3, 2, 2]
    assert sackli.Reader(tmp_path / "out@4.bag").read() == sackli.Reader(tmp_path / "in@3.bagz").read()


def test_convert_reshards_by_size(tmp_path) -> None:
    records = [b"r" * 100] * 95
    write_bag(tmp_path / "in.bag", records)
    # 100 bytes + 8 of limits per record: 9 records fit in 1000 bytes.
    ok("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1000", cwd=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out"))
    assert names == [f"out-{s:05d}-of-00011.bag" for s in range(11)]
    sizes = [len(sackli.Reader(tmp_path / name)) for name in names]
    assert sizes == [9] * 10 + [5]
    assert all((tmp_path / name).stat().st_size <= 1000 for name in names)
    assert sackli.Reader(tmp_path / "out@*.bag").read() == records


def test_convert_empty_source_by_size_makes_one_empty_shard(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [])
    ok("convert", "in.bag", "out@*.bagz", "--max-shard-bytes", "100", cwd=tmp_path)
    assert (tmp_path / "out-00000-of-00001.bagz").stat().st_size == 0


def test_convert_failure_from_a_corrupt_source_leaves_nothing(tmp_path) -> None:
    _corrupt_set(tmp_path)
    line = fails("convert", "c-00000-of-00003.bag,c-00001-of-00003.bag", "out@*.bagz", "--max-shard-bytes", "1000", cwd=tmp_path)
    assert line.startswith("sackli: error: c-00001-of-00003.bag: limit of record 1 is 1")
    assert [p.name for p in tmp_path.iterdir() if "out" in p.name] == []


# --- demo ---------------------------------------------------------------------------

def test_demo_runs(tmp_path) -> None:
    result = sackli_cli("demo", "--dir", "d", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert "converted 2000 records from animals.jsonl to 4 shards" in out
    assert ("global index 500 (shard 1, record 0): zoo-00001-of-00004.bagz: record 0 is corrupt: "
            "not a zstd frame (byte offset 0)") in out
    assert "log.bag: recovered 100 record(s)\n" in out
    assert out.endswith("That was sackli. Try `sackli COMMAND --help` for each command's options.\n")
    again = sackli_cli("demo", "--dir", "d", cwd=tmp_path)  # the same folder again
    assert again.returncode == 0, again.stderr.decode()
    assert again.stdout.decode().replace("\n", "") == out.replace("\n", "")


# --- Parquet --------------------------------------------------------------------


def _events_parquet(folder) -> "object":
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "id": pa.array(range(1000), pa.int64()),
        "kind": pa.array(["click", "view", None, "buy"] * 250).dictionary_encode(),
        "payload": pa.array([f"event {i}".encode() for i in range(1000)], pa.binary()),
        "tags": pa.array([[i % 3, i % 5] for i in range(1000)], pa.list_(pa.int32())),
    })
    pq.write_table(table, folder / "events.parquet", row_group_size=128)
    return table


def test_convert_parquet_to_sharded_bags_and_back(tmp_path) -> None:
    """Rows survive Parquet -> 4 .bagz shards -> Parquet, with their types."""
    import pyarrow.parquet as pq

    table = _events_parquet(tmp_path)
    assert ok("convert", "events.parquet", "events@4.bagz", "--level", "5",
              cwd=tmp_path).startswith(b"converted events.parquet to 4 shards")
    sizes = [len(sackli.Reader(tmp_path / f"events-0000{i}-of-00004.bagz")) for i in range(4)]
    assert sizes == [250, 250, 250, 250]
    ok("convert", "events@*.bagz", "back.parquet", cwd=tmp_path)
    back = pq.read_table(tmp_path / "back.parquet")
    assert back.schema == table.schema
    assert back.to_pylist() == table.to_pylist()


def test_convert_parquet_column_and_json_rows(tmp_path) -> None:
    """--column writes one column's bytes as records; --encoding json rows
    read back through --decode auto; raw bags export a `record` column."""
    import json

    import pyarrow.parquet as pq

    _events_parquet(tmp_path)
    ok("convert", "events.parquet", "payload.bag", "--column", "payload", cwd=tmp_path)
    assert sackli.Reader(tmp_path / "payload.bag")[7] == b"event 7"
    ok("convert", "payload.bag", "payload.parquet", cwd=tmp_path)
    assert pq.read_table(tmp_path / "payload.parquet").column("record")[7].as_py() == b"event 7"

    ok("convert", "events.parquet", "rows@*.bag", "--encoding", "json",
       "--max-shard-bytes", "20000", cwd=tmp_path)
    reader = sackli.Reader(tmp_path / "rows@*.bag")
    assert len(reader.paths) > 1
    assert json.loads(reader[3]) == {"id": 3, "kind": "buy", "payload": "ZXZlbnQgMw==",
                                     "tags": [0, 3]}
    ok("convert", "rows@*.bag", "rows.parquet", cwd=tmp_path)
    assert pq.read_table(tmp_path / "rows.parquet").column("id").to_pylist() == list(range(1000))


def test_convert_parquet_refuses_nulls_in_a_column(tmp_path) -> None:
    """A null in --column fails with the row, leaves nothing behind, and
    --skip-nulls leaves the nulls out."""
    _events_parquet(tmp_path)
    line = fails("convert", "events.parquet", "kinds@2.bag", "--column", "kind", cwd=tmp_path)
    assert line == ("sackli: error: column 'kind' is null at row 2; pass skip_nulls=True to "
                    "leave null values out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.parquet"]
    ok("convert", "events.parquet", "kinds@2.bag", "--column", "kind", "--skip-nulls",
       cwd=tmp_path)
    assert len(sackli.Reader(tmp_path / "kinds@2.bag")) == 750


# --- usage errors, option values and sizes -----------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ([], "sackli: error: the following arguments are required: COMMAND (see 'sackli --help')"),
        (["frobnicate"], "sackli: error: argument COMMAND: invalid choice: 'frobnicate' (choose from "
                         "'info', 'count', 'head', 'cat', 'get', 'verify', 'recover', 'convert', "
                         "'demo') "
                         "(see 'sackli --help')"),
        (["cat"], "sackli cat: error: the following arguments are required: SPEC "
                  "(see 'sackli cat --help')"),
        (["cat", "small.bagz", "--format", "xml"],
         "sackli cat: error: argument --format: invalid choice: 'xml' (choose from 'text', 'raw', "
         "'hex', 'json') (see 'sackli cat --help')"),
        (["cat", "small.bagz", "--bogus"],
         "sackli: error: unrecognized arguments: --bogus (see 'sackli --help')"),
        (["convert", "small.bagz", "out@*.bag", "--max-shard-bytes", "20XB"],
         "sackli convert: error: argument --max-shard-bytes: '20XB' is not a size: write a number "
         "of bytes, optionally with a unit: kB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB (x1024), "
         "e.g. 20MB or 1GiB (see 'sackli convert --help')"),
        (["convert", "small.bagz", "out.tfrecord.gz", "--gzip-level", "10"],
         "sackli convert: error: argument --gzip-level: invalid choice: 10 (choose from 0, 1, 2, 3, "
         "4, 5, 6, 7, 8, 9) (see 'sackli convert --help')"),
    ],
)
def test_usage_errors_are_one_line_with_status_2(bag, args, line) -> None:
    result = sackli_cli(*args, cwd=bag)
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode().splitlines() == [line]


def test_negative_ranges_and_indices_need_no_equals_sign(bag) -> None:
    assert ok("cat", "small.bagz", "--range", "-2:", cwd=bag) == b"line\\nbreak\n\\xff\\xfe\n"
    assert ok("cat", "small.bagz", "--range", "-4:-3", cwd=bag) == b"\n"
    assert ok("cat", "small.bagz", "--indices", "-1,0", "--format", "hex", cwd=bag) == b"fffe\n616c706861\n"
    assert ok("cat", "--range", "-1:", "small.bagz", cwd=bag) == b"\\xff\\xfe\n"


@pytest.mark.parametrize(
    ("text", "size"),
    [("1000", 1000), ("20MB", 20_000_000), ("20mb", 20_000_000), ("1GiB", 1 << 30),
     ("1gib", 1 << 30), ("1.5kB", 1500), ("2 KiB", 2048), ("7b", 7), ("1TB", 10**12),
     ("0.5MiB", 1 << 19), ("3PiB", 3 << 50)],
)
def test_sizes_take_decimal_and_binary_units(text, size) -> None:
    from sackli.cli._arguments import parse_size

    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MB", "20XB", "1e6", "-5", "20 M B", "1,000", "20k"])
def test_sizes_refuse_anything_else(text) -> None:
    import argparse

    from sackli.cli._arguments import parse_size

    with pytest.raises(argparse.ArgumentTypeError, match="is not a size"):
        parse_size(text)


def test_max_shard_bytes_takes_units(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"r" * 100] * 95)
    ok("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1kB", cwd=tmp_path)
    assert len(sackli.Reader(tmp_path / "out@*.bag").paths) == 11  # 9 records per 1000 bytes


# --- control characters -------------------------------------------------------------


def test_text_output_escapes_control_characters(tmp_path) -> None:
    records = [b"\x1b[31mred\x1b[0m", b"bell\x07 nul\x00 del\x7f", "c1 \u009b2J".encode(),
               b"tab\tstays", b"cr\r\nlf", "caf\u00e9 \u2603".encode()]
    write_bag(tmp_path / "ctl.bag", records)
    assert ok("cat", "ctl.bag", cwd=tmp_path) == (
        b"\\x1b[31mred\\x1b[0m\n"
        b"bell\\x07 nul\\x00 del\\x7f\n"
        b"c1 \\u009b2J\n"
        b"tab\tstays\n"
        b"cr\\r\\nlf\n"
        + "caf\u00e9 \u2603\n".encode())
    json_lines = ok("cat", "ctl.bag", "--format", "json", cwd=tmp_path)
    assert b"\x1b" not in json_lines and b"\x7f" not in json_lines
    assert "\u009b".encode() not in json_lines
    assert [json.loads(line).encode() for line in json_lines.splitlines()] == records
    assert ok("get", "ctl.bag", "0", cwd=tmp_path) == b"\\x1b[31mred\\x1b[0m\n"
    assert ok("get", "ctl.bag", "0", "--format", "raw", cwd=tmp_path) == records[0]


# --- corrupt records in cat and head ----------------------------------------------------


def _bag_with_corrupt_records(folder, corrupt: list[int]) -> dict[int, int]:
    """c.bagz: records b"record 0" ... b"record 9", those in `corrupt` damaged
    (their zstd magic overwritten); returns their byte offsets."""
    path = folder / "c.bagz"
    write_bag(path, [b"record %d" % i for i in range(10)])
    raw = sackli.Reader(path, compression=sackli.CompressionNone())
    sizes = [len(r) for r in raw.read()]
    raw.close()
    data = bytearray(path.read_bytes())
    offsets = {index: sum(sizes[:index]) for index in corrupt}
    for offset in offsets.values():
        data[offset:offset + 4] = b"XXXX"
    path.write_bytes(bytes(data))
    return offsets


def test_cat_prints_the_records_before_a_corrupt_one_then_fails(tmp_path) -> None:
    offsets = _bag_with_corrupt_records(tmp_path, [3])
    result = sackli_cli("cat", "c.bagz", "--range", "0:10", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == b"record 0\nrecord 1\nrecord 2\n"
    assert result.stderr.decode().splitlines() == [
        f"sackli: error: index 3: c.bagz: record 3 is corrupt: not a zstd frame (byte offset "
        f"{offsets[3]}) (--skip-corrupt goes on past it)"]
    head = sackli_cli("head", "c.bagz", "-n", "5", cwd=tmp_path)
    assert (head.returncode, head.stdout) == (1, b"record 0\nrecord 1\nrecord 2\n")


def test_skip_corrupt_goes_on_and_reports_what_it_skipped(tmp_path) -> None:
    offsets = _bag_with_corrupt_records(tmp_path, [3, 7])
    result = sackli_cli("cat", "c.bagz", "--skip-corrupt", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == b"".join(b"record %d\n" % i for i in range(10) if i not in (3, 7))
    assert result.stderr.decode().splitlines() == [
        f"sackli: skipped index 3: c.bagz: record 3 is corrupt: not a zstd frame (byte offset {offsets[3]})",
        f"sackli: skipped index 7: c.bagz: record 7 is corrupt: not a zstd frame (byte offset {offsets[7]})",
        "sackli: skipped 2 corrupt record(s) of 10",
    ]
    # Indices in the bag, also for a range, --indices and head.
    ranged = sackli_cli("cat", "c.bagz", "--range", "5:9", "--skip-corrupt", cwd=tmp_path)
    assert ranged.stdout == b"record 5\nrecord 6\nrecord 8\n"
    assert ranged.stderr.decode().splitlines()[0].startswith("sackli: skipped index 7: ")
    chosen = sackli_cli("cat", "c.bagz", "--indices", "-3,9,0", "--skip-corrupt", "--format", "json",
                        cwd=tmp_path)
    assert chosen.stdout == b'"record 9"\n"record 0"\n'
    assert chosen.stderr.decode().splitlines()[0].startswith("sackli: skipped index 7: ")
    head = sackli_cli("head", "c.bagz", "-n", "3", "--skip-corrupt", cwd=tmp_path)
    assert (head.returncode, head.stdout, head.stderr) == (0, b"record 0\nrecord 1\nrecord 2\n", b"")


def test_indices_out_of_range_fail_before_printing(bag) -> None:
    result = sackli_cli("cat", "small.bagz", "--indices", "0,5", cwd=bag)
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr == b"sackli: error: index 5 out of range for a reader of 5 records\n"


# --- progress bars ---------------------------------------------------------------------


def on_terminal(*args: str, cwd, stdout_on_terminal: bool = False) -> tuple[int, bytes, str]:
    """Runs the CLI with stderr (and optionally stdout) on a pseudo-terminal
    of 100 columns; returns (status, stdout, what the terminal showed)."""
    import fcntl
    import pty
    import termios
    import threading

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(
        ["sackli", *args], cwd=cwd, stdin=subprocess.DEVNULL, stderr=slave,
        stdout=slave if stdout_on_terminal else subprocess.PIPE)
    os.close(slave)
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO once the process has closed the terminal
                return
            if not data:
                return
            shown.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    stdout, _ = process.communicate(timeout=60)
    reader.join(timeout=10)
    os.close(master)
    return process.returncode, stdout or b"", b"".join(shown).decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["info", "p.bagz"], "info"),
        (["verify", "p.bagz"], "verify"),
        (["cat", "p.bagz"], "cat"),
        (["head", "p.bagz", "-n", "1000"], "head"),
        (["convert", "p.bagz", "p.tfrecord.gz"], "convert"),
        (["convert", "p.bagz", "p@3.bag"], "convert"),
    ],
)
def test_progress_bars_show_a_total_and_an_eta_on_a_terminal(tmp_path, args, label) -> None:
    write_bag(tmp_path / "p.bagz", (b"%d" % i for i in range(3000)))
    status, _, shown = on_terminal(*args, cwd=tmp_path)
    assert status == 0, shown
    total = "1,000" if label == "head" else "3,000"
    # The first frame: no progress yet, so the ETA after "<" is still "?".
    assert f"{label}:   0%|" in shown and f"| 0/{total} [00:00<?, ? records/s]" in shown
    assert shown.endswith("\r")  # the bar is erased when done


def test_no_progress_bar_when_records_go_to_the_terminal(tmp_path) -> None:
    write_bag(tmp_path / "p.bagz", [b"only"])
    status, _, shown = on_terminal("cat", "p.bagz", cwd=tmp_path, stdout_on_terminal=True)
    assert (status, shown) == (0, "only\r\n")


def test_convert_from_a_file_of_unknown_length_counts_without_a_total(tmp_path) -> None:
    (tmp_path / "in.txt").write_bytes(b"a\nb\n")
    status, _, shown = on_terminal("convert", "in.txt", "out.bag", cwd=tmp_path)
    assert status == 0, shown
    assert "convert: 0 records [00:00, ? records/s]" in shown


# --- convert: existing destinations, bag names, gzip -----------------------------------


def test_convert_refuses_to_overwrite_without_force(bag) -> None:
    ok("convert", "small.bagz", "out.jsonl", cwd=bag)
    (bag / "out.jsonl").write_bytes(b"precious\n")
    assert fails("convert", "small.bagz", "out.jsonl", cwd=bag) == (
        "sackli: error: out.jsonl exists; pass --force to overwrite it")
    assert (bag / "out.jsonl").read_bytes() == b"precious\n"
    ok("convert", "small.bagz", "out.jsonl", "--force", cwd=bag)
    assert (bag / "out.jsonl").read_bytes().startswith(b'"alpha"\n')
    # A bag's limits file counts: it may hold an interrupted write to recover.
    (bag / "limits.out.bag").write_bytes(b"")
    assert fails("convert", "small.bagz", "out.bag", cwd=bag) == (
        "sackli: error: out.bag: limits.out.bag exist(s); pass --force to overwrite")


def test_convert_refuses_existing_shards(tmp_path) -> None:
    write_bag(tmp_path / "in.bag", [b"r" * 100] * 30)
    ok("convert", "in.bag", "out@3.bag", cwd=tmp_path)
    assert fails("convert", "in.bag", "out@3.bag", cwd=tmp_path) == (
        "sackli: error: out@3.bag: out-00000-of-00003.bag and 2 more file(s) exist(s); "
        "pass --force to overwrite")
    # name@*: any shard of that name is in the way, whatever the count.
    assert fails("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1kB", cwd=tmp_path) == (
        "sackli: error: out@*.bag: out-00000-of-00003.bag and 2 more file(s) exist(s); "
        "pass --force to overwrite")
    # --force replaces the set: the old count's shards go, so out@* finds one set.
    ok("convert", "in.bag", "out@*.bag", "--max-shard-bytes", "1kB", "--force", cwd=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out"))
    assert names == [f"out-{i:05d}-of-00004.bag" for i in range(4)]
    assert len(sackli.Reader(tmp_path / "out@*.bag")) == 30


def test_convert_refuses_an_existing_parquet_destination(tmp_path) -> None:
    _events_parquet(tmp_path)
    ok("convert", "events.parquet", "e@2.bagz", cwd=tmp_path)
    assert fails("convert", "events.parquet", "e@2.bagz", cwd=tmp_path).endswith(
        "exist(s); pass --force to overwrite")
    ok("convert", "e@2.bagz", "back.parquet", cwd=tmp_path)
    assert fails("convert", "e@2.bagz", "back.parquet", cwd=tmp_path) == (
        "sackli: error: back.parquet exists; pass --force to overwrite it")
    ok("convert", "e@2.bagz", "back.parquet", "--force", cwd=tmp_path)


@pytest.mark.parametrize("name", ["x.parquet", "x", "x.bagz.tmp", "x@4.parquet", "x@*.txt"])
def test_write_table_refuses_names_that_are_not_bags(tmp_path, name) -> None:
    import pyarrow as pa

    import sackli.arrow

    with pytest.raises(ValueError, match=r"names end in \.bag \(raw records\) or \.bagz \(zstd\)"):
        sackli.arrow.write_table(pa.table({"a": [1]}), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_write_table_accepts_bag_names(tmp_path) -> None:
    import pyarrow as pa

    import sackli.arrow

    table = pa.table({"a": [1, 2]})
    for name in ["x.bag", "y.bagz", "z@2.bagz", f"posix:{tmp_path}/w.bag"]:
        sackli.arrow.write_table(table, name if name.startswith("posix:") else tmp_path / name)
    assert sackli.arrow.write_table(table, tmp_path / "s@*.bag", max_shard_bytes=1 << 20) == [
        str(tmp_path / "s-00000-of-00001.bag")]


def test_gzip_level(tmp_path) -> None:
    import gzip

    records = [b"%d words and some text that compresses %d" % (i, i % 7) for i in range(20_000)]
    write_bag(tmp_path / "in.bag", records)
    ok("convert", "in.bag", "six.tfrecord.gz", cwd=tmp_path)
    ok("convert", "in.bag", "one.tfrecord.gz", "--gzip-level", "1", cwd=tmp_path)
    ok("convert", "in.bag", "nine.jsonl.gz", "--gzip-level", "9", cwd=tmp_path)
    six, one = (tmp_path / "six.tfrecord.gz").read_bytes(), (tmp_path / "one.tfrecord.gz").read_bytes()
    assert gzip.decompress(six) == gzip.decompress(one) == tfrecord_spec.write(records)
    assert len(one) > len(six)
    assert gzip.decompress((tmp_path / "nine.jsonl.gz").read_bytes()).count(b"\n") == len(records)
    ok("convert", "six.tfrecord.gz", "back.bag", cwd=tmp_path)
    assert sackli.Reader(tmp_path / "back.bag").read() == records
    assert fails("convert", "in.bag", "x.tfrecord", "--gzip-level", "3", cwd=tmp_path) == (
        "sackli: error: --gzip-level applies to .gz destinations only")


def test_killed_convert_leaves_no_shard_under_a_final_name(tmp_path) -> None:
    """kill -9 in the middle of `convert big.bagz 'k@8.bagz'` used to leave a
    few complete shards and an empty one, which a glob took for a set."""
    with sackli.ShardedWriter(tmp_path / "big.bagz") as writer:
        writer.write_many(b"%09d" % i * 12 for i in range(400_000))
    process = subprocess.Popen([sys.executable, "-m", "sackli", "convert", "big.bagz", "k@8.bagz"],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = 60.0
        while deadline > 0 and len(list(tmp_path.glob(".sackli-convert-*"))) < 3:
            assert process.poll() is None, "convert finished before it could be interrupted"
            deadline -= 0.005
            time.sleep(0.005)
    finally:
        process.kill()
        process.wait()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["big.bagz"]
    # Run again, to the end: the set appears whole, the leftovers of the
    # killed run are hidden files that no glob of the set matches.
    assert ok("convert", "big.bagz", "k@8.bagz", cwd=tmp_path).startswith(b"converted 400000 records")
    assert len(sackli.Reader(tmp_path / "k@*.bagz")) == 400_000
