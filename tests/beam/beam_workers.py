"""Beam workers that have only the wheel (tests/beam/test_beam_workers.py).

* `worker_wheel()`: the wheel named by $SACKLI_WHEEL; without it the tests
  skip, or fail when $CI is set (CI must run them).
* `make_worker_venv()`: a virtualenv of its own with the wheel and only what
  the workers need (`sackli-bagz[beam,s3]`, `apache-beam[aws]`), every
  version held to requirements/dev.lock.
* `WorkerPool`: Beam's worker pool (`python -m
  apache_beam.runners.worker.worker_pool_main`) run from that virtualenv, in
  a working directory outside the source tree and with an environment that
  names neither the source tree nor the test's interpreter. Pipelines reach
  it with the options `pipeline_args()` gives: the portable runner's
  embedded job server hands each stage to an EXTERNAL environment at the
  pool's address, and the pool starts one process per worker, as the SDK
  container's worker pool does: a boot step (`BOOT`) that fetches the job's
  pipeline options, then `python -m apache_beam.runners.worker.sdk_worker_main`.

Loaded by tests/beam/test_beam_workers.py with importlib (the suite runs with
--import-mode=importlib: tests/ is not on sys.path).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import sysconfig
import time

import pytest


# The servers' module, as remote_helpers loads it (tests/ is not on sys.path).
from remote_helpers import remote_servers  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "dev.lock"

# What the workers install besides the wheel: the Beam transforms (extra
# `beam`), sackli's own S3 back-end (extra `s3`: boto3 and obstore) and Beam's S3 file
# system (`apache-beam[aws]`), which lists `s3://` patterns and uploads shards.
WHEEL_EXTRAS = "beam,s3"
WORKER_REQUIREMENTS = ["apache-beam[aws]"]

# Environment variables the workers must not inherit from the test process:
# they would put the source tree (or the test's environment) on their path,
# or point their clients elsewhere. The pool gets its AWS_* settings anew.
_DROPPED_PREFIXES = ("PYTHON", "AWS_", "SACKLI_", "PIP_PYTHON", "CONDA_", "GOOGLE_",
                     "STORAGE_EMULATOR")
_DROPPED = {"VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "__PYVENV_LAUNCHER__"}

_START_TIMEOUT = 60.0
_INSTALL_TIMEOUT = 180.0  # under the tests' 240 s timeout: pip's own error shows


def worker_wheel() -> pathlib.Path:
    """The wheel $SACKLI_WHEEL names. Unset: skip, or fail when $CI is set."""
    value = os.environ.get("SACKLI_WHEEL", "")
    if not value:
        how = ("build the wheel (bash scripts/wheel.sh, or pip wheel --no-deps -w dist .) and "
               "run SACKLI_WHEEL=dist/sackli_bagz-<version>-<tag>.whl "
               "pytest tests/beam/test_beam_workers.py; scripts/test.sh does both")
        if os.environ.get("CI"):
            pytest.fail(f"SACKLI_WHEEL is not set, and CI must run the Beam worker tests: {how}",
                        pytrace=False)
        pytest.skip(f"SACKLI_WHEEL is not set: {how}")
    wheel = pathlib.Path(value).resolve()
    if not wheel.is_file() or wheel.suffix != ".whl":
        pytest.fail(f"SACKLI_WHEEL={value!r} is not a wheel file", pytrace=False)
    return wheel


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what points at the source tree or
    the test's interpreter (PYTHON*, VIRTUAL_ENV, AWS_*...), without the test
    environment's folders on PATH, plus `extra`."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(_DROPPED_PREFIXES) and name not in _DROPPED}
    # The test's virtualenv's scripts (not a system Python's /usr/bin).
    in_venv = sys.prefix != sys.base_prefix
    ours = {os.path.realpath(sysconfig.get_path("scripts"))} if in_venv else set()
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", os.defpath).split(os.pathsep)
        if p and os.path.realpath(p) not in ours and not inside(p, REPO))
    env.update(extra)
    return env


def inside(path: str | os.PathLike[str], folder: pathlib.Path) -> bool:
    """Whether `path` (symbolic links resolved) is `folder` or under it."""
    try:
        pathlib.Path(os.path.realpath(path)).relative_to(folder)
        return True
    except ValueError:
        return False


@dataclasses.dataclass
class WorkerVenv:
    prefix: pathlib.Path
    python: pathlib.Path
    site_packages: pathlib.Path
    wheel: pathlib.Path
    seconds: float  # how long making it took

    @property
    def bin(self) -> pathlib.Path:
        return self.python.parent


def make_worker_venv(wheel: pathlib.Path, folder: pathlib.Path) -> WorkerVenv:
    """A virtualenv in `folder` with `wheel[beam,s3]` and apache-beam[aws],
    pinned by requirements/dev.lock, through pip's cache.

    Made the fast way (12-15 s on the 2-core test machine, against 35 s for
    `python -m venv` with its own pip and a byte-compiling install): the
    virtualenv gets no pip of its own, this interpreter's pip installs into
    it (`pip --python`, pip >= 22.3), and nothing is byte-compiled at install
    (`--no-compile`: the workers compile only the modules they import).
    Where this interpreter has no such pip, the virtualenv gets its own."""
    start = time.monotonic()
    log = folder.parent / f"{folder.name}-install.log"
    have_pip = _pip_version() >= (22, 3)
    env = clean_env()
    _run([sys.executable, "-m", "venv", *(["--without-pip"] if have_pip else []), str(folder)],
         log, env, 60)
    python = folder / "bin" / "python"
    pip = ([sys.executable, "-m", "pip", "--python", str(python)] if have_pip
           else [str(python), "-m", "pip"])
    _run(pip + ["install", "--disable-pip-version-check", "--no-input", "--no-compile",
                "--constraint", str(LOCK), f"{wheel}[{WHEEL_EXTRAS}]", *WORKER_REQUIREMENTS],
         log, env, _INSTALL_TIMEOUT)
    # Where the platform wheels (sackli's, Beam's) go: platlib, not purelib.
    site_packages = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
        env=env, cwd=folder, capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    return WorkerVenv(folder, python, pathlib.Path(site_packages), wheel, time.monotonic() - start)


def _pip_version() -> tuple[int, ...]:
    """This interpreter's pip version ((0,) without pip)."""
    if importlib.util.find_spec("pip") is None:
        return (0,)
    import pip

    return tuple(int(part) for part in pip.__version__.split(".")[:2] if part.isdigit())


def _run(command: list[str], log: pathlib.Path, env: dict[str, str], timeout: float) -> None:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        try:
            completed = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=env, cwd=log.parent,
                                       timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command[:4]}... took over {timeout:.0f} s:\n{_tail(log)}",
                        pytrace=False)
    if completed.returncode:
        pytest.fail(f"{' '.join(command)} failed with code {completed.returncode}:\n{_tail(log)}",
                    pytrace=False)


def _tail(path: pathlib.Path, size: int = 6000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


# The boot step of Beam's SDK container contract for workers that have
# everything installed already (as in a custom SDK container image): asks the
# runner's provision service for the job's pipeline options, then runs
# `python -m apache_beam.runners.worker.sdk_worker_main` with the settings the
# container's own boot program gives it (WORKER_ID, PIPELINE_OPTIONS, the
# control and logging endpoints). The worker pool runs it for each worker it
# starts (--container_executable), as the SDK container's `boot
# --worker_pool` does with /opt/apache/beam/boot. Without it the pool starts
# a bare SDK harness that never gets the pipeline options: Beam's file
# systems on the workers then lack their settings (--s3_endpoint_url...),
# unlike on any real runner's workers. Staged artifacts are not fetched: the
# job stages none, and these workers install nothing at start.
BOOT = """#!{python}
import argparse, os, sys

import grpc
from apache_beam.portability.api import (
    beam_provision_api_pb2, beam_provision_api_pb2_grpc, endpoints_pb2)
from google.protobuf import json_format, text_format

parser = argparse.ArgumentParser()
for name in ("id", "logging_endpoint", "artifact_endpoint", "provision_endpoint",
             "control_endpoint"):
    parser.add_argument("--" + name, required=True)
parser.add_argument("--semi_persist_dir", default={semi_persist_dir!r})
args, _ = parser.parse_known_args()

with grpc.insecure_channel(args.provision_endpoint) as channel:
    info = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel).GetProvisionInfo(
        beam_provision_api_pb2.GetProvisionInfoRequest(),
        metadata=[("worker_id", args.id)], timeout=60).info


def descriptor(url):
    return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))


env = dict(os.environ, WORKER_ID=args.id,
           PIPELINE_OPTIONS=json_format.MessageToJson(info.pipeline_options),
           SEMI_PERSISTENT_DIRECTORY=args.semi_persist_dir,
           LOGGING_API_SERVICE_DESCRIPTOR=descriptor(args.logging_endpoint),
           CONTROL_API_SERVICE_DESCRIPTOR=descriptor(args.control_endpoint),
           RUNNER_CAPABILITIES=" ".join(info.runner_capabilities))
if info.HasField("status_endpoint"):
    env["STATUS_API_SERVICE_DESCRIPTOR"] = text_format.MessageToString(info.status_endpoint)
os.dup2(2, 1)  # the pool pipes the workers' stdout and never reads it: to its log instead
harness = "apache_beam.runners.worker.sdk_worker_main"
os.execve(sys.executable, [sys.executable, "-m", harness], env)
"""


class _Service:
    """A server subprocess in a session (process group) of its own, its
    output in `log`."""

    what = "server"

    def __init__(self, cwd: pathlib.Path, log: pathlib.Path, env: dict[str, str]) -> None:
        self.cwd, self.log, self.env = cwd, log, env
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"localhost:{self.port}"

    def _popen(self, command: list[str]) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        """Ends the server and whatever it started (its process group:
        SIGTERM, then SIGKILL after 5 s)."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                continue

    def log_tail(self, size: int = 8000) -> str:
        return _tail(self.log, size)


class WorkerPool(_Service):
    """Beam's worker pool from `venv`, on a free port of this machine, with
    its working directory `cwd` and environment `clean_env()` plus `env`
    (the virtualenv first on PATH); its log, and its workers' output, in
    `cwd/pool.log`. Each worker it starts runs `BOOT` (`cwd/boot`), then
    Beam's SDK worker."""

    what = "Beam worker pool"

    def __init__(self, venv: WorkerVenv, cwd: pathlib.Path, env: dict[str, str]) -> None:
        env = clean_env(**env)
        env["PATH"] = os.pathsep.join([str(venv.bin), env["PATH"]])
        super().__init__(cwd, cwd / "pool.log", env)
        self.venv = venv
        self.boot = cwd / "boot"
        (cwd / "semi_persist").mkdir(exist_ok=True)
        self.boot.write_text(
            BOOT.format(python=venv.python, semi_persist_dir=str(cwd / "semi_persist")))
        self.boot.chmod(0o755)

    def start(self) -> None:
        error: Exception | None = None
        for _ in range(3):  # a free port may be taken before the pool binds it
            self.port = remote_servers.free_port()
            self._popen([str(self.venv.python),
                         "-m", "apache_beam.runners.worker.worker_pool_main",
                         f"--service_port={self.port}", f"--container_executable={self.boot}"])
            try:
                remote_servers.wait_for_port(
                    self.port, self.process, _START_TIMEOUT, self.what, self.log)
                return
            except RuntimeError as e:
                error = e
                exited = self.process.poll() is not None
                self.stop()
                if not exited:
                    break
        raise RuntimeError(f"could not start the {self.what}: {error}")

    def workers_started(self) -> int:
        """How many worker processes the pool has started so far."""
        return self.log_tail(10 ** 8).count("Starting worker with command")


class JobServer(_Service):
    """Beam's local job server (`python -m
    apache_beam.runners.portability.local_job_service_main`, the portable
    runner's job service with the FnApiRunner, what `--job_endpoint=embed`
    runs inside the launching process) in a process of its own, from this
    interpreter; its log in `cwd/job_server.log`.

    Why not `embed`: a job whose workers never connect (a worker that cannot
    start) waits for them forever in a non-daemon thread of the job server.
    Inside pytest that thread would keep the interpreter from exiting after
    the test's timeout; in a process of its own it ends with `stop()`."""

    what = "Beam job server"

    def __init__(self, cwd: pathlib.Path) -> None:
        super().__init__(cwd, cwd / "job_server.log", clean_env())
        self.port_file = cwd / "job_server.port"

    def start(self) -> None:
        self.port_file.unlink(missing_ok=True)
        self._popen([sys.executable,
                     "-m", "apache_beam.runners.portability.local_job_service_main",
                     "--port=0", f"--port_file={self.port_file}",
                     f"--staging_dir={self.cwd / 'staging'}"])
        deadline = time.monotonic() + _START_TIMEOUT
        while not self.port_file.exists():  # written once it listens
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"could not start the {self.what}:\n{self.log_tail()}")
            time.sleep(0.05)
        self.port = int(self.port_file.read_text())


@dataclasses.dataclass
class Workers:
    """The worker pool and the job server that hands it the jobs."""

    pool: WorkerPool
    job_server: JobServer

    @property
    def venv(self) -> WorkerVenv:
        return self.pool.venv

    def pipeline_args(self) -> list[str]:
        """Options that run a pipeline on the pool's workers: the portable
        runner, this job server, the pool as the EXTERNAL environment."""
        return ["--runner=PortableRunner", f"--job_endpoint={self.job_server.address}",
                "--environment_type=EXTERNAL", f"--environment_config={self.pool.address}"]

    def logs(self) -> str:
        return (f"--- the worker pool's log (end) ---\n{self.pool.log_tail()}\n"
                f"--- the job server's log (end) ---\n{self.job_server.log_tail(4000)}")
