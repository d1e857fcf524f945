"""Beam pipelines writing and reading bags on gs://, against
gcp-storage-emulator (it answers the batch copies and deletes Beam's GCS
file system sends; fake-gcs-server does not). Beam's GCS client and
sackli's both follow STORAGE_EMULATOR_HOST, which `emulated_gcs` points at
the emulator's proxy."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

import sackli
from sackli.beam import ReadAllFromSackli, ReadFromSackli, WriteToSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, PLACEMENTS, SEPARATE, assert_reads, make_pipeline, make_records, run_write,
    shard_names, with_limits,
)
from remote_helpers import emulated_gcs, gcs_emulator  # noqa: F401 (fixtures)


def read_objects(gcs, names, options=None) -> list[bytes]:
    records = []
    for name in names:
        with sackli.Reader(gcs.url(name), options) as reader:
            records += list(reader)
    return records


@PLACEMENTS
def test_write_a_shard_set_then_read_it_back(emulated_gcs, placement):
    gcs = emulated_gcs
    records = make_records(300, seed=3)
    names = shard_names("out", 3, ".bagz")
    with make_pipeline() as p:
        written = p | beam.Create(records) | WriteToSackli(
            gcs.url("out@3.bagz"), options=sackli.Writer.Options(limits_placement=placement))
        assert_that(written, equal_to([gcs.url(n) for n in names]))
    expected = with_limits(names) if placement == SEPARATE else names
    assert sorted(gcs.objects()) == sorted(expected)  # no temporary objects left
    options = sackli.Reader.Options(limits_placement=placement)
    assert sorted(read_objects(gcs, names, options)) == sorted(records)
    assert_reads(ReadFromSackli(gcs.url("out@*.bagz"), options=options), records)
    assert_reads(beam.Create([gcs.url("out@3.bagz")]) | ReadAllFromSackli(options=options),
                 records)


def test_multi_processing_write_and_read(emulated_gcs):
    gcs = emulated_gcs
    records = make_records(200, seed=4)
    run_write(records, gcs.url("mp@2.bag"), runner="multi_processing")
    assert sorted(gcs.objects()) == shard_names("mp", 2, ".bag")
    assert_reads(ReadFromSackli(gcs.url("mp@*.bag")), records, runner="multi_processing")


def test_a_rewrite_with_another_shard_count_replaces_the_older_set(emulated_gcs):
    """Refused without overwrite (the older set untouched); with it, the
    older set goes once the new one is in place."""
    gcs = emulated_gcs
    run_write(make_records(90, seed=5), gcs.url("set@3.bagz"))
    assert sorted(gcs.objects()) == shard_names("set", 3, ".bagz")
    before = {name: gcs.get(name) for name in gcs.objects()}
    with pytest.raises(Exception, match=r"set@3\.bagz .*pass overwrite=True"):
        run_write([b"only"], gcs.url("set@2.bagz"))
    assert {name: gcs.get(name) for name in gcs.objects()} == before
    # One record into two shards: the second is an empty padding shard.
    run_write([b"only"], gcs.url("set@2.bagz"), overwrite=True)
    assert sorted(gcs.objects()) == shard_names("set", 2, ".bagz")
    assert sorted(read_objects(gcs, shard_names("set", 2, ".bagz"))) == [b"only"]
    assert_reads(ReadFromSackli(gcs.url("set@*.bagz")), [b"only"])


def test_a_failed_write_keeps_the_older_output(emulated_gcs):
    gcs = emulated_gcs
    records = make_records(40, seed=6)
    run_write(records, gcs.url("keep@2.bag"))
    before = {name: gcs.get(name) for name in gcs.objects()}
    # Every upload fails (the emulator is told 503 on each PUT and POST):
    # the pipeline fails, and the older shard set must be untouched.
    gcs.proxy.fail_fraction(1.0, status=503, kinds=["PUT", "POST"])
    with pytest.raises(Exception):
        run_write(make_records(10, seed=7), gcs.url("keep@2.bag"))
    gcs.proxy.reset_faults()
    assert {name: gcs.get(name) for name in gcs.objects()} == before
