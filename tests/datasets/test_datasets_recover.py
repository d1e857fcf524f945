"""Interrupted dataset writes are found and recovered (issue 31, §1).

A writer process is killed (SIGKILL, or `os._exit` where the test needs an
exact pattern of what reached the disk) in the middle of a write; then
`sackli.recover(target)` or `sackli recover TARGET` must publish a dataset
that holds a prefix of the datapoints appended, in order, readable by
sackli and by `bags` itself, and leave nothing hidden behind.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

import bags
import pytest

import sackli
from crash_helpers import child_env, kill_when_ready, sackli_cli
from sackli import datasets

SPEC = {"label": "int(8)", "words": "utf8[]", "blob": "bytes"}
BLOB_BYTES = 3000

# Datapoint i of every test: a scalar, a list of 0-3 items and a blob, so
# that a datapoint spans every kind of ref.
_DATAPOINT = textwrap.dedent(f"""
    def datapoint(i):
        return {{"label": i, "words": ["w%d.%d" % (i, j) for j in range(i % 4)],
                 "blob": (b"%08d" % i) * ({BLOB_BYTES} // 8)}}
""")
_namespace: dict = {}
exec(_DATAPOINT, _namespace)
datapoint = _namespace["datapoint"]  # the same as the children's

# A child that appends `flushed` datapoints, flushes (unless told not to),
# appends `unflushed` more, says "ready" and waits to be killed.
_CHILD = _DATAPOINT + textwrap.dedent("""
    import json, sys, time
    from sackli import datasets
    how = json.loads(sys.argv[1])
    writer = getattr(datasets, how["writer"])(how["directory"], how["spec"], **how["options"])
    for i in range(how["flushed"]):
        writer.append(datapoint(i))
    if how["flush"]:
        writer.flush()
    for i in range(how["flushed"], how["flushed"] + how["unflushed"]):
        writer.append(datapoint(i))
    print("ready", flush=True)
    time.sleep(120)
""")


def _kill_mid_write(folder, writer: str = "DatasetWriter", directory: str = "ds",
                    flushed: int = 40, unflushed: int = 25, spec=SPEC, flush: bool = True,
                    **options) -> None:
    """Runs a dataset writer in `folder` and kills it (SIGKILL) mid-write."""
    how = json.dumps({"writer": writer, "directory": directory, "spec": spec, "flush": flush,
                      "options": options, "flushed": flushed, "unflushed": unflushed})
    kill_when_ready(_CHILD, how, folder)


def _run_and_exit(folder, body: str) -> None:
    """Runs `body` (with `datapoint` and `datasets` defined) in a child
    that ends with os._exit: no close, no cleanup, as a crash leaves it."""
    code = _DATAPOINT + "import os\nfrom sackli import datasets\n" + textwrap.dedent(body) + \
        "\nos._exit(0)\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=folder, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _recover(folder, target: str, how: str) -> int:
    """Recovers `target` through the API or the command line; datapoints saved."""
    if how == "api":
        return sackli.recover(os.path.join(folder, target)).records
    done = sackli_cli("recover", target, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{target}: recovered "), done.stdout
    return int(done.stdout.split("recovered ")[1].split()[0])


def _visible_only(folder) -> list[str]:
    """The names in `folder`, checked to hold nothing hidden."""
    names = sorted(os.listdir(folder))
    assert not [name for name in names if name.startswith(".")], names
    return names


def _assert_prefix(reader, count: int) -> None:
    """`reader` (sackli's or bags') holds datapoints 0 .. count - 1."""
    assert len(reader) == count
    for i in range(count):
        assert reader[i] == datapoint(i)


@pytest.mark.parametrize("how", ["api", "cli"])
def test_a_killed_dataset_writer_is_recovered_to_a_prefix_that_bags_reads(tmp_path, how):
    _kill_mid_write(tmp_path, flushed=40, unflushed=25)
    (hidden,) = os.listdir(tmp_path)  # nothing at the target yet
    assert hidden.startswith(".ds.sackli-partial-")
    with pytest.raises(FileNotFoundError, match=r"unfinished write of \S*ds .*sackli recover"):
        datasets.DatasetReader(tmp_path / "ds")
    saved = _recover(tmp_path, "ds", how)
    assert 40 <= saved <= 65
    assert _visible_only(tmp_path) == ["ds"]
    assert _visible_only(tmp_path / "ds") == [
        "blob.bag", "label.bag", "refs.bag", "spec.json", "words.bag"]
    _assert_prefix(datasets.DatasetReader(tmp_path / "ds"), saved)
    _assert_prefix(bags.DatasetReader(tmp_path / "ds", bags.decoders), saved)
    with pytest.raises(FileNotFoundError, match="nothing to recover"):
        sackli.recover(tmp_path / "ds")


def test_a_recovered_dataset_is_the_one_close_would_have_written(tmp_path):
    # The field files got 30 datapoints further than refs.bag: the values
    # without refs are cut away, and every file is byte for byte what a
    # writer of the first 20 datapoints closes.
    _run_and_exit(tmp_path, """
        writer = datasets.DatasetWriter("ds", {spec})
        for i in range(20):
            writer.append(datapoint(i))
        writer.flush()
        for i in range(20, 50):
            writer.append(datapoint(i))
        for field in writer._writers.values():
            field.flush()
    """.format(spec=SPEC))
    report = sackli.recover(tmp_path / "ds")
    assert report.records == 20
    assert report.dropped_limits > 0 and report.dropped_bytes > 30 * BLOB_BYTES
    with datasets.DatasetWriter(tmp_path / "clean", SPEC) as clean:
        for i in range(20):
            clean.append(datapoint(i))
    assert _visible_only(tmp_path / "ds") == _visible_only(tmp_path / "clean")
    for name in os.listdir(tmp_path / "clean"):
        assert (tmp_path / "ds" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    assert _visible_only(tmp_path) == ["clean", "ds"]


def test_a_recovery_that_is_itself_interrupted_is_completed_by_the_next(tmp_path, monkeypatch):
    _run_and_exit(tmp_path, """
        writer = datasets.DatasetWriter("ds", {spec})
        for i in range(20):
            writer.append(datapoint(i))
        writer.flush()
        for i in range(20, 50):
            writer.append(datapoint(i))
        for field in writer._writers.values():
            field.flush()
    """.format(spec=SPEC))
    from sackli.datasets import _recover

    real = _recover._engine

    class _DiesCuttingBlob:
        """The engine, but the recovery dies as it cuts blob.bag to 20
        datapoints (its limits.blob.bag written, the bag not yet cut)."""

        def __getattr__(self, name):
            return getattr(real, name)

        def recover(self, path):
            # The cut's call is on <hidden folder>/blob.bag; the completion's
            # on a file in the bag writer's own folder inside it.
            hidden_folder = os.path.dirname(path)
            if os.path.dirname(hidden_folder) == str(tmp_path) and path.endswith("/blob.bag"):
                raise KeyboardInterrupt("killed while cutting")
            return real.recover(path)

    monkeypatch.setattr(_recover, "_engine", _DiesCuttingBlob())
    with pytest.raises(KeyboardInterrupt):
        sackli.recover(tmp_path / "ds")
    monkeypatch.setattr(_recover, "_engine", real)
    (hidden,) = os.listdir(tmp_path)
    assert "limits.blob.bag" in os.listdir(tmp_path / hidden)  # the cut was under way
    assert sackli.recover(tmp_path / "ds").records == 20
    with datasets.DatasetWriter(tmp_path / "clean", SPEC) as clean:
        for i in range(20):
            clean.append(datapoint(i))
    for name in os.listdir(tmp_path / "clean"):
        assert (tmp_path / "ds" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    assert _visible_only(tmp_path) == ["clean", "ds"]


def test_refs_that_point_past_a_field_end_the_prefix(tmp_path):
    # refs.bag reached the disk 30 datapoints further than the fields: those
    # datapoints are incomplete and dropped.
    _run_and_exit(tmp_path, """
        writer = datasets.DatasetWriter("ds", {spec})
        for i in range(20):
            writer.append(datapoint(i))
        writer.flush()
        for i in range(20, 50):
            writer.append(datapoint(i))
        writer._refs.flush()
    """.format(spec=SPEC))
    assert sackli.recover(tmp_path / "ds").records == 20
    _assert_prefix(bags.DatasetReader(tmp_path / "ds", bags.decoders), 20)
    assert _visible_only(tmp_path) == ["ds"]


def test_a_compressed_durable_write_is_recovered(tmp_path):
    _kill_mid_write(tmp_path, flushed=30, unflushed=10, compression={"blob": "zstd(5)"},
                    durable=True)
    saved = sackli.recover(tmp_path / "ds").records
    assert 30 <= saved <= 40
    assert "blob.bagz" in _visible_only(tmp_path / "ds")
    spec = json.loads((tmp_path / "ds" / "spec.json").read_text())
    assert spec["sackli/compression"] == {"blob": "zstd(5)"}
    _assert_prefix(datasets.DatasetReader(tmp_path / "ds"), saved)


@pytest.mark.parametrize("flush", [True, False], ids=["flushed", "nothing-on-disk"])
def test_a_writer_killed_before_its_first_datapoint_recovers_an_empty_dataset(tmp_path, flush):
    # Unflushed, not even the leading empty record of a bags file is on disk.
    _kill_mid_write(tmp_path, flushed=0, unflushed=0 if flush else 5, flush=flush)
    report = sackli.recover(tmp_path / "ds")
    assert report.records == 0
    assert _visible_only(tmp_path) == ["ds"]
    assert len(datasets.DatasetReader(tmp_path / "ds")) == 0
    assert len(bags.DatasetReader(tmp_path / "ds", bags.decoders)) == 0


@pytest.mark.parametrize("how", ["api", "cli"])
def test_a_killed_sharded_writer_keeps_its_shards_and_a_prefix_of_the_open_one(tmp_path, how):
    # Shards 000000 and 000001 were closed; 000002 was being written.
    _kill_mid_write(tmp_path, "ShardedDatasetWriter", flushed=250, unflushed=20,
                    shard_length=100)
    hidden, *shards = sorted(os.listdir(tmp_path / "ds"))
    assert hidden.startswith(".000002.sackli-partial-") and shards == ["000000", "000001"]
    if how == "api":  # the shard is the target of its own write
        saved = sackli.recover(tmp_path / "ds" / "000002").records
    else:  # `sackli recover DIR` completes every unfinished write in it
        done = sackli_cli("recover", "ds", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "000002: recovered " in done.stdout
        saved = int(done.stdout.split("recovered ")[1].split()[0])
    assert 50 <= saved <= 70
    assert _visible_only(tmp_path / "ds") == ["000000", "000001", "000002"]
    assert _visible_only(tmp_path) == ["ds"]
    _assert_prefix(datasets.ShardedDatasetReader(tmp_path / "ds"), 200 + saved)
    _assert_prefix(bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders), 200 + saved)


def test_the_journal_is_written_before_any_datapoint_and_never_published(tmp_path):
    writer = datasets.DatasetWriter(tmp_path / "ds", SPEC)
    (hidden,) = os.listdir(tmp_path)
    assert hidden.startswith(".ds.sackli-partial-")
    journal = json.loads((tmp_path / hidden / "sackli-write.json").read_text())
    assert journal["kind"] == "dataset" and journal["target"] == "ds"
    assert journal["module"] == "sackli.datasets._recover"
    writer.append(datapoint(0))
    writer.close()
    assert _visible_only(tmp_path) == ["ds"]
    assert "sackli-write.json" not in os.listdir(tmp_path / "ds")


def test_a_failed_with_block_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with datasets.DatasetWriter(tmp_path / "ds", SPEC) as writer:
            writer.append(datapoint(0))
            writer.flush()
            raise RuntimeError("stop")
    with pytest.raises(RuntimeError):
        with datasets.ShardedDatasetWriter(tmp_path / "sharded", SPEC, shard_length=2) as writer:
            for i in range(3):
                writer.append(datapoint(i))
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == ["sharded"]
    assert os.listdir(tmp_path / "sharded") == ["000000"]  # the shard it had finished


def test_recovery_refuses_to_replace_a_dataset_that_appeared_meanwhile(tmp_path):
    _kill_mid_write(tmp_path, flushed=5, unflushed=0)
    with datasets.DatasetWriter(tmp_path / "ds", SPEC) as other:
        other.append(datapoint(7))
    with pytest.raises(FileExistsError, match="ds"):
        sackli.recover(tmp_path / "ds")
    assert len(datasets.DatasetReader(tmp_path / "ds")) == 1  # untouched
    assert len(os.listdir(tmp_path)) == 2  # the unfinished write stays, for the user


def test_a_dataset_named_like_a_glob_is_written_and_recovered(tmp_path):
    # The hidden folder's name has the glob characters percent-encoded, as
    # every writer's: the bags in it are sackli.Writers, which refuse globs.
    _kill_mid_write(tmp_path, directory="d*s[1]", flushed=5, unflushed=0)
    (hidden,) = os.listdir(tmp_path)
    assert hidden.startswith(".d%2As%5B1].sackli-partial-")
    assert sackli.recover(tmp_path / "d*s[1]").records == 5
    assert _visible_only(tmp_path) == ["d*s[1]"]
    _assert_prefix(bags.DatasetReader(tmp_path / "d*s[1]", bags.decoders), 5)


def test_a_shard_killed_before_anything_reached_the_disk_is_an_empty_shard(tmp_path):
    _kill_mid_write(tmp_path, "ShardedDatasetWriter", flushed=200, unflushed=5,
                    shard_length=100)
    assert sackli.recover(tmp_path / "ds" / "000002").records == 0
    assert _visible_only(tmp_path / "ds") == ["000000", "000001", "000002"]
    _assert_prefix(bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders), 200)


def test_a_sharded_dataset_whose_first_shard_is_unfinished_says_so(tmp_path):
    _kill_mid_write(tmp_path, "ShardedDatasetWriter", flushed=30, unflushed=0, shard_length=100)
    with pytest.raises(ValueError, match=r"unfinished writes of shards 000000 .*sackli recover"):
        datasets.ShardedDatasetReader(tmp_path / "ds")
    done = sackli_cli("recover", "ds", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    _assert_prefix(bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders), 30)


def test_a_writer_dropped_without_close_publishes_nothing_and_keeps_everything(tmp_path):
    # An exception outside `with`: the writer is garbage-collected unclosed.
    def write_and_fail():
        writer = datasets.DatasetWriter(tmp_path / "ds", SPEC)
        for i in range(12):
            writer.append(datapoint(i))
        raise RuntimeError("stop")

    with pytest.warns(ResourceWarning, match=r"DatasetWriter.*not closed.*sackli recover"):
        with pytest.raises(RuntimeError):
            write_and_fail()
        gc.collect()
    (hidden,) = os.listdir(tmp_path)  # nothing published
    assert hidden.startswith(".ds.sackli-partial-")
    assert sackli.recover(tmp_path / "ds").records == 12  # none was flushed: all kept
    _assert_prefix(bags.DatasetReader(tmp_path / "ds", bags.decoders), 12)
