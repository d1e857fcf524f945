"""`sackli info`, `verify` and `get` for `mapbuffer` map files (sackli.maps):
a SPEC ending in `.mb` is a MapBuffer, one ending in `.im` an IntMap, local
or `gs://` / `s3://`. `command_for` is the hook `main` asks before running a
bag command, so the bag commands stay as they are.

- info: kind, format version, compression, keys, the bytes of header, index
  and values, the key range and the stored value sizes (from the index alone).
- verify: the index (keys in Eytzinger order; offsets in order and inside
  the map), then every value (crc32c, decoding), in batches looked up by the
  engine; each problem is one line naming the file, key and byte offset.
- get KEY: the value of one key in --format (an IntMap's value prints as a
  decimal number, or its 8 little-endian bytes with raw and hex).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..maps import IntMap, MapBuffer, ValidationError
from ._errors import BadArgument
from ._escapes import JSON_ESCAPES, escape_name
from ._print import FORMATTERS
from ._progress import progress, progress_shown
from ._reading import refuse_bag_options
from ._verdict import FailFast, reporter, verdict

_MAP_CLASSES: dict[str, type] = {".mb": MapBuffer, ".im": IntMap}
# A verification batch holds about this many stored bytes.
_BATCH_BYTES = 4 << 20
_MAX_BATCH_KEYS = 65536


def map_class(spec: str) -> type | None:
    """MapBuffer or IntMap when `spec` names a map file (by its suffix)."""
    for suffix, cls in _MAP_CLASSES.items():
        if spec.lower().endswith(suffix):
            return cls
    return None


def command_for(args: argparse.Namespace) -> Callable[[argparse.Namespace], int] | None:
    """The map version of args' subcommand when its SPEC is a map file, else
    None (the bag command runs). Bag reading options given for a map are
    refused when it runs (a wrong argument, exit 2)."""
    command = _COMMANDS.get(getattr(args, "command_name", ""))
    spec = getattr(args, "spec", None)
    if command is None or not isinstance(spec, str) or map_class(spec) is None:
        return None

    def run(args: argparse.Namespace) -> int:
        refuse_bag_options(args, "a map")
        return command(args)

    return run


def _open(spec: str) -> Any:
    cls = map_class(spec)
    assert cls is not None
    return cls(spec)


def _stored_sizes(mb: MapBuffer, file_bytes: int) -> list[int]:
    """The stored size of every value (compressed, without its crc32c), from
    the index (validated first, so offsets are in order and in the map)."""
    if len(mb) == 0:
        return []
    offsets = [offset for _, offset in mb.index().tolist()]
    ends = offsets[1:] + [file_bytes]
    checksum = 4 if mb.format_version >= 1 else 0
    return [end - begin - checksum for begin, end in zip(offsets, ends)]


def describe(spec: str) -> dict[str, Any]:
    """Everything `info` reports about a map, as JSON-ready values."""
    m = _open(spec)
    m.validate()  # sizes below come from the index: it must be sound
    count = len(m)
    file_bytes = len(m.buffer)
    keys = list(m.keys())
    index_bytes = 16 * count
    facts: dict[str, Any] = {
        "spec": spec,
        "kind": type(m).__name__,
        "format_version": m.format_version,
        "keys": count,
        "file_bytes": file_bytes,
        "header_bytes": m.HEADER_LENGTH,
        "index_bytes": index_bytes,
        "key_range": {"min": min(keys, default=None), "max": max(keys, default=None)},
    }
    if isinstance(m, MapBuffer):
        sizes = _stored_sizes(m, file_bytes)
        facts["compression"] = m.compress or "none"
        facts["value_bytes"] = file_bytes - m.HEADER_LENGTH - index_bytes
        facts["value_size"] = {
            "min": min(sizes, default=0),
            "median": statistics.median(sizes) if sizes else 0,
            "max": max(sizes, default=0),
        }
    return facts


def _size_text(size: dict[str, Any]) -> str:
    median = size["median"]
    median_text = str(int(median)) if median == int(median) else f"{median:.1f}"
    return f"min {size['min']}, median {median_text}, max {size['max']} (bytes, as stored)"


def info(args: argparse.Namespace) -> int:
    """Prints a summary of a map (`--json`: one JSON object)."""
    facts = describe(args.spec)
    if args.json:
        print(json.dumps(facts, indent=2).translate(JSON_ESCAPES))
        return 0
    key_range = facts["key_range"]
    rows = [
        ("spec", facts["spec"]),
        ("kind", f"{facts['kind']} (mapbuffer format {facts['format_version']})"),
        ("keys", facts["keys"]),
        ("file bytes", f"{facts['file_bytes']} (header {facts['header_bytes']}, "
                       f"index {facts['index_bytes']})"),
        ("key range", "none" if key_range["min"] is None
         else f"{key_range['min']} .. {key_range['max']}"),
    ]
    if "compression" in facts:
        rows += [
            ("compression", facts["compression"]),
            ("value bytes", f"{facts['value_bytes']} (as stored, crc32c included)"),
            ("value size", _size_text(facts["value_size"])),
        ]
    for name, value in rows:
        print(f"{name + ':':<18}{escape_name(value)}")
    return 0


def _batches(mb: MapBuffer, keys: list[int]) -> Iterator[tuple[int, list[int]]]:
    """(first position, keys) batches of about _BATCH_BYTES of values."""
    average = mb.datasize() / max(1, len(keys))
    step = max(1, min(_MAX_BATCH_KEYS, int(_BATCH_BYTES // max(1.0, average))))
    for start in range(0, len(keys), step):
        yield start, keys[start:start + step]


def _check_values(mb: MapBuffer, index_sound: bool, report: Callable[[str], None],
                  bar: Any) -> None:
    """Reads every value: a batch at a time through the engine while the
    index is sound; a batch with a problem (or an unsound index, where a
    search by key may miss) is read value by value to name each bad one."""
    keys = list(mb.keys())
    for start, batch in _batches(mb, keys):
        if index_sound:
            try:
                mb.get_many(batch)
                bar.update(len(batch))
                continue
            except ValidationError:
                pass  # found one by one below
        for position in range(start, start + len(batch)):
            try:
                mb.getindex(position)
            except ValidationError as error:
                report(str(error))
            bar.update(1)


def _check_map(spec: str, report: Callable[[str], None], bars: list[Any]) -> str:
    """Checks the map at `spec`, reporting each problem; returns the line
    that says it is sound (printed when nothing was reported). The progress
    bar of the values is added to `bars` while it shows."""
    try:
        m = _open(spec)
        count = len(m)
    except ValidationError as error:
        report(f"{spec} cannot be opened: {error}")
        return ""
    try:
        m.validate()
        index_sound = True
    except ValidationError as error:
        report(str(error))
        index_sound = False
    if not isinstance(m, MapBuffer):
        return f"verify: OK, {count} keys in {spec} (IntMap, index checked)"
    with progress(count if progress_shown() else None, "verify", unit=" keys") as bar:
        bars.append(bar)
        _check_values(m, index_sound, report, bar)
        bars.remove(bar)
    return f"verify: OK, {count} keys in {spec} (MapBuffer, every value checked)"


def verify(args: argparse.Namespace) -> int:
    """Checks a map's header, index and every value; prints each problem;
    exit status 1 if there is any."""
    problems: list[str] = []
    bars: list[Any] = []

    report = reporter(problems, args.fail_fast, bars)

    try:
        ok_line = _check_map(args.spec, report, bars)
    except FailFast:
        return verdict(problems, args.spec, "", stopped=True)
    return verdict(problems, args.spec, ok_line)


def get(args: argparse.Namespace) -> int:
    """Prints the value of one key (INDEX is the key)."""
    if args.decode not in ("auto", "raw"):
        raise BadArgument(f"--decode {args.decode} is for bags of rows; a map holds raw values")
    m = _open(args.spec)
    key = args.index
    value = m.get(key)
    if value is None:
        raise BadArgument(f"{args.spec}: key {key} not found")
    if isinstance(m, IntMap) and args.format in ("text", "json"):
        out = b"%d\n" % value  # a number is its own text and JSON
    else:
        if isinstance(m, IntMap):
            value = value.to_bytes(8, "little")
        out = FORMATTERS[args.format](value)
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "info": info, "verify": verify, "get": get,
}
