"""Files that change under an open reader.

A mapped file truncated by another process used to kill the reader with
SIGBUS. Now every read path raises sackli.CorruptionError naming the file
(also from pool threads), later reads of that file raise too, and a SIGBUS
that is not sackli's still ends the process as before. A file replaced by a
rename keeps serving the content the reader opened.

Every case runs in a subprocess: a signal fails the test instead of killing
pytest.
"""

from __future__ import annotations

import json
import signal

import pytest

import sackli

N = 2000
RECORD = 1024


def records(n: int = N) -> list[bytes]:
    return [(b"%06d" % i) * (RECORD // 6) for i in range(n)]


def write_bag(path, n: int = N, **options) -> None:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records(n))


# name -> (suffix, expression read after the truncation)
PATHS = {
    "r[i] past the new end": (".bag", f"r[{N - 10}]"),
    "r[i] before it": (".bag", "r[0]"),
    "read_indices": (".bag", f"r.read_indices(list(range(0, {N}, 7)))"),
    "read": (".bag", "r.read()"),
    "iteration": (".bag", "list(r)"),
    "read_indices_iter": (".bag", f"list(r.read_indices_iter(range({N} - 1, -1, -3)))"),
    "view": (".bag", f"r[{N // 2}::3].read()"),
    "Index": (".bag", "sackli.Index(r)"),
    "count": (".bag", "r.count(b'x' * 1024)"),
    "r[i] .bagz": (".bagz", f"r[{N - 10}]"),
    "read .bagz": (".bagz", "r.read()"),
    "MultiIndex .bagz": (".bagz", "sackli.MultiIndex(r)"),
}


@pytest.mark.parametrize("name", sorted(PATHS))
def test_truncated_under_an_open_reader_raises(tmp_path, run_python, name):
    suffix, expression = PATHS[name]
    path = tmp_path / ("data" + suffix)
    write_bag(path)
    result = run_python(f"""
        import os, sackli
        r = sackli.Reader({str(path)!r}, max_parallelism=4)
        assert r[{N - 10}] == {records()[N - 10]!r}
        os.truncate({str(path)!r}, os.path.getsize({str(path)!r}) // 2)
        report(lambda: {expression})
        report(lambda: r[{N - 10}])  # the file stays changed for this reader
    """)
    assert result.returncode == 0, result.stderr
    first, later = (json.loads(line) for line in result.stdout.splitlines()[-2:])
    for outcome in (first, later):
        assert outcome.get("error") == "CorruptionError", outcome
        assert str(path) in outcome["message"]
        assert "changed while this reader had it open" in outcome["message"]


@pytest.mark.parametrize("cache_policy", ["DROP_AFTER_READ", "DIRECT_IO"])
def test_truncated_under_an_unmapped_reader_raises(tmp_path, run_python, cache_policy):
    """pread and O_DIRECT readers find the end of the file early."""
    path = tmp_path / "data.bag"
    write_bag(path)
    result = run_python(f"""
        import os, sackli
        r = sackli.Reader({str(path)!r}, cache_policy={cache_policy!r})
        os.truncate({str(path)!r}, os.path.getsize({str(path)!r}) // 2)
        report(lambda: r.read_indices([0, {N - 10}]))
    """)
    outcome = result.outcome()
    assert outcome.get("error") == "CorruptionError", outcome
    assert str(path) in outcome["message"] and "end of file" in outcome["message"]


def test_truncated_separate_limits_file_raises(tmp_path, run_python):
    path = tmp_path / "data.bag"
    write_bag(path, limits_placement="SEPARATE")
    limits = tmp_path / "limits.data.bag"
    result = run_python(f"""
        import os, sackli
        r = sackli.Reader({str(path)!r}, limits_placement="SEPARATE")
        os.truncate({str(limits)!r}, 4096)
        report(lambda: r[{N - 1}])
    """)
    outcome = result.outcome()
    assert outcome.get("error") == "CorruptionError", outcome
    assert str(limits) in outcome["message"]


def test_pool_threads_raise_instead_of_crashing(tmp_path, run_python):
    """Truncation while batch reads run on pool threads: every call ends in
    records or a clean error, never a signal."""
    path = tmp_path / "data.bagz"
    write_bag(path, n=20000)
    result = run_python(f"""
        import os, threading, sackli
        r = sackli.Reader({str(path)!r}, max_parallelism=4)
        errors, done = [], []
        def reader():
            for _ in range(200):
                try:
                    r.read_indices(range(0, 20000, 3))
                    done.append(1)
                except sackli.CorruptionError as error:
                    errors.append(str(error))
                    return
        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        os.truncate({str(path)!r}, os.path.getsize({str(path)!r}) // 3)
        for t in threads:
            t.join()
        report(lambda: (len(errors), all({str(path)!r} in e for e in errors)))
    """, timeout=120)
    assert result.outcome() == {"ok": repr((3, True))}


def test_replaced_by_rename_keeps_the_opened_content(tmp_path, run_python):
    path = tmp_path / "data.bag"
    write_bag(path, n=100)
    result = run_python(f"""
        import os, sackli
        r = sackli.Reader({str(path)!r})
        with sackli.Writer({str(tmp_path / 'new.bag')!r}) as w:
            w.write(b"new")
        os.replace({str(tmp_path / 'new.bag')!r}, {str(path)!r})
        report(lambda: (r[99] == {records(100)[99]!r}, len(r), sackli.Reader({str(path)!r}).read()))
    """)
    assert result.outcome() == {"ok": repr((True, 100, [b"new"]))}


def test_a_sigbus_that_is_not_sackli_s_still_ends_the_process(tmp_path, run_python):
    """sackli's handler only absorbs faults of its own guarded reads: a
    truncated mmap read by other code still dies with SIGBUS (and Python's
    faulthandler, which the fixture enables, still reports it)."""
    path = tmp_path / "data.bag"
    write_bag(path, n=100)
    other = tmp_path / "other.bin"
    other.write_bytes(b"x" * 65536)
    result = run_python(f"""
        import mmap, os, sackli
        r = sackli.Reader({str(path)!r})
        r[0]  # sackli's handler is installed
        with open({str(other)!r}, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        os.truncate({str(other)!r}, 0)
        print(m[60000])
    """)
    assert result.returncode == -signal.SIGBUS, (result.returncode, result.stderr)
    assert "Bus error" in result.stderr


def test_reads_in_a_forked_child_are_guarded_too(tmp_path, run_python):
    path = tmp_path / "data.bag"
    write_bag(path)
    result = run_python(f"""
        import os, sackli
        r = sackli.Reader({str(path)!r})
        r[0]
        pid = os.fork()
        if pid == 0:
            os.truncate({str(path)!r}, 1000)
            try:
                r[{N - 1}]
                os._exit(1)
            except sackli.CorruptionError:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        report(lambda: status)
    """)
    assert result.outcome() == {"ok": "0"}


MAP_KEYS = 4000
# name -> (compression, expression read after the truncation); `m` is the map,
# `gone` a key whose value now lies past the end of the file.
MAP_PATHS = {
    "mb[key]": (None, "m[gone]"),
    "get_many on pool threads": (None, f"m.get_many(range({MAP_KEYS}))"),
    "get_many zstd": ("zstd", f"m.get_many(range({MAP_KEYS}))"),
    "items()": (None, "list(m.items())"),
    "values() zstd": ("zstd", "list(m.values())"),
}


@pytest.mark.parametrize("name", sorted(MAP_PATHS))
def test_map_truncated_under_an_open_reader_raises(tmp_path, run_python, name):
    """A mapped MapBuffer whose file shrinks: ValidationError (a
    CorruptionError) naming the file, never SIGBUS, also where the engine's
    pool threads read the values."""
    compress, expression = MAP_PATHS[name]
    path = tmp_path / "data.mb"
    result = run_python(f"""
        import os, sackli, sackli.maps
        data = {{k: (b"%06d" % k) * 200 for k in range({MAP_KEYS})}}
        sackli.maps.write({str(path)!r}, data.items(), compress={compress!r})
        m = sackli.maps.MapBuffer({str(path)!r})
        assert m.get_many(range({MAP_KEYS})) == list(data.values())
        # At a page boundary: the pages after it are gone (a read of them
        # faults), none is left half zeros.
        end = os.path.getsize({str(path)!r}) // 2 // 4096 * 4096
        core = m._core_now()
        gone = next(k for k in data if core.extent(core.find(k))[0] >= end)
        os.truncate({str(path)!r}, end)
        report(lambda: {expression})
        report(lambda: m[gone])  # the file stays changed for this map
    """)
    assert result.returncode == 0, result.stderr
    first, later = (json.loads(line) for line in result.stdout.splitlines()[-2:])
    for outcome in (first, later):
        assert outcome.get("error") == "ValidationError", outcome
        assert str(path) in outcome["message"]
        assert "changed while this reader had it open" in outcome["message"]
