"""Client settings given by a caller instead of the environment.

By default each back-end builds its SDK client from the SDK's standard
configuration (the environment, ~/.aws, application default credentials).
A caller that has its own configuration (Beam: the pipeline's options)
describes it as a `StorageSettings` and runs the storage calls inside
`using(settings)`; a field left None falls back to the standard
configuration, field by field.

The settings in effect are a context variable: they follow the calling
thread (and asyncio task), never leak into other callers, and are not seen
by threads the caller did not start with a copy of its context. So what
keeps working later, on other threads, takes its store when it opens: a
`RemoteObject` (read by the engine's own threads), an upload, a writer's
spool.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from typing import Any, Iterator

__all__ = ["GcsSettings", "S3Settings", "StorageSettings", "current_settings", "using"]


@dataclasses.dataclass(frozen=True)
class S3Settings:
    """How to build the boto3 S3 client (boto3's `client()` arguments);
    None: boto3's own configuration for that field. Secrets are left out
    of the repr."""

    access_key_id: str | None = None
    secret_access_key: str | None = dataclasses.field(default=None, repr=False)
    session_token: str | None = dataclasses.field(default=None, repr=False)
    endpoint_url: str | None = None
    region_name: str | None = None
    api_version: str | None = None
    # True / False, or the path of a CA bundle (boto3's `verify`).
    verify: bool | str | None = None
    use_ssl: bool = True

    def client_arguments(self) -> dict[str, Any]:
        """The keyword arguments of boto3's `Session.client` these settings give."""
        return {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
            "endpoint_url": self.endpoint_url,
            "region_name": self.region_name,
            "api_version": self.api_version,
            "verify": self.verify,
            "use_ssl": self.use_ssl,
        }


@dataclasses.dataclass(frozen=True)
class GcsSettings:
    """How to build the google-cloud-storage client; None: the client's own
    configuration for that field (GOOGLE_CLOUD_PROJECT, application default
    credentials). The endpoint is always the client's: STORAGE_EMULATOR_HOST
    when set. `credentials` (google-auth credentials) compare by identity;
    `anonymous`: no credentials at all (public objects only)."""

    project: str | None = None
    credentials: Any = dataclasses.field(default=None, repr=False)
    anonymous: bool = False


@dataclasses.dataclass(frozen=True)
class StorageSettings:
    """The settings of each back-end; None: the standard configuration."""

    s3: S3Settings | None = None
    gcs: GcsSettings | None = None

    def for_scheme(self, scheme: str) -> S3Settings | GcsSettings | None:
        """The settings of the back-end of `scheme` ("s3" or "gs")."""
        return self.s3 if scheme == "s3" else self.gcs


_CURRENT: contextvars.ContextVar[StorageSettings | None] = contextvars.ContextVar(
    "sackli_storage_settings", default=None)


def current_settings() -> StorageSettings | None:
    """The settings in effect in this context (None: the standard configuration)."""
    return _CURRENT.get()


@contextlib.contextmanager
def using(settings: StorageSettings | None) -> Iterator[None]:
    """Storage calls inside the block (in this thread or task) use
    `settings`; None: the standard configuration, as outside any block."""
    token = _CURRENT.set(settings)
    try:
        yield
    finally:
        _CURRENT.reset(token)
