"""A coverage-guided driver (atheris / libFuzzer) for the bytes of one bag.

The input's first byte picks how it is read, the rest is the file:

  bit 0  name: 0 `x.bag`, 1 `x.bagz`
  bit 1  placement: 0 TAIL, 1 SEPARATE (then bytes 1-2 are the length L of
         the limits file, taken from the end of the input)
  bits 2-3  cache policy: SYSTEM, DROP_AFTER_READ, DIRECT_IO (when the
         folder allows O_DIRECT), SYSTEM
  bit 4  limits storage: ON_DISK / IN_MEMORY
  bit 5  max_parallelism 2

Each input is read in-process through r[i] (all i), read(), read_indices,
iteration with and without read-ahead, and compared with the oracle (the
same judge as the mutation fuzzer). Coverage comes from the Python side
(the oracle's parser and sackli's Python layer are instrumented), so inputs
that take new branches of the format are kept.

    python -m fuzz.atheris_driver --make-corpus DIR      # seeds from the corpus
    python -m fuzz.atheris_driver DIR -max_total_time=300 -timeout=20

A disagreement raises AssertionError (libFuzzer saves the input as
crash-*); a segfault is caught by libFuzzer the same way. With
SACKLI_ATHERIS_STRICT=0, disagreements are only appended to
$SACKLI_ATHERIS_LOG (default ./atheris-mismatches.jsonl) and the run goes on
looking for crashes.

Needs `atheris` (pip install atheris; wheels exist for CPython 3.11 on
x86_64 Linux).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile

try:
    import atheris
except ImportError as error:  # pragma: no cover - depends on the environment
    atheris = None
    _IMPORT_ERROR = error
else:
    _IMPORT_ERROR = None

__all__ = ["decode_input", "encode_input", "check_one", "main"]

_POLICIES = ("SYSTEM", "DROP_AFTER_READ", "DIRECT_IO", "SYSTEM")
_FOLDER = None
_DIRECT_IO = False


def encode_input(data: bytes, *, compressed: bool, placement: str = "TAIL", limits: bytes = b"",
                 policy: int = 0, in_memory: bool = False, parallel: bool = False) -> bytes:
    """An input of this driver for a file's bytes (and a SEPARATE limits file)."""
    mode = int(compressed) | (2 if placement == "SEPARATE" else 0) | (policy << 2) \
        | (16 if in_memory else 0) | (32 if parallel else 0)
    if placement == "SEPARATE":
        return bytes([mode]) + len(limits).to_bytes(2, "little") + data + limits
    return bytes([mode]) + data


def decode_input(blob: bytes) -> tuple[dict, bytes, bytes | None]:
    """(options, records file bytes, limits file bytes or None)."""
    if not blob:
        return {}, b"", None
    mode, rest = blob[0], blob[1:]
    options = {
        "suffix": ".bagz" if mode & 1 else ".bag",
        "placement": "SEPARATE" if mode & 2 else "TAIL",
        "cache_policy": _POLICIES[(mode >> 2) & 3],
        "limits_storage": "IN_MEMORY" if mode & 16 else "ON_DISK",
        "max_parallelism": 2 if mode & 32 else 1,
    }
    limits = None
    if options["placement"] == "SEPARATE":
        size = int.from_bytes(rest[:2].ljust(2, b"\0"), "little")
        rest = rest[2:]
        size = min(size, len(rest))
        limits = rest[len(rest) - size:]
        rest = rest[:len(rest) - size]
    return options, rest, limits


def check_one(blob: bytes, folder: str, direct_io: bool = True) -> list[dict]:
    """Reads one input through the paths; returns the disagreements."""
    from .oracle import OracleError, open_bag
    from .paths import Combo, Context, Judge, p_getitem, p_iter, p_iter_sync, p_open, p_read, p_read_indices

    options, data, limits = decode_input(blob)
    if not options:
        return []
    if options["cache_policy"] == "DIRECT_IO" and not direct_io:
        options["cache_policy"] = "DROP_AFTER_READ"
    path = os.path.join(folder, "x" + options["suffix"])
    limits_path = os.path.join(folder, "limits.x" + options["suffix"])
    with open(path, "wb") as f:
        f.write(data)
    if limits is not None:
        with open(limits_path, "wb") as f:
            f.write(limits)
    elif os.path.exists(limits_path):
        os.remove(limits_path)
    meta = {"placement": options["placement"], "layout": "CONCATENATED", "compression": "auto"}
    try:
        oracle = open_bag(path, options["placement"])
    except OracleError as error:
        oracle = error
    combo = Combo(options["cache_policy"], options["limits_storage"], options["max_parallelism"])
    files = [path, limits_path]
    problems = []
    paths = [p_open] if isinstance(oracle, OracleError) else [p_open, p_getitem, p_read, p_read_indices,
                                                              p_iter, p_iter_sync]
    for function in paths:
        judge = Judge(files)
        ctx = Context(path, meta, combo, oracle, None, files, seed=len(blob))
        try:
            function(ctx, judge)
        except Exception as error:  # noqa: BLE001 - e.g. open failed where the oracle opens
            if function is p_open:
                raise
            if not judge.calls:
                break
            judge.fail("mismatch", function.__name__, f"uncaught {type(error).__name__}", None, repr(error))
        if judge.cls == "mismatch":
            problems += [dict(f, path=function.__name__, options=options) for f in judge.failures]
        if function is p_open and judge.cls != "agree":
            break
    return problems


def _test_one_input(blob: bytes) -> None:
    problems = check_one(blob, _FOLDER, _DIRECT_IO)
    if not problems:
        return
    if os.environ.get("SACKLI_ATHERIS_STRICT", "1") == "0":
        with open(os.environ.get("SACKLI_ATHERIS_LOG", "atheris-mismatches.jsonl"), "a") as log:
            log.write(json.dumps({"input": blob.hex(), "problems": problems}) + "\n")
        return
    raise AssertionError("sackli disagrees with the oracle:\n" + json.dumps(problems, indent=1))


def make_corpus(out_dir: str, corpus_seed: int = 0) -> int:
    """Writes this driver's inputs for every single-file seed of the corpus."""
    from .corpus import load_corpus

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        metas = load_corpus(os.path.join(work, "corpus"), corpus_seed)
        count = 0
        for name, meta in sorted(metas.items()):
            spec = meta["spec"]
            if "," in spec or "@" in spec or meta["compression"] != "auto" or meta["layout"] != "CONCATENATED":
                continue
            data = (pathlib.Path(work, "corpus", name, spec)).read_bytes()
            if len(data) > 200_000:
                continue
            limits = b""
            if meta["placement"] == "SEPARATE":
                limits = pathlib.Path(work, "corpus", name, "limits." + spec).read_bytes()
            for policy in (0, 1):
                blob = encode_input(data, compressed=spec.endswith(".bagz"), placement=meta["placement"],
                                    limits=limits, policy=policy)
                (out / f"{name}-{policy}").write_bytes(blob)
                count += 1
    return count


def main(argv: list[str] | None = None) -> None:
    global _FOLDER, _DIRECT_IO
    argv = list(sys.argv if argv is None else argv)
    if len(argv) >= 3 and argv[1] == "--make-corpus":
        print(f"{make_corpus(argv[2])} inputs written to {argv[2]}")
        return
    if atheris is None:
        raise SystemExit(
            "fuzz.atheris_driver needs atheris (pip install atheris); importing it failed: "
            f"{_IMPORT_ERROR!r}. The mutation fuzzer (python -m fuzz run) does not need it.")
    with atheris.instrument_imports():
        import sackli  # noqa: F401

        from . import oracle, paths  # noqa: F401
    from .runner import direct_io_works

    _FOLDER = tempfile.mkdtemp(prefix="sackli-atheris-", dir=os.environ.get("SACKLI_FUZZ_TMP"))
    _DIRECT_IO = direct_io_works(_FOLDER)
    atheris.Setup(argv, _test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
