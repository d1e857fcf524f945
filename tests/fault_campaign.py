"""A seeded fault campaign against sackli's remote storage (s3:// and gs://).

Starts moto's S3 server and gcp-storage-emulator, each behind a `FaultProxy`
(tests/remote_servers.py), points sackli at the proxies, and runs a seeded
sequence of operations (bag writes with TAIL and SEPARATE limits, some
large enough for multipart / resumable uploads, shard sets, Arrow tables,
and reads of all of them) while the proxies inject faults at a given rate
per request: error answers (503, 500, 429), dropped connections, bodies cut
halfway, responses lost after the server acted, stalls longer than an
attempt's timeout, requests sent twice, ranged reads answered with another
range, and responses sent twice on a keep-alive connection.

After each operation, with faults off, it checks what the operation left:

* wrong records: a read returned records other than those written, or an
  operation raised something other than a clean error (OSError,
  ValueError incl. sackli.CorruptionError, IndexError);
* hangs: an operation took longer than twice SACKLI_REMOTE_DEADLINE;
* partial objects/sets (after `sackli.recover` of a set or table whose
  write raised, which rolls a decided publish forward and any other back):
  an object named `.sackli-partial` or
  `sackli-spool` remains (or a local spool file); a write that raised left
  a target that reads as anything but its old content (or as an error); a
  write that returned left a target that does not read as its new content;
* stray multipart uploads (S3): unfinished multipart uploads remain.

Usage:
    python tests/fault_campaign.py --seed 1 --rates 0.01 0.05 0.2 --ops 200 --stores s3 gs

Each (store, rate) pair is a campaign of its own, in a folder of its own,
with operations drawn from (seed, store, rate, op number) alone: to
reproduce a violation at op #k, run that store and rate with --ops k+1
(the printed command). The proxy's fault choices are seeded per operation
(`reset_faults`); which request meets which fault still depends on thread
scheduling where sackli sends requests in parallel.

The test tests/storage/test_fault_campaign.py runs a short campaign through
`run_campaign`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import random
import re
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from typing import Any, Callable

_ROOT = pathlib.Path(__file__).resolve().parent.parent
if __name__ == "__main__" and str(_ROOT) not in sys.path:
    # Run as a script: sackli from this checkout, not an installed copy.
    sys.path.insert(0, str(_ROOT))

import sackli  # noqa: E402
import sackli.arrow  # noqa: E402,F401
from sackli import _storage  # noqa: E402


# Beside this file: on sys.path when run as a script; under pytest, loaded
# through conftest.py.
import remote_servers  # noqa: E402

__all__ = ["CATEGORIES", "Report", "Row", "Violation", "run_campaign", "main"]

BUCKET = "sackli-campaign"
STORES = ("s3", "gs")
CLEAN = (OSError, ValueError, IndexError)  # ValueError includes sackli.CorruptionError
CATEGORIES = ("wrong records", "hangs", "partial objects/sets", "stray multipart uploads")
PARTIAL_MARKS = (".sackli-partial", "sackli-spool")
LARGE_RECORD = 256 * 1024
LARGE_RECORDS = 36  # 9 MiB: over the 8 MiB part of a multipart / resumable upload
TAIL = sackli.LimitsPlacement.TAIL
SEPARATE = sackli.LimitsPlacement.SEPARATE


# --- Results -------------------------------------------------------------------------


@dataclasses.dataclass
class Violation:
    store: str
    rate: float
    seed: int
    op: int
    operation: str
    category: str
    detail: str
    faults: list[tuple[str, str, str]]
    elapsed: float
    deadline: float

    def command(self) -> str:
        return (f"python tests/fault_campaign.py --seed {self.seed} --rates {self.rate} "
                f"--ops {self.op + 1} --stores {self.store} --deadline {self.deadline:g}")

    def signature(self) -> str:
        """The detail without names, numbers and quoted values."""
        gist = self.detail.split("\n")[0]
        gist = re.sub(r"\S+://\S+|'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\d+(\.\d+)?", "#", gist)
        gist = re.sub(r"#(, #)+", "#", gist)
        return re.sub(r"\s+", " ", gist)[:150]

    def describe(self) -> str:
        faults = ", ".join(f"{fault} {method} {_short(target)}" for fault, method, target
                           in self.faults[:12])
        if len(self.faults) > 12:
            faults += f", ... ({len(self.faults)} in all)"
        return (f"[{self.store} rate={self.rate} seed={self.seed} op #{self.op}] {self.category}: "
                f"{self.operation} ({self.elapsed:.1f} s)\n"
                f"    {self.detail}\n"
                f"    faults: {faults or 'none'}\n"
                f"    reproduce: {self.command()}")


@dataclasses.dataclass
class Row:
    """The tally of one (store, rate) campaign."""

    store: str
    rate: float
    operations: int = 0
    faults: int = 0
    clean_errors: int = 0
    old_lost: int = 0  # failed writes over a bag/set that left it unreadable (allowed)
    seconds: float = 0.0
    violations: dict[str, int] = dataclasses.field(
        default_factory=lambda: {category: 0 for category in CATEGORIES})
    fault_kinds: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Report:
    seed: int
    deadline: float
    rows: list[Row] = dataclasses.field(default_factory=list)
    violations: list[Violation] = dataclasses.field(default_factory=list)

    def violation_counts(self) -> dict[str, int]:
        return {category: sum(row.violations[category] for row in self.rows)
                for category in CATEGORIES}

    @property
    def faults(self) -> int:
        return sum(row.faults for row in self.rows)

    @property
    def operations(self) -> int:
        return sum(row.operations for row in self.rows)

    def ok(self) -> bool:
        return not any(self.violation_counts().values())

    def table(self) -> str:
        header = ["store", "rate", "ops", "faults", "clean err", "old lost", "wrong rec",
                  "hangs", "partial", "stray mpu", "seconds"]
        lines = [header]
        for row in self.rows:
            lines.append([row.store, f"{row.rate:g}", str(row.operations), str(row.faults),
                          str(row.clean_errors), str(row.old_lost),
                          *(str(row.violations[c]) for c in CATEGORIES), f"{row.seconds:.0f}"])
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        text = ["  ".join(cell.rjust(width) for cell, width in zip(line, widths)) for line in lines]
        return "\n".join(text)

    def text(self) -> str:
        parts = [f"fault campaign: seed {self.seed}, deadline {self.deadline:g} s, "
                 f"sackli from {os.path.dirname(sackli.__file__)}", self.table()]
        for row in self.rows:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(row.fault_kinds.items()))
            parts.append(f"  faults {row.store} rate={row.rate:g}: {kinds or 'none'}")
        if self.violations:
            parts.append(f"\n{len(self.violations)} violation(s):")
            parts.extend(violation.describe() for violation in self.violations)
            parts.append("\nviolations by kind (first occurrence):")
            for (category, signature), found in self.kinds().items():
                first = found[0]
                parts.append(f"  {len(found):3d} x {category}: {signature}\n"
                             f"        first: {first.store} rate={first.rate} op #{first.op}: "
                             f"{first.command()}")
        else:
            parts.append("\nno violations")
        return "\n".join(parts)

    def kinds(self) -> dict[tuple[str, str], list[Violation]]:
        """The violations grouped by category and the gist of their detail."""
        groups: dict[tuple[str, str], list[Violation]] = {}
        for violation in self.violations:
            groups.setdefault((violation.category, violation.signature()), []).append(violation)
        return groups


def _short(target: str, limit: int = 110) -> str:
    target = urllib.parse.unquote(target)
    return target if len(target) <= limit else target[:limit] + "..."


# --- Direct access to the servers (not through the proxies) ------------------------------


class _RawS3:
    def __init__(self, endpoint: str) -> None:
        import boto3

        self.client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing")
        self.client.create_bucket(Bucket=BUCKET)

    def objects(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=BUCKET, Key=key)

    def multipart_uploads(self, prefix: str) -> list[tuple[str, str]]:
        answer = self.client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
        return [(upload["Key"], upload["UploadId"]) for upload in answer.get("Uploads", [])]

    def abort(self, key: str, upload_id: str) -> None:
        self.client.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)


class _RawGcs:
    """The GCS JSON API of the emulator with http.client: listing, deleting."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = urllib.parse.urlsplit(endpoint)

    def _request(self, method: str, target: str) -> tuple[int, bytes]:
        import http.client

        connection = http.client.HTTPConnection(self.endpoint.hostname, self.endpoint.port,
                                                timeout=30)
        try:
            connection.request(method, target)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def objects(self, prefix: str) -> list[str]:
        names, token = [], None
        while True:
            query = {"prefix": prefix, **({"pageToken": token} if token else {})}
            status, body = self._request(
                "GET", f"/storage/v1/b/{BUCKET}/o?{urllib.parse.urlencode(query)}")
            if status != 200:
                raise OSError(f"listing gs://{BUCKET}/{prefix}: HTTP {status}: {body[:200]!r}")
            answer = json.loads(body or b"{}")
            names += [item["name"] for item in answer.get("items", [])]
            token = answer.get("nextPageToken")
            if not token:
                return names

    def delete(self, key: str) -> None:
        self._request("DELETE", f"/storage/v1/b/{BUCKET}/o/{urllib.parse.quote(key, safe='')}")

    def multipart_uploads(self, prefix: str) -> list[tuple[str, str]]:
        return []  # an unfinished resumable upload is no object: nothing to find or pay for

    def abort(self, key: str, upload_id: str) -> None:
        pass


class _Store:
    """One back-end: server, proxy, direct access."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proxy = remote_servers.FaultProxy(name)
        if name == "s3":
            self.server = remote_servers.MotoServer()
        else:
            self.server = remote_servers.GcpStorageEmulator(BUCKET)
        self.raw: Any = None

    def start(self) -> None:
        self.proxy.start()
        self.server.start()
        self.proxy.upstream = self.server.url
        self.raw = _RawS3(self.server.url) if self.name == "s3" else _RawGcs(self.server.url)

    def stop(self) -> None:
        self.proxy.stop()
        self.server.close()


# --- What is stored ----------------------------------------------------------------------


@dataclasses.dataclass
class Target:
    """One thing the campaign writes and reads: a bag, a shard set, a table."""

    kind: str  # "bag", "set", "table"
    name: str  # "bag-t0.bag", "set0@3.bag", "auto1@*.bag", "t0@2.bagz"
    placement: Any = TAIL


class _Unknown:
    """The content of a target that could not be read back (after a write
    that failed, as allowed): reads of it are not checked."""

    def __repr__(self) -> str:
        return "<unreadable>"


UNKNOWN = _Unknown()


def _known(content: Any) -> bool:
    return content is not None and content is not UNKNOWN


def _same(kind: str, a: Any, b: Any) -> bool:
    if a is None or b is None or a is UNKNOWN or b is UNKNOWN:
        return a is b
    if kind == "table":
        return a.equals(b)
    return a == b


def _describe_content(kind: str, content: Any) -> str:
    if content is None:
        return "nothing"
    if content is UNKNOWN:
        return "unreadable"
    if kind == "table":
        return f"table {content.num_rows} rows, columns {content.column_names}"
    return f"{len(content)} records, {sum(map(len, content))} bytes"


def _difference(kind: str, got: Any, want: Any) -> str:
    """Where `got` first departs from `want` (records)."""
    if kind == "table" or not isinstance(got, list) or not isinstance(want, list):
        return f"got {_describe_content(kind, got)}, expected {_describe_content(kind, want)}"
    if len(got) != len(want):
        return f"got {len(got)} records, expected {len(want)}"
    for i, (x, y) in enumerate(zip(got, want)):
        if x != y:
            return (f"record {i} differs: got {len(x)} bytes {x[:16]!r}..., expected {len(y)} "
                    f"bytes {y[:16]!r}...")
    return "equal"


# --- The campaign ------------------------------------------------------------------------


# A doubled answer is read by the next request on its connection, whatever
# that asks: only an answer that names its request (a ranged GET's
# Content-Range, an upload's JSON or XML) lets a client see that it is
# stale. A stale copy of an S3 HEAD answer or of a DELETE's 204 cannot be
# told from the real one by any client, so the campaign doubles GET answers
# only: mostly read by the next GET of a reader. (A stale GET answer read by
# a request of another kind, which is rarer, may still go unnoticed: judge
# a violation whose faults include "double" with that in mind.)
DOUBLE_KINDS = ("GET",)


def _fault_rules(proxy, rate: float, stall: float) -> None:
    """Faults at `rate` per request in all, shared evenly by ten kinds."""
    p = rate / 10
    proxy.fail_fraction(p, status=503)
    proxy.fail_fraction(p, status=500)
    proxy.fail_fraction(p, status=429)
    proxy.lose_fraction(p)
    proxy.stall_fraction(p, seconds=stall)
    proxy.drop_fraction(p, "cut")
    proxy.drop_fraction(p, "close")
    proxy.duplicate_fraction(p)
    proxy.shift_fraction(p)
    proxy.double_fraction(p, kinds=DOUBLE_KINDS)


def _records(rng: random.Random, n: int, max_size: int) -> list[bytes]:
    return [b"" if rng.random() < 0.05 else rng.randbytes(rng.randrange(1, max_size))
            for _ in range(n)]


def _table(rng: random.Random):
    import pyarrow as pa

    n = rng.randrange(1, 300)
    columns = {
        "id": pa.array([rng.randrange(-10**12, 10**12) for _ in range(n)], pa.int64()),
        "name": pa.array([None if rng.random() < 0.1 else f"row-{rng.randrange(10**6)}"
                          for _ in range(n)], pa.string()),
        "blob": pa.array([rng.randbytes(rng.randrange(0, 200)) for _ in range(n)], pa.binary()),
        "score": pa.array([rng.random() for _ in range(n)], pa.float64()),
    }
    names = list(columns)
    rng.shuffle(names)  # a different column order from one write to the next
    names = names[:rng.randrange(2, len(names) + 1)]
    return pa.table({name: columns[name] for name in names})


class _Campaign:
    """One (store, rate) campaign."""

    def __init__(self, store: _Store, rate: float, seed: int, deadline: float,
                 spool_dir: str, log: Callable[[str], None] | None) -> None:
        self.store, self.rate, self.seed, self.deadline = store, rate, seed, deadline
        self.spool_dir = spool_dir
        self.log = log
        self.folder = f"c{seed}-{store.name}-{rate:g}/"
        self.row = Row(store.name, rate)
        self.violations: list[Violation] = []
        self.content: dict[str, Any] = {}  # target name -> records / table / UNKNOWN
        self.targets = (
            [Target("bag", f"bag-t{i}.bag", TAIL) for i in range(3)]
            + [Target("bag", f"bag-s{i}.bag", SEPARATE) for i in range(2)]
            + [Target("set", "set0@3.bag"), Target("set", "set1@3.bag"),
               Target("set", "auto0@*.bag"), Target("set", "auto1@*.bag")]
            + [Target("table", "t0@2.bagz"), Target("table", "t1@2.bagz")])
        self.tainted: set[str] = set()  # targets of operations that never ended
        # Each attempt may wait a quarter of the deadline (sackli/_storage/_retry.py):
        # a stall twice that is always timed out.
        self.stall = 2 * max(0.5, deadline / 4)

    def url(self, name: str) -> str:
        return f"{self.store.name}://{BUCKET}/{self.folder}{name}"

    # --- operations ---

    def _choose(self, rng: random.Random) -> tuple[str, Target]:
        weights = {"write": 5, "read": 5}
        action = rng.choices(list(weights), list(weights.values()))[0]
        kind = rng.choices(["bag", "set", "table"], [5, 3, 2])[0]
        candidates = [t for t in self.targets if t.kind == kind and t.name not in self.tainted]
        if action == "read":
            readable = [t for t in candidates if _known(self.content.get(t.name))]
            if readable:
                return "read", rng.choice(readable)
            action = "write"
        return action, rng.choice(candidates)

    def _write_op(self, rng: random.Random, target: Target) -> tuple[str, Callable[[], Any], Any]:
        url = self.url(target.name)
        parallelism = rng.choice([1, 4])
        if target.kind == "table":
            table = _table(rng)
            return (f"write_table {target.name} ({table.num_rows} rows, {table.column_names})",
                    lambda: sackli.arrow.write_table(table, url), table)
        if target.kind == "bag":
            large = rng.random() < 0.12
            if large:
                records = [rng.randbytes(LARGE_RECORD) for _ in range(LARGE_RECORDS)]
            else:
                records = _records(rng, rng.randrange(0, 300), rng.choice([100, 2000, 20000]))
            placement = target.placement
            one_by_one = rng.random() < 0.5

            def write_bag():
                with sackli.Writer(url, limits_placement=placement,
                                   max_parallelism=parallelism) as writer:
                    if not one_by_one:
                        writer.write_many(records)
                    else:
                        for record in records:
                            writer.write(record)

            size = sum(map(len, records))
            return (f"Writer {target.name} {placement.name} ({len(records)} records, {size} bytes"
                    f"{', multipart' if large else ''}, max_parallelism={parallelism})",
                    write_bag, records)
        records = _records(rng, rng.randrange(1, 250), rng.choice([100, 1500]))
        options: dict[str, Any] = {}
        if "@*" in target.name:
            total = sum(map(len, records)) + 16 * len(records)
            options["max_shard_bytes"] = max(1024, total // rng.choice([2, 3, 4]))
        elif rng.random() < 0.5:
            options["num_records"] = len(records)

        def write_set():
            with sackli.ShardedWriter(url, max_parallelism=parallelism, **options) as writer:
                writer.write_many(records)
            return writer.paths

        return (f"ShardedWriter {target.name} ({len(records)} records, {options})",
                write_set, records)

    def _read_op(self, rng: random.Random, target: Target) -> tuple[str, Callable[[], Any], Any]:
        url = self.url(target.name)
        expected = self.content[target.name]
        if target.kind == "table":
            return f"read_table {target.name}", lambda: sackli.arrow.read_table(url), expected
        options: dict[str, Any] = {"max_parallelism": rng.choice([1, 4])}
        if target.kind == "bag" and target.placement == SEPARATE:
            options["limits_placement"] = SEPARATE
        mode = rng.choice(["single", "batch", "iterate", "read"])
        n = len(expected)
        indices = [rng.randrange(n) for _ in range(rng.randrange(1, 40))] if n else []
        if mode in ("single", "batch") and not indices:
            mode = "read"
        indices = indices[:25] if mode == "single" else indices

        def read():
            with sackli.Reader(url, **options) as reader:
                if mode == "single":
                    return [reader[i] for i in indices]
                if mode == "batch":
                    return reader.read_indices(indices)
                if mode == "iterate":
                    return list(reader)
                return reader.read()

        want = [expected[i] for i in indices] if mode in ("single", "batch") else expected
        what = f"Reader {target.name} {mode}"
        if mode in ("single", "batch"):
            what += f" ({len(indices)} indices)"
        return what + f" {options}", read, want

    def read_back(self, target: Target) -> Any:
        """The target's content, read with faults off."""
        url = self.url(target.name)
        if target.kind == "table":
            return sackli.arrow.read_table(url)
        options = {"limits_placement": SEPARATE} if target.placement == SEPARATE else {}
        with sackli.Reader(url, **options) as reader:
            return reader.read()

    # --- one step ---

    def _run(self, call: Callable[[], Any]) -> tuple[str, Any, float, str]:
        """Runs `call` on a thread of its own: ("ok", value) or ("error",
        exception) or ("stuck", stack), and the seconds it took."""
        outcome: dict[str, Any] = {}

        def body():
            try:
                outcome["value"] = call()
            except BaseException as error:  # noqa: BLE001 - classified below
                outcome["error"] = error

        thread = threading.Thread(target=body, daemon=True, name="campaign-op")
        start = time.monotonic()
        thread.start()
        thread.join(max(4 * self.deadline, 60.0))
        elapsed = time.monotonic() - start
        if thread.is_alive():
            frame = sys._current_frames().get(thread.ident)
            stack = "".join(traceback.format_stack(frame)) if frame else "?"
            return "stuck", None, elapsed, stack
        if "error" in outcome:
            return "error", outcome["error"], elapsed, ""
        return "ok", outcome.get("value"), elapsed, ""

    def step(self, k: int) -> None:
        rng = random.Random(f"{self.seed}/{self.store.name}/{self.rate!r}/{k}")
        action, target = self._choose(rng)
        if action == "write":
            what, call, new = self._write_op(rng, target)
            if "@*" in target.name:
                # A `name@*` write beside a set of another shard count is
                # refused (FileExistsError) without overwrite=True, whose
                # removal of the old set is not this campaign's subject.
                # Each such write starts from no set.
                self._delete_sets(target)
            old = self.content.get(target.name)
        else:
            what, call, want = self._read_op(rng, target)
        proxy = self.store.proxy
        proxy.reset_faults(rng.randrange(2**32))
        random.seed(rng.randrange(2**32))  # sackli's retry jitter
        _fault_rules(proxy, self.rate, self.stall)
        status, value, elapsed, stack = self._run(call)
        faults = list(proxy.fault_log)
        proxy.reset_faults()
        proxy.end_stalls()
        self._settle()
        self.row.operations += 1
        self.row.faults += len(faults)
        for fault, _, _ in faults:
            self.row.fault_kinds[fault] = self.row.fault_kinds.get(fault, 0) + 1

        def violation(category: str, detail: str) -> None:
            self.row.violations[category] += 1
            self.violations.append(Violation(self.store.name, self.rate, self.seed, k, what,
                                             category, detail, faults, elapsed, self.deadline))

        if status == "stuck":
            violation("hangs", f"did not end within {elapsed:.0f} s (abandoned); stack:\n{stack}")
            self.tainted.add(target.name)
        elif elapsed > 2 * self.deadline:
            violation("hangs", f"took {elapsed:.1f} s, over twice the deadline "
                               f"({self.deadline:g} s); outcome: {_outcome(status, value)}")
        if status == "error":
            if isinstance(value, CLEAN):
                self.row.clean_errors += 1
            else:
                violation("wrong records", f"unclean exception: {_outcome(status, value)}"
                                           f"\n    raised at: {_where(value)}")

        forward = False
        if action == "write" and status == "error" and target.kind != "bag":
            forward = self._recover(target, violation)
        if action == "read":
            if status == "ok" and not _same(target.kind, value, want):
                violation("wrong records", _difference(target.kind, value, want))
        elif status != "stuck":
            self._check_write(target, status, value, old, new, violation, forward)
        self._check_leftovers(violation)
        if self.log is not None:
            self.log(f"{self.store.name} {self.rate:g} #{k}: {what}: {_outcome(status, value)} "
                     f"in {elapsed:.1f} s, faults {[f for f, _, _ in faults]}")

    def _recover(self, target: Target, violation: Callable[[str, str], None]) -> bool:
        """`sackli.recover` of a set or table whose write raised (faults
        off), as its user would run it: whether it rolled the write forward
        (the target must then read as the new content)."""
        try:
            report = sackli.recover(self.url(target.name))
        except FileNotFoundError:
            return False  # close() cleaned up itself: nothing was published
        except CLEAN as error:
            violation("partial objects/sets", f"sackli recover raised {type(error).__name__}: "
                                              f"{error}")
            return False
        return report.rolled_back == 0

    def _check_write(self, target: Target, status: str, value: Any, old: Any, new: Any,
                     violation: Callable[[str, str], None], forward: bool = False) -> None:
        try:
            stored = self.read_back(target)
        except CLEAN as error:
            stored, read_error = UNKNOWN, error
        except BaseException as error:  # noqa: BLE001
            violation("partial objects/sets",
                      f"reading the target back (faults off) raised an unclean "
                      f"{type(error).__name__}: {error}")
            self.content[target.name] = UNKNOWN
            return
        if status == "ok":
            if stored is UNKNOWN and "@*" in target.name and "ambiguous" in str(read_error):
                stored = self._ambiguous_set(target, value, new, read_error, violation)
            elif not _same(target.kind, stored, new):
                detail = (f"read back: {type(read_error).__name__}: {read_error}"
                          if stored is UNKNOWN else _difference(target.kind, stored, new))
                violation("partial objects/sets",
                          f"the write returned, but the target does not read as the new "
                          f"content: {detail}")
            self.content[target.name] = stored
            return
        # The write raised.
        if forward:  # its publish was decided: recover finished it
            if not _same(target.kind, stored, new):
                violation("partial objects/sets", "the write was rolled forward by sackli "
                          f"recover, but the target does not read as the new content: "
                          f"{_describe_content(target.kind, stored)}")
            self.content[target.name] = stored
            return
        if stored is UNKNOWN:
            if _known(old):
                self.row.old_lost += 1
            self.content[target.name] = UNKNOWN if old is not None else None
            return
        if _known(old) and _same(target.kind, stored, old):
            return
        if _same(target.kind, stored, new):
            violation("partial objects/sets",
                      "the write raised, but the target holds the NEW content "
                      f"(old: {_describe_content(target.kind, old)}); error: "
                      f"{_outcome(status, value)}")
        else:
            violation("partial objects/sets",
                      f"the write raised, and the target reads as neither old nor new content: "
                      f"{_describe_content(target.kind, stored)} (old: "
                      f"{_describe_content(target.kind, old)}, new: "
                      f"{_describe_content(target.kind, new)}); error: {_outcome(status, value)}")
        self.content[target.name] = stored

    def _delete_sets(self, target: Target) -> None:
        """Deletes every set of `target`'s base name (faults off)."""
        base = target.name.split("@")[0]
        pattern = re.compile(
            rf"^(limits\.)?{re.escape(base)}-(\d{{5}}-)?of-(\d{{5}})\.bag(\.sackli_set)?$")
        for key in self.store.raw.objects(self.folder):
            if pattern.match(key[len(self.folder):]):
                self.store.raw.delete(key)
        self.content[target.name] = None

    def _ambiguous_set(self, target: Target, paths: Any, new: Any, error: BaseException,
                       violation: Callable[[str, str], None]) -> Any:
        """A `name@*` set written (the write returned) beside sets of other
        shard counts that it left in place, so that `name@*` is ambiguous:
        a violation; the new set is checked under its own count, and the
        other sets are deleted so that the next operations start clean."""
        base = target.name.split("@")[0]
        count = len(paths) if isinstance(paths, list) else None
        check = "the writer gave no paths"
        stored: Any = UNKNOWN
        if count:
            exact = Target("set", f"{base}@{count}.bag")
            try:
                stored = self.read_back(exact)
                check = ("the new set reads right as " + exact.name if _same("set", stored, new)
                         else f"the new set as {exact.name}: {_difference('set', stored, new)}")
            except CLEAN as exact_error:
                check = f"reading {exact.name}: {type(exact_error).__name__}: {exact_error}"
        pattern = re.compile(
            rf"^(limits\.)?{re.escape(base)}-(\d{{5}}-)?of-(\d{{5}})\.bag(\.sackli_set)?$")
        others = []
        for key in self.store.raw.objects(self.folder):
            match = pattern.match(key[len(self.folder):])
            if match and count is not None and int(match[3]) != count:
                others.append(key[len(self.folder):])
                self.store.raw.delete(key)
        violation("partial objects/sets",
                  f"the write returned, but {target.name} is ambiguous: the sets of other shard "
                  f"counts were left in place ({error}); {check}; deleted: {sorted(others)}")
        return stored if _same("set", stored, new) else UNKNOWN

    def _check_leftovers(self, violation: Callable[[str, str], None]) -> None:
        raw = self.store.raw
        partial = [key for key in raw.objects(self.folder) if any(m in key for m in PARTIAL_MARKS)]
        if partial:
            violation("partial objects/sets",
                      f"{len(partial)} partial object(s) left: {partial[:5]}")
            for key in partial:
                raw.delete(key)
        spools = [name for name in os.listdir(self.spool_dir) if "sackli-spool" in name]
        if spools:
            violation("partial objects/sets", f"local spool file(s) left: {spools[:5]}")
            for name in spools:
                path = os.path.join(self.spool_dir, name)
                try:
                    if os.path.isdir(path):
                        import shutil

                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
                except OSError:
                    pass
        uploads = raw.multipart_uploads(self.folder)
        if uploads:
            violation("stray multipart uploads",
                      f"{len(uploads)} unfinished multipart upload(s): "
                      f"{sorted({key for key, _ in uploads})[:5]}")
            for key, upload_id in uploads:
                raw.abort(key, upload_id)

    def _settle(self) -> None:
        """Waits (a little) for the requests the proxy still handles: what
        the server does is then done before the checks look."""
        end = time.monotonic() + 10
        while self.store.proxy.in_flight() and time.monotonic() < end:
            time.sleep(0.02)


def _where(error: BaseException, depth: int = 3) -> str:
    """The innermost frames of an exception's traceback (and of its causes)."""
    frames = traceback.extract_tb(error.__traceback__)[-3:]
    text = " <- ".join(f"{pathlib.Path(f.filename).name}:{f.lineno} {f.name}"
                       for f in reversed(frames))
    cause = error.__cause__ or error.__context__
    if depth > 1 and cause is not None and cause.__traceback__ is not None:
        text += f"; from {type(cause).__name__}: {str(cause)[:200]} at {_where(cause, depth - 1)}"
    return text


def _outcome(status: str, value: Any) -> str:
    if status == "error":
        text = str(value).replace("\n", " ")
        return f"{type(value).__name__}: {text[:300]}"
    return status


# --- Running -----------------------------------------------------------------------------


_ENV_NAMES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
              "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE", "AWS_SESSION_TOKEN",
              "AWS_SECURITY_TOKEN", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT",
              "SACKLI_REMOTE_DEADLINE", "SACKLI_REMOTE_ATTEMPTS")


def run_campaign(stores=STORES, rates=(0.01, 0.05, 0.2), seed: int = 1, ops: int = 200,
                 deadline: float = 8.0, attempts: int = 6,
                 log: Callable[[str], None] | None = None) -> Report:
    """Runs `ops` operations for each store and rate; the report of what
    happened (see the module's docstring). Restores the environment, the
    temporary folder and sackli's clients afterwards."""
    report = Report(seed, deadline)
    saved = {name: os.environ.get(name) for name in _ENV_NAMES}
    saved_tempdir = tempfile.tempdir
    running: list[_Store] = []
    spool = tempfile.TemporaryDirectory(prefix="campaign-tmp-")
    try:
        for name in stores:
            store = _Store(name)
            running.append(store)
            store.start()
        by_name = {store.name: store for store in running}
        environment = {
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "GOOGLE_CLOUD_PROJECT": "test",
            "SACKLI_REMOTE_DEADLINE": f"{deadline:g}", "SACKLI_REMOTE_ATTEMPTS": str(attempts),
        }
        if "s3" in by_name:
            environment["AWS_ENDPOINT_URL"] = by_name["s3"].proxy.url
        if "gs" in by_name:
            environment["STORAGE_EMULATOR_HOST"] = by_name["gs"].proxy.url
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            os.environ.pop(name, None)
        os.environ.update(environment)
        # Local spool files go here, where the checks look for leftovers.
        tempfile.tempdir = spool.name
        _storage.reset_clients()
        for store in running:
            for rate in rates:
                campaign = _Campaign(store, rate, seed, deadline, spool.name, log)
                start = time.monotonic()
                for k in range(ops):
                    campaign.step(k)
                campaign.row.seconds = time.monotonic() - start
                report.rows.append(campaign.row)
                report.violations.extend(campaign.violations)
    finally:
        for store in running:
            store.proxy.reset_faults()
            store.proxy.end_stalls()
        _storage.reset_clients()
        for store in running:
            store.stop()
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _storage.reset_clients()
        spool.cleanup()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.01, 0.05, 0.2])
    parser.add_argument("--ops", type=int, default=200, help="operations per store and rate")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--deadline", type=float, default=8.0, help="SACKLI_REMOTE_DEADLINE, s")
    parser.add_argument("--attempts", type=int, default=6, help="SACKLI_REMOTE_ATTEMPTS")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every operation")
    args = parser.parse_args(argv)
    log = (lambda line: print(line, flush=True)) if args.verbose else None
    report = run_campaign(args.stores, args.rates, args.seed, args.ops, args.deadline,
                          args.attempts, log=log)
    print(report.text())
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
