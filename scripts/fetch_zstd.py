"""Prepares a pinned zstd release for sackli to compile in; prints its folder.

sackli builds against the system's libzstd unless CMake gets
`-DSACKLI_ZSTD_SOURCE=<folder>` (see CMakeLists.txt); scripts/install.sh
passes the folder this script prints. The source is zstd's own single-file
amalgamation (zstd.c, zstd.h, ...) as published inside the `zstandard`
sdist on PyPI, the one package index this project's machines reach. The
archive is fetched through the simple index and checked against a pinned
SHA-256; nothing of it is executed. Exits non-zero, printing the reason to
stderr and nothing to stdout, when it cannot.

    python scripts/fetch_zstd.py            # -> build/deps/zstd-1.5.7
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import shutil
import sys
import tarfile
import urllib.request

SDIST = "zstandard-0.25.0.tar.gz"  # bundles zstd 1.5.7
SHA256 = "7713e1179d162cf5c7906da876ec2ccb9c3a9dcbdffef0cc7f70c3667a205f0b"
ZSTD_VERSION = "1.5.7"
FILES = ("zstd.c", "zstd.h", "zdict.h", "zstd_errors.h", "LICENSE", "COPYING")
ROOT = pathlib.Path(__file__).resolve().parent.parent
DEST = ROOT / "build" / "deps" / f"zstd-{ZSTD_VERSION}"


def _sdist_url(index: str) -> str:
    """The download URL of SDIST, from a PEP 691 (JSON) simple index."""
    request = urllib.request.Request(
        f"{index.rstrip('/')}/zstandard/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        listing = json.load(response)
    for entry in listing["files"]:
        if entry["filename"] == SDIST:
            return entry["url"]
    raise LookupError(f"{SDIST} is not listed at {index}")


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as response:
        data = response.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise ValueError(f"{url}: SHA-256 {digest}, expected {SHA256}")
    return data


def main() -> int:
    if not (DEST / "zstd.c").is_file():
        index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple")
        try:
            archive = _download(_sdist_url(index))
        except (OSError, LookupError, ValueError, KeyError) as error:
            print(f"fetch_zstd: cannot fetch {SDIST}: {error}", file=sys.stderr)
            return 1
        partial = DEST.with_name(DEST.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for name in FILES:
                member = tar.extractfile(f"{SDIST[:-len('.tar.gz')]}/zstd/{name}")
                if member is None:
                    print(f"fetch_zstd: {SDIST} lacks zstd/{name}", file=sys.stderr)
                    return 1
                (partial / name).write_bytes(member.read())
        shutil.rmtree(DEST, ignore_errors=True)
        partial.rename(DEST)
    print(DEST)
    return 0


if __name__ == "__main__":
    sys.exit(main())
