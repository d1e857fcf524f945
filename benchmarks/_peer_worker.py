"""One implementation of the remote peers benchmark (remote_peers.py), timed
in a process of its own so that no two modules named `sackli` meet.

Run as `python -P _peer_worker.py MODULE` with MODULE `sackli` (this
project's, or upstream Säckli 0.3.4 in its own virtualenv) or `bagz` (with
bagz-gcs installed beside it). `-P` keeps this folder and the working
directory off `sys.path`, so `import sackli` finds the installed package,
never a source tree. Only the standard library and MODULE are imported: the
same file runs under every virtualenv.

The protocol is JSON, one object per line. The worker first writes
`{"ready": true, "module": ..., "version": ...}` (or `{"error": ...}` when
MODULE cannot be imported). Then, for each request read from stdin,

    {"workload": "open+len" | "singles" | "batch" | "scan" | "epoch",
     "spec": "gs://bucket/name.bag", "options": {...}, "indices": [...]}

it opens a new Reader of `spec` (opening is timed: a workload is what a new
process pays), runs the workload, closes the Reader and answers
`{"seconds": s, "checksum": c, "records": n}` or `{"error": "Type: message"}`.
`checksum` is the CRC-32 of the records in the order read (for "open+len":
the length), so the caller can check every record against the data it wrote.
`options` holds `limits_storage` (an enum member's name) and, for this
project's sackli, any other `Reader` keyword (`cache_dir`, ...). An empty
line or end of input ends the worker.

A request with a "loader" key is one of loader_peers.py's instead (write a
format, a shuffled epoch, reads by index, a resume), run by
benchmarks/_loader_formats.py, loaded from beside this file; see there.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
import zlib
from typing import Any, Callable, Iterable


def _open(module: Any, spec: str, options: dict[str, Any]) -> Any:
    """A Reader of `spec` with `options`, spelled as MODULE wants them."""
    options = dict(options)
    if "limits_storage" in options:
        options["limits_storage"] = getattr(module.LimitsStorage, options["limits_storage"])
    if module.__name__ == "bagz":  # bagz takes an Options object, no keywords
        return module.Reader(spec, module.Reader.Options(**options)) if options else module.Reader(spec)
    return module.Reader(spec, **options)


def _checksum(records: Iterable[bytes]) -> tuple[int, int]:
    crc, count = 0, 0
    for record in records:
        crc = zlib.crc32(record, crc)
        count += 1
    return crc, count


def _workloads() -> dict[str, Callable[[Any, list[int]], tuple[int, int]]]:
    """workload name -> f(reader, indices) giving (checksum, records read)."""
    return {
        "open+len": lambda reader, indices: (len(reader), 0),
        "singles": lambda reader, indices: _checksum(reader[i] for i in indices),
        "batch": lambda reader, indices: _checksum(reader.read_indices(indices)),
        "scan": lambda reader, indices: _checksum(iter(reader)),
        "epoch": lambda reader, indices: _checksum(reader.read_indices_iter(indices)),
    }


def _loader_formats() -> Any:
    """benchmarks/_loader_formats.py, by path (`-P` keeps this folder off
    sys.path), loaded once."""
    import importlib.util
    import os

    if "_loader_formats" not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_loader_formats.py")
        spec = importlib.util.spec_from_file_location("_loader_formats", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["_loader_formats"] = module
        spec.loader.exec_module(module)
    return sys.modules["_loader_formats"]


def _run(module: Any, request: dict[str, Any]) -> dict[str, Any]:
    if "loader" in request:
        return _loader_formats().run(request)
    work = _workloads()[request["workload"]]
    indices = request.get("indices") or []
    start = time.perf_counter()
    reader = _open(module, request["spec"], request.get("options") or {})
    try:
        checksum, records = work(reader, indices)
        seconds = time.perf_counter() - start
    finally:
        close = getattr(reader, "close", None)
        if close is not None:
            close()
        del reader
    return {"seconds": seconds, "checksum": checksum, "records": records}


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    name = sys.argv[1]
    try:
        module = importlib.import_module(name)
    except Exception as error:  # reported to the caller, who says why in the table
        _say({"error": f"import {name}: {type(error).__name__}: {error}"})
        return
    version = "?"
    try:
        from importlib import metadata
        distribution = {"sackli": "sackli-bagz" if hasattr(module, "_engine") else "sackli"}.get(name, name)
        version = metadata.version(distribution)
    except Exception:
        version = str(getattr(module, "__version__", "?"))
    if name == "bagz":  # its GCS plugin, if there
        try:
            from importlib import metadata
            version += f" + bagz-gcs {metadata.version('bagz-gcs')}"
        except Exception:
            version += " (no bagz-gcs)"
    _say({"ready": True, "module": name, "version": version, "file": getattr(module, "__file__", "")})
    for line in sys.stdin:
        if not line.strip():
            break
        try:
            answer = _run(module, json.loads(line))
        except Exception as error:
            last = traceback.extract_tb(error.__traceback__)[-1:]
            where = f" ({last[0].name})" if last else ""
            text = " ".join(str(error).split())[:400]
            answer = {"error": f"{type(error).__name__}: {text}{where}"}
        _say(answer)


if __name__ == "__main__":
    main()
