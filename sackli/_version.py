"""Versions: sackli's own, written only here (pyproject.toml reads it from
this file when building), and the zstd library its engine runs."""

__version__ = "0.1.0"


def zstd_version() -> str:
    """The version of the zstd library sackli's engine compresses and
    decompresses with, e.g. "1.5.7": the release compiled into the engine,
    or the system's libzstd it was built against."""
    from ._engine import zstd_version as engine_zstd_version

    return str(engine_zstd_version())
