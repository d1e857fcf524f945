"""The bag the loader tests read: 101 records, b"record 0" ... b"record 100"."""

from __future__ import annotations

import pytest

import sackli

RECORDS = [b"record %d" % i for i in range(101)]


@pytest.fixture(scope="session")
def records() -> list[bytes]:
    return RECORDS


@pytest.fixture(scope="session")
def path(tmp_path_factory):
    path = tmp_path_factory.mktemp("bags") / "train.bagz"
    with sackli.Writer(path) as writer:
        writer.write_many(RECORDS)
    return path
