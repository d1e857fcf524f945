"""What the `sackli.beam` tests share: pipelines, bags on disk, golden
files, listings, sources, the options and parameters they run over, and the
autouse fixture that keeps Beam quiet (import it to use it).

Loaded through conftest.py as the module `beam_helpers` (the tests are not
a package: pytest runs them with --import-mode=importlib)."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import random
import re

import apache_beam as beam
import bagz
import pytest
from apache_beam import coders
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import sackli
from sackli.beam import WriteToSackli
from sackli._bulk import record_offsets
from sackli.beam._files import expand_pattern
from sackli.beam._source import FileSource, PatternSource


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


TAIL = sackli.LimitsPlacement.TAIL


SEPARATE = sackli.LimitsPlacement.SEPARATE


READ_TAIL = sackli.Reader.Options()


READ_SEPARATE = sackli.Reader.Options(limits_placement=SEPARATE)


WRITE_SEPARATE = sackli.Writer.Options(limits_placement=SEPARATE)


SUFFIXES = pytest.mark.parametrize("ext", [".bag", ".bagz"])


PLACEMENTS = pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["TAIL", "SEPARATE"])


# The golden file names (for parametrization; the `golden_manifest` fixture
# gives their records).
GOLDEN_NAMES = sorted(
    json.loads((pathlib.Path(__file__).parents[1] / "data" / "MANIFEST.json").read_text())["files"]
)


RUNNER_ARGS = {
    "direct": [],
    "multi_processing": ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"],
}


@pytest.fixture(autouse=True)
def _quiet_beam():
    """Beam logs a warning per shard deleted or split trial observed; keep
    test output readable."""
    logger = logging.getLogger("apache_beam")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def make_pipeline(runner: str = "direct") -> beam.Pipeline:
    return beam.Pipeline(options=PipelineOptions(RUNNER_ARGS[runner]))


def run_write(elements, path, runner: str = "direct", **kwargs) -> None:
    """Writes `elements` with WriteToSackli(path, **kwargs) in a pipeline."""
    with make_pipeline(runner) as p:
        _ = p | beam.Create(elements) | WriteToSackli(str(path), **kwargs)


def assert_reads(read: beam.PTransform, expected, runner: str = "direct") -> None:
    """Runs `p | read` and asserts its output is the multiset `expected`."""
    with make_pipeline(runner) as p:
        assert_that(p | read, equal_to(list(expected)))


def run_and_expect_failure(build, *fragments: str) -> str:
    """Runs the pipeline `build(p)` builds; it must fail with an error whose
    type name and message contain every fragment. Beam may wrap the original
    exception (the portable runner raises RuntimeError with the worker's
    traceback), so the check is on text, not on the exception type."""
    with pytest.raises(Exception) as info:
        with beam.Pipeline() as p:
            build(p)
    text = f"{type(info.value).__name__}: {info.value}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text[-2000:]}"
    return text


def make_records(n: int, seed: int = 0) -> list[bytes]:
    """`n` records of varied sizes, every 7th empty and the last two empty."""
    rng = random.Random(seed)
    records = [
        b"" if i % 7 == 3 else b"%d:" % i + rng.randbytes(rng.randrange(0, 40))
        for i in range(n)
    ]
    if n >= 2:
        records[-2:] = [b"", b""]
    return records


def write_bag(path, records, placement=TAIL) -> pathlib.Path:
    """A bag written by sackli.Writer (no record: an empty bag)."""
    with sackli.Writer(path, sackli.Writer.Options(limits_placement=placement)) as w:
        w.write_many(list(records))
    return pathlib.Path(path)


def shard_names(base: str, count: int, suffix: str) -> list[str]:
    return [f"{base}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def with_limits(names: list[str]) -> list[str]:
    return sorted(names + ["limits." + name for name in names])


def listing(folder: pathlib.Path) -> list[str]:
    """Every entry of `folder` (files and folders, so a left-over
    `beam-temp-*` folder shows)."""
    return sorted(os.listdir(folder))


def shard_set_names(folder: pathlib.Path, base: str, suffix: str) -> list[str]:
    """The names of the one complete shard set `base-SSSSS-of-NNNNN suffix`
    in `folder` (whatever N the runner picked); fails otherwise."""
    shape = re.compile(re.escape(base) + r"-(\d{5})-of-(\d{5})" + re.escape(suffix))
    matches = [shape.fullmatch(name) for name in os.listdir(folder)]
    counts = {int(m.group(2)) for m in matches if m}
    assert len(counts) == 1, f"expected one shard set, found counts {counts} in {listing(folder)}"
    (count,) = counts
    names = shard_names(base, count, suffix)
    assert sorted(m.group(0) for m in matches if m) == names
    return names


def read_files(folder: pathlib.Path, names, options=READ_TAIL) -> list[bytes]:
    return [r for name in names for r in sackli.Reader(str(folder / name), options).read()]


def read_files_with_bagz(folder: pathlib.Path, names, separate: bool = False) -> list[bytes]:
    """The records of the files, read by Google's reference bagz package."""
    options = bagz.Reader.Options(limits_placement=bagz.LimitsPlacement.SEPARATE) if separate else None
    records = []
    for name in names:
        reader = bagz.Reader(str(folder / name), options) if options else bagz.Reader(str(folder / name))
        records.extend(bytes(r) for r in reader)
    return records


def golden_expected(name: str, entry: dict) -> list[bytes]:
    if "expected" in entry:
        return entry["expected"]
    return [b"%d:%d" % (shard, j) for shard, n in enumerate(entry["shard_sizes"]) for j in range(n)]


def golden_options(entry: dict) -> sackli.Reader.Options:
    return READ_SEPARATE if entry.get("limits_placement") == "SEPARATE" else READ_TAIL


def bytes_source(pattern, options=READ_TAIL, with_metadata=False) -> PatternSource:
    return PatternSource(str(pattern), options, coders.BytesCoder(), with_metadata)


def file_source(path, options=READ_TAIL) -> FileSource:
    (file,) = expand_pattern(str(path), options)
    return FileSource(file, options, coders.BytesCoder(), False)


def record_positions(path, options=READ_TAIL) -> list[int]:
    """Record i's position: its begin offset + 8 * i (see sackli.beam._source)."""
    with sackli.Reader(str(path), options) as reader:
        return [record_offsets(reader, 0, i, 0)[0] + 8 * i for i in range(len(reader))]


class LatinCoder(coders.Coder):
    """Records as latin-1 str."""

    def encode(self, value):
        return value.encode("latin-1")

    def decode(self, encoded):
        return encoded.decode("latin-1")

    def is_deterministic(self):
        return True

    def to_type_hint(self):
        return str


@pytest.fixture
def bag_dir(tmp_path):
    """Bags written by sackli.Writer: a plain `plain.bagz`, a shard set
    `set@3.bag` (uneven, one shard empty) and SEPARATE `g0.bagz`, `g1.bagz`
    (with their `limits.` files) in `glob/`."""
    write_bag(tmp_path / "plain.bagz", [b"p0", b"", b"p2"])
    for name, records in zip(shard_names("set", 3, ".bag"), [[b"s0", b"s1", b""], [], [b"s2"]]):
        write_bag(tmp_path / name, records)
    (tmp_path / "glob").mkdir()
    for i in range(2):
        write_bag(tmp_path / "glob" / f"g{i}.bagz", [b"g%d" % i, b"", b"g%d!" % i], SEPARATE)
    write_bag(tmp_path / "glob" / "other.bag", [b"not matched by *.bagz"])
    return tmp_path
