"""Batch reads keep the memory of freed batches (native/python/buffers.h,
KeepHeapForBatches): the next batch reuses it instead of page-faulting
fresh zeroed pages, unless SACKLI_KEEP_BATCH_MEMORY=0. Each case runs in a
fresh interpreter, whose allocator starts in glibc's default state."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

PROGRAM = """
    import json, os, resource, sackli, sackli.maps
    path = {path!r}
    with sackli.Writer(path) as writer:
        writer.write_many(os.urandom(1024) for _ in range(10000))
    reader = sackli.Reader(path)
    mb = sackli.maps.MapBuffer({{k: os.urandom(1024) for k in range(10000)}})
    filler = [bytes(1000) for _ in range(20000)]  # live objects below the heap top
    faults = {{"reader": [], "map": []}}
    for name, read in (("reader", lambda: reader.read_indices(range(10000))),
                       ("map", lambda: mb.get_many(range(10000)))):
        for _ in range(5):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            values = read()
            del values
            faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(json.dumps(faults))
"""


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="glibc's allocator")
@pytest.mark.parametrize("keep", [True, False])
def test_freed_batches_are_reused(tmp_path, run_python, keep) -> None:
    setting = "" if keep else "os.environ['SACKLI_KEEP_BATCH_MEMORY'] = '0'\n"
    program = textwrap.dedent(PROGRAM.format(path=str(tmp_path / "a.bag")))
    result = run_python("import os\n" + setting + program)
    assert result.returncode == 0, result.stderr
    faults = json.loads(result.stdout.splitlines()[-1])
    for name, counts in faults.items():
        later = counts[2:]  # the first batches grow the heap either way
        if keep:
            # 10 MB a batch is ~2,500 pages: reused, next to none fault.
            assert max(later) < 400, (name, counts)
        else:
            assert min(later) > 1500, (name, counts)
