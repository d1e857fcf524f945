"""The peers' virtualenvs for remote_peers.py and loader_peers.py, and what
they can reach.

Each peer lives in a virtualenv of its own under a cache folder, made once
from PyPI with pinned versions and reused while its requirements and
interpreter stay the same (`installed.json` records both):

  * "bagz": Google's bagz 0.3.8 with its native GCS plugin bagz-gcs 0.3.8
    (C++, google-cloud-cpp, which honours CLOUD_STORAGE_EMULATOR_ENDPOINT);
  * "upstream": upstream Säckli 0.3.4 (PyPI `sackli`, a module also named
    `sackli`, hence a virtualenv of its own), which needs Python 3.12-3.14
    and imports numpy;
  * loader_peers.py's loaders: "arrayrecord" (array-record), "tfrecord"
    (tensorflow-cpu, for tf.data), "webdataset" (with the AWS CLI, for its
    `pipe:aws s3 cp` bucket URLs) and "mosaicml" (mosaicml-streaming, with
    PyPI's torch and torchvision: `import streaming` needs torchvision).

A peer that cannot be installed gives a `reason` instead of a Python, and
the benchmark prints that reason in the peer's rows.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys

_NUMPY = "numpy==2.4.6"  # requirements/dev.lock's pin for Python 3.11+


@dataclasses.dataclass(frozen=True)
class Peer:
    """A peer implementation: its requirements and the Pythons it runs on."""

    name: str
    module: str
    requirements: tuple[str, ...]
    python_min: tuple[int, int]
    python_below: tuple[int, int]


PEERS = {
    "bagz": Peer("bagz", "bagz", ("bagz==0.3.8", "bagz-gcs==0.3.8"), (3, 10), (3, 15)),
    "upstream": Peer("upstream", "sackli", ("sackli==0.3.4", _NUMPY), (3, 12), (3, 15)),
    # The loaders of loader_peers.py, each with the module its worker imports.
    "arrayrecord": Peer("arrayrecord", "array_record", ("array-record==0.8.6",), (3, 10), (3, 14)),
    "tfrecord": Peer("tfrecord", "tensorflow", ("tensorflow-cpu==2.21.0",), (3, 10), (3, 14)),
    "webdataset": Peer("webdataset", "webdataset", ("webdataset==1.0.2", "awscli==1.46.3", _NUMPY), (3, 10), (3, 15)),
    # `import streaming` imports torchvision, whose PyPI wheels need PyPI's
    # (CUDA) torch: `===` keeps pip off a local `2.13.0+cpu` build.
    "mosaicml": Peer("mosaicml", "streaming", ("mosaicml-streaming==0.13.0", "torch===2.13.0",
                                               "torchvision==0.28.0", "numpy==2.1.3"), (3, 10), (3, 14)),
}


@dataclasses.dataclass
class PeerEnv:
    """A peer's virtualenv: its interpreter, or why there is none."""

    peer: Peer
    python: str | None = None
    python_version: str = ""
    reason: str = ""


def default_root() -> pathlib.Path:
    """~/.cache/sackli/bench-peers (or under $XDG_CACHE_HOME): outside any
    work tree, so every checkout reuses the same virtualenvs."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "sackli" / "bench-peers"


def _version_of(python: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:3])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        major, minor, micro = (int(part) for part in out.stdout.split())
    except ValueError:
        return None
    return major, minor, micro


def find_python(peer: Peer, given: str | None = None) -> tuple[str | None, str]:
    """An interpreter the peer supports: `given`, else this one, else a
    `python3.N` on PATH or under pyenv; (path, version) or (None, why)."""
    wanted = f"Python >= {peer.python_min[0]}.{peer.python_min[1]}, < {peer.python_below[0]}.{peer.python_below[1]}"
    if given:
        candidates = [given]
    else:
        candidates = [sys.executable]
        for minor in range(peer.python_below[1] - 1, peer.python_min[1] - 1, -1):
            name = f"python{peer.python_min[0]}.{minor}"
            found = shutil.which(name)
            candidates += [found] if found else []
            candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3")),
                                 reverse=True)
            candidates += [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        version = _version_of(candidate)
        if version and peer.python_min <= version[:2] < peer.python_below:
            return candidate, ".".join(map(str, version))
    return None, f"needs {wanted}; none found (give one with --{peer.name}-python)"


def _pip_failure(output: str) -> str:
    """pip's last ERROR lines (or its last line) of `output`."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return " ".join(errors[-2:] or lines[-1:])[:300] or "no output"


def ensure(peer: Peer, root: pathlib.Path, python: str | None = None, log=print) -> PeerEnv:
    """The peer's virtualenv under `root`, made (or remade) if its pins or
    interpreter changed; a PeerEnv with `reason` set if that fails."""
    interpreter, version = find_python(peer, python)
    if interpreter is None:
        return PeerEnv(peer, reason=version)
    folder = root / peer.name
    marker = folder / "installed.json"
    wanted = {"requirements": list(peer.requirements), "base_python": interpreter, "python": version}
    venv_python = folder / "bin" / "python"
    try:
        if marker.exists() and json.loads(marker.read_text()) == wanted and venv_python.exists():
            return PeerEnv(peer, str(venv_python), version)
    except (OSError, ValueError):
        pass
    log(f"# making the {peer.name} virtualenv in {folder} (Python {version}): "
        f"pip install {' '.join(peer.requirements)}")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([interpreter, "-m", "venv", str(folder)], capture_output=True, text=True)
    if made.returncode != 0:
        return PeerEnv(peer, reason=f"python -m venv failed: {(made.stderr or made.stdout).strip()[-300:]}")
    installed = subprocess.run(
        [str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         *peer.requirements], capture_output=True, text=True)
    if installed.returncode != 0:
        return PeerEnv(peer, reason=f"pip install {' '.join(peer.requirements)} failed: "
                                    f"{_pip_failure(installed.stderr + installed.stdout)}")
    marker.write_text(json.dumps(wanted, indent=1))
    return PeerEnv(peer, str(venv_python), version)


# --- Upstream Säckli's S3 client and a local server ---------------------------

UPSTREAM_S3_IGNORES_ENDPOINT = (
    "cannot reach a local S3 server: sackli 0.3.4 builds its S3 client (AWS SDK for C++) with the "
    "default client configuration, which in its wheel reads no endpoint override (AWS_ENDPOINT_URL, "
    "AWS_ENDPOINT_URL_S3, endpoint_url in AWS_CONFIG_FILE) and offers no path-style switch, so it "
    "always addresses an amazonaws.com host over HTTPS")

_PROBE = """
import sackli
try:
    sackli.Reader("s3://sackli-bench-probe/probe.bag")
except Exception as error:
    print(type(error).__name__, error)
else:
    print("opened")
"""


def start_upstream_s3_probe(python: str) -> subprocess.Popen | None:
    """Starts asking upstream Säckli to open an S3 object with AWS_ENDPOINT_URL
    at a closed port of 127.0.0.1, inside an empty network namespace
    (`unshare -n`: nothing can leave the machine, not even a DNS query).
    A client that honours the endpoint fails to connect (curl error 7); one
    that ignores it fails to look up an AWS host name (curl error 6). None
    when no network namespace can be made here (then nothing is tried)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    try:
        if subprocess.run([unshare, "-n", "true"], capture_output=True, timeout=30).returncode != 0:
            return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="bench",
               AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1",
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               AWS_EC2_METADATA_DISABLED="true")
    return subprocess.Popen([unshare, "-n", "--", python, "-P", "-c", _PROBE], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def upstream_s3_verdict(probe: subprocess.Popen | None, timeout: float = 120) -> tuple[bool, str]:
    """(True, "") if the probe shows upstream Säckli honours AWS_ENDPOINT_URL,
    else (False, why it cannot be benchmarked on moto)."""
    if probe is None:
        return False, (UPSTREAM_S3_IGNORES_ENDPOINT + " (not probed on this machine: no `unshare -n` to "
                       "probe without sending queries off it)")
    try:
        out, _ = probe.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        probe.kill()
        out, _ = probe.communicate()
        return False, UPSTREAM_S3_IGNORES_ENDPOINT + f" (probe gave no answer in {timeout:.0f} s)"
    if "curlCode: 7" in out:  # it went for 127.0.0.1:9: the endpoint is honoured
        return True, ""
    seen = " ".join(out.split())[-160:]
    return False, (UPSTREAM_S3_IGNORES_ENDPOINT + "; probed in an empty network namespace with "
                   f"AWS_ENDPOINT_URL=http://127.0.0.1:9 it answered: {seen}")
