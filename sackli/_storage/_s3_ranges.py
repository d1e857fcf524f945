"""Ranged GETs of `s3://` objects through obstore (Rust's `object_store`).

The request work (signing, HTTP, TLS, reading the body) runs in Rust without
the GIL, so the engine's threads overlap their requests and a batch goes out
concurrently. Python keeps what belongs to it: boto3 resolves the
configuration (endpoint, region, credentials: `S3Settings`, the
environment, `AWS_PROFILE`, ~/.aws), `_retry` retries with the one bound of
every back-end (obstore's own retries are off), and every answer is checked
as the boto3 path checks it (the range, the ETag, the length).

`ranges_for` returns None where obstore is not installed, a setting means
something obstore cannot do (`unsupported_reason`), or the process is a
child forked after obstore ran in its parent (obstore's runtime does not
survive a fork); the store then reads through boto3, as before. `SACKLI_S3_CLIENT=boto3` asks for boto3 always.
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import threading
from typing import Any, Callable
from urllib.parse import urlsplit

from ._executor import DEFAULT_PARALLELISM
from ._retry import Transient, request_timeout, with_retries
from ._store import (ObjectStat, ObjectTail, changed_error, check_content_range,
                     check_identity, read_each, tail_size)
from ._urls import RemotePath

__all__ = ["S3Ranges", "ranges_for", "unsupported_reason"]

# How often obstore asks again for refreshable credentials (botocore
# refreshes them itself, ahead of their expiry).
_CREDENTIALS_RECHECK = datetime.timedelta(seconds=60)
_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>([^<]+)</Code>")
# The attributes of a GET that are not the object's user metadata.
_STANDARD_ATTRIBUTES = frozenset({"Content-Disposition", "Content-Encoding", "Content-Language",
                                  "Content-Type", "Cache-Control"})
# The process whose obstore runtime this is. obstore's runtime does not
# survive a fork: in a child its calls never return. So a child forked
# after obstore ran reads through boto3; one forked before runs its own.
_runtime_pid: int | None = None
_runtime_lock = threading.Lock()


def _claim_runtime() -> bool:
    """Whether obstore may run in this process (and from now on, only here)."""
    global _runtime_pid
    with _runtime_lock:
        if _runtime_pid is None:
            _runtime_pid = os.getpid()
        return _runtime_pid == os.getpid()


def _import_obstore() -> Any:
    """obstore, or None when it is not installed."""
    try:
        import obstore
        import obstore.store
    except ImportError:
        return None
    return obstore


def unsupported_reason(client: Any) -> str | None:
    """Why the boto3 `client` must read itself, or None when obstore can do
    what it would: the same endpoint and addressing."""
    if os.environ.get("SACKLI_S3_CLIENT", "").lower() == "boto3":
        return "SACKLI_S3_CLIENT=boto3"
    if _import_obstore() is None:
        return "obstore is not installed"
    config = client.meta.config
    s3 = dict(config.s3 or {})
    for option in ("use_accelerate_endpoint", "use_dualstack_endpoint"):
        if s3.get(option):
            return f"boto3's s3.{option}"
    if getattr(config, "use_fips_endpoint", False) or getattr(config, "use_dualstack_endpoint", False):
        return "a FIPS or dual-stack endpoint"
    if s3.get("addressing_style") == "virtual" and not _is_aws(client.meta.endpoint_url):
        return "virtual-host addressing on a custom endpoint"
    return None


def _ca_bundle(session: Any, verify: bool | str | None) -> bytes | None:
    """The PEM certificates of the CA bundle boto3 would use (`verify=path`,
    else `AWS_CA_BUNDLE` or ~/.aws's `ca_bundle`), None for none (OSError
    when it cannot be read)."""
    bundle = verify if isinstance(verify, str) else (
        None if verify is False else session._session.get_config_variable("ca_bundle"))
    if not bundle:
        return None
    with open(bundle, "rb") as file:
        return file.read()


def _is_aws(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def _credential_provider(credentials: Any) -> Callable[[], dict[str, Any]]:
    """obstore's credential callback over botocore's credentials (static,
    or refreshable ones that botocore renews)."""
    refreshable = hasattr(credentials, "refresh_needed")

    def provide() -> dict[str, Any]:
        frozen = credentials.get_frozen_credentials()
        expires = (datetime.datetime.now(datetime.timezone.utc) + _CREDENTIALS_RECHECK
                   if refreshable else None)
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key,
                "token": frozen.token, "expires_at": expires}

    return provide


class S3Ranges:
    """Ranged GETs through obstore with the boto3 client's endpoint, region,
    TLS checks and credentials. One per process and request timeout (the
    owning `S3Store` makes a new one after a fork)."""

    def __init__(self, client: Any, credentials: Any, verify: bool | None,
                 ca_bundle: bytes | None = None) -> None:
        self._endpoint = client.meta.endpoint_url
        self._region = client.meta.region_name or "us-east-1"
        self._provider = _credential_provider(credentials)
        self._verify = verify
        self._ca_bundle = ca_bundle
        self._timeout = datetime.timedelta(seconds=request_timeout())
        self._lock = threading.Lock()
        self._stores: dict[str, Any] = {}

    def check(self) -> None:
        """Raises where obstore refuses these options (no request is made)."""
        self._store("sackli-options-check")
        with self._lock:
            self._stores.pop("sackli-options-check")

    @staticmethod
    def supports(bucket: str) -> bool:
        """Whether obstore can address `bucket` as boto3 does (not an access
        point or outpost ARN)."""
        return not bucket.startswith("arn:")

    def _store(self, bucket: str) -> Any:
        with self._lock:
            store = self._stores.get(bucket)
            if store is None:
                from obstore.store import S3Store as ObstoreS3

                options: dict[str, Any] = {
                    "connect_timeout": self._timeout, "read_timeout": self._timeout,
                    "pool_max_idle_per_host": "128"}
                where: dict[str, Any] = {}
                if _is_aws(self._endpoint):
                    # AWS itself: virtual-host addressing, as boto3 does
                    # (path style for names with dots, which TLS cannot name).
                    where["virtual_hosted_style_request"] = "." not in bucket
                else:
                    where["endpoint"] = self._endpoint
                    where["virtual_hosted_style_request"] = False
                    options["allow_http"] = urlsplit(self._endpoint).scheme == "http"
                if self._verify is False:
                    options["allow_invalid_certificates"] = True
                elif self._ca_bundle:
                    # Trusted beside the system's roots (obstore cannot
                    # trust a bundle alone).
                    options["root_certificate"] = self._ca_bundle
                store = self._stores[bucket] = ObstoreS3(
                    bucket, region=self._region, skip_signature=False, **where,
                    credential_provider=self._provider, client_options=options,
                    # One attempt each: `_retry` retries.
                    retry_config={"max_retries": 0, "retry_timeout": self._timeout,
                                  "backoff": {"init_backoff": datetime.timedelta(milliseconds=50),
                                              "max_backoff": datetime.timedelta(seconds=5),
                                              "base": 2}})
            return store

    def read(self, path: RemotePath, offset: int, length: int, identity: str | None) -> bytes:
        """Bytes [offset, offset + length), checked and retried as
        `S3Store.read` checks and retries them."""
        return bytes(self._read(path, offset, length, identity))

    def _read(self, path: RemotePath, offset: int, length: int,
              identity: str | None) -> memoryview:
        if length == 0:
            return memoryview(b"")
        return with_retries(lambda: self._get(path, offset, length, identity),
                            f"{path.url}: GET bytes {offset}-{offset + length - 1}")

    def read_many(self, path: RemotePath, ranges: list[tuple[int, int]],
                  identity: str | None,
                  parallelism: int = DEFAULT_PARALLELISM) -> list[memoryview]:
        """Each range as `read` gives it, up to `parallelism` in flight on
        the process's request threads (`read_each`), as views of
        obstore's buffers (no copy)."""
        return read_each(self._read, path, ranges, identity, parallelism)

    def read_tail(self, path: RemotePath, length: int) -> ObjectTail | None:
        """The object's stat and last min(`length`, size) bytes from one GET
        of `Range: bytes=-length`, checked (`tail_size`) and retried; None
        where S3 answers no range (an empty object: 416, or a 200)."""
        return with_retries(lambda: self._tail(path, length),
                            f"{path.url}: GET the last {length} bytes")

    def _tail(self, path: RemotePath, length: int) -> ObjectTail | None:
        try:
            result, data = self._request(path, {"range": {"suffix": length}}, "the last bytes")
        except _NoRange:
            return None
        etag = result.meta.get("e_tag")
        if not etag:
            return None
        start, stop = result.range
        size = tail_size(f"bytes {start}-{stop - 1}/{result.meta.get('size')}", length, len(data))
        metadata = {name: value for name, value in (result.attributes or {}).items()
                    if isinstance(name, str) and name not in _STANDARD_ATTRIBUTES}
        return ObjectTail(ObjectStat(size, str(etag), metadata), data)

    def _get(self, path: RemotePath, offset: int, length: int,
             identity: str | None) -> memoryview:
        url = path.url
        # If-Match: a replaced object answers 412, never other bytes.
        options: dict[str, Any] = {"range": (offset, offset + length)}
        if identity:
            options["if_match"] = identity
        try:
            result, data = self._request(path, options, f"bytes {offset}-{offset + length - 1}")
        except _NoRange as error:
            if error.status == "416":
                raise OSError(f"{url}: GET bytes {offset}-{offset + length - 1}: "
                              "range not satisfiable") from None
            raise Transient(str(error)) from None  # not an answer to this range
        check_identity(identity, result.meta.get("e_tag"), "ETag")
        start, stop = result.range
        check_content_range(f"bytes {start}-{stop - 1}/{result.meta.get('size')}",
                            offset, length, len(data))
        return data

    def _request(self, path: RemotePath, options: dict[str, Any], what: str) -> tuple[Any, memoryview]:
        """(obstore's result, its body) of one GET with `options`, its
        failures as the other back-ends raise them: `changed_error` for a
        412 under If-Match, `_NoRange` for a 416 or an answer that is not
        partial, `Transient` for what may succeed when asked again."""
        import obstore
        from obstore import exceptions as obstore_errors

        url = path.url
        try:
            result = obstore.get(self._store(path.bucket), path.key, options=options)
            data = memoryview(result.bytes())  # a body cut short raises here
        except obstore_errors.PreconditionError:
            identity = options.get("if_match")
            if identity:
                raise changed_error(url, f"ETag {identity}", None) from None
            raise OSError(f"{url}: GET failed: precondition failed") from None
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, f"{url}: no such object or bucket", url) from None
        except (obstore_errors.PermissionDeniedError, obstore_errors.UnauthenticatedError) as error:
            raise PermissionError(errno.EACCES, f"{url}: access denied ({_code(error)})",
                                  url) from None
        except obstore_errors.GenericError as error:
            status = _STATUS.search(str(error))
            if status is None:
                if "NotPartial" in str(error):
                    # A 200 to a ranged GET: S3's answer for an empty object.
                    raise _NoRange(None, _first_line(error)) from None
                # No answer, a body cut short, a timeout, or an answer for
                # another range (object_store compares Content-Range).
                raise Transient(_first_line(error)) from error
            code = status.group(1)
            if code in ("404",):
                raise FileNotFoundError(errno.ENOENT, f"{url}: no such object or bucket", url) from None
            if code in ("401", "403"):
                raise PermissionError(errno.EACCES, f"{url}: access denied ({_code(error)})",
                                      url) from None
            if code.startswith("5") or code in ("408", "429"):
                raise Transient(f"HTTP {code}") from error
            if code == "416":
                raise _NoRange(code, f"GET {what}: range not satisfiable") from None
            raise OSError(f"{url}: GET failed: {_first_line(error)}") from None
        return result, data


class _NoRange(Exception):
    """A GET answered with no range: 416 (`status`), or a whole object
    (`status` None)."""

    def __init__(self, status: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status


def _code(error: BaseException) -> str:
    """S3's error code in the answer's body (else its status line)."""
    found = _CODE.search(str(error))
    if found:
        return found.group(1)
    status = _STATUS.search(str(error))
    return status.group(1) if status else "refused"


def _first_line(error: BaseException) -> str:
    return str(error).split("\n", 1)[0][:300]


def ranges_for(client: Any, session: Any, verify: bool | str | None) -> S3Ranges | None:
    """The obstore reader for the boto3 `client`'s configuration, or None
    where boto3 must read (`unsupported_reason`, a child forked after obstore
    ran, a CA bundle obstore cannot read or parse) or there are no credentials (boto3 then raises its
    PermissionError, as before)."""
    if unsupported_reason(client) is not None or not _claim_runtime():
        return None
    credentials = session.get_credentials()
    if credentials is None:
        return None
    try:
        ranges = S3Ranges(client, credentials, verify if isinstance(verify, bool) else None,
                          _ca_bundle(session, verify))
        ranges.check()
    except Exception:  # an unreadable or unparsable bundle: boto3 reports it
        return None
    return ranges
