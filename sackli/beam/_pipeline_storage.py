"""Storage settings from the pipeline's options, for every read, write,
listing and publication the sackli transforms make themselves (Beam's own
file systems take the same options).

On workers the configuration arrives as pipeline options, not as
environment variables: Beam hands them to `FileSystems.set_options` (when a
Pipeline is built, and on every worker at start) and to
`RuntimeValueProvider`. They become a `StorageSettings`, used through
`sackli._storage.using`:

* S3 (`S3Options`): `--s3_access_key_id`, `--s3_secret_access_key`,
  `--s3_session_token`, `--s3_endpoint_url`, `--s3_region_name`,
  `--s3_api_version`, `--s3_verify`, `--s3_disable_ssl`, passed to boto3 as
  Beam's S3 file system passes them; boto3 falls back to its standard
  configuration (the environment, ~/.aws) for each one not given.
* GCS (`GoogleCloudOptions`): `--project`, and with
  `--impersonate_service_account` the credentials Beam's auth makes
  (`apache_beam.internal.gcp.auth`). Without impersonation, the client finds
  application default credentials itself, as Beam's auth would (without its
  retries, which wait about 30 s when there are none). There is no endpoint
  option: as for Beam's GCS file system, STORAGE_EMULATOR_HOST (where
  credentials are not used).

Options that set nothing for a back-end leave it on sackli's standard
configuration (the environment), as outside Beam.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, S3Options
from apache_beam.options.value_provider import RuntimeValueProvider

from .. import Reader
from .._bulk import ReaderOptions
from .._storage import GcsSettings, S3Settings, StorageSettings, using

__all__ = ["open_reader", "pipeline_options", "pipeline_storage", "storage_settings"]

# The settings of the last options seen (a process has one pipeline's
# options at a time): building them parses options and may ask Beam's auth.
_cached: tuple[Any, StorageSettings | None] | None = None


def pipeline_options() -> Any:
    """The options of the pipeline running in this process (a
    PipelineOptions, or on some workers a dict), or None outside one."""
    return FileSystems._pipeline_options or RuntimeValueProvider.runtime_options or None


def _as_pipeline_options(options: Any) -> PipelineOptions:
    return PipelineOptions.from_dictionary(options) if isinstance(options, dict) else options


def _s3_settings(options: PipelineOptions) -> S3Settings | None:
    s3 = options.view_as(S3Options)
    settings = S3Settings(
        access_key_id=s3.s3_access_key_id, secret_access_key=s3.s3_secret_access_key,
        session_token=s3.s3_session_token, endpoint_url=s3.s3_endpoint_url,
        region_name=s3.s3_region_name, api_version=s3.s3_api_version, verify=s3.s3_verify,
        use_ssl=not s3.s3_disable_ssl)
    return None if settings == S3Settings() else settings


def _gcs_settings(options: PipelineOptions) -> GcsSettings | None:
    gcp = options.view_as(GoogleCloudOptions)
    if gcp.project is None and not gcp.impersonate_service_account:
        return None
    if not gcp.impersonate_service_account or os.environ.get("STORAGE_EMULATOR_HOST"):
        return GcsSettings(project=gcp.project)
    from apache_beam.internal.gcp import auth

    found = auth.get_service_credentials(options)  # cached by Beam, once per process
    if found is None:
        # Beam found no credentials (or has no google-auth): it then
        # connects anonymously, and so do we, rather than as someone else
        # than the account to impersonate.
        return GcsSettings(project=gcp.project, anonymous=True)
    return GcsSettings(project=gcp.project, credentials=found.get_google_auth_credentials())


def storage_settings(options: Any) -> StorageSettings | None:
    """The storage settings the pipeline options `options` (PipelineOptions
    or a dict of them) give; None when they give none (or `options` is
    None): the environment's configuration then, as outside Beam."""
    global _cached
    cached = _cached
    if cached is not None and cached[0] is options:
        return cached[1]
    settings = None
    if options is not None:
        beam_options = _as_pipeline_options(options)
        s3, gcs = _s3_settings(beam_options), _gcs_settings(beam_options)
        settings = None if s3 is None and gcs is None else StorageSettings(s3=s3, gcs=gcs)
    _cached = (options, settings)
    return settings


@contextlib.contextmanager
def pipeline_storage() -> Iterator[None]:
    """Storage calls inside the block use the running pipeline's settings."""
    with using(storage_settings(pipeline_options())):
        yield


def open_reader(path: str, options: ReaderOptions) -> Reader:
    """`Reader(path, options)` opened with the pipeline's storage settings
    (its remote objects keep them for the reads that follow)."""
    with pipeline_storage():
        return Reader(path, options)
