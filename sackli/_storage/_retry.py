"""Retrying transient failures of remote requests: exponential backoff with
jitter, bounded by a number of attempts and an overall deadline.

Bounds come from the environment, read at each call:
`SACKLI_REMOTE_ATTEMPTS` (default 8) and `SACKLI_REMOTE_DEADLINE` seconds
(default 120) for one request with its retries.

Each attempt's network timeout (connecting, or waiting between bytes of a
response) is a quarter of the deadline, at most 60 s (the SDKs' own
default) and at least 0.5 s: 30 s with the defaults. A response that
stalls (a server that acted but answers late, a connection lost silently)
then costs one attempt, not the whole deadline, and leaves time to retry
or to check what the server did.
"""

from __future__ import annotations

import os
import random
import time
from typing import Callable, TypeVar

__all__ = ["Transient", "request_timeout", "with_retries"]

T = TypeVar("T")
_FIRST_DELAY = 0.05
_MAX_DELAY = 5.0
# The SDKs' own default: a request idle this long is dead.
_MAX_REQUEST_TIMEOUT = 60.0
_MIN_REQUEST_TIMEOUT = 0.5
# The share of the deadline one attempt may wait on the network.
_ATTEMPT_SHARE = 0.25


class Transient(Exception):
    """Raised by a request that may succeed if tried again."""


def _bounds() -> tuple[int, float]:
    attempts = int(os.environ.get("SACKLI_REMOTE_ATTEMPTS", "8"))
    deadline = float(os.environ.get("SACKLI_REMOTE_DEADLINE", "120"))
    return max(1, attempts), max(0.0, deadline)


def request_timeout() -> float:
    """Seconds one attempt may wait on the network (connect, or between
    bytes of a response): a quarter of the deadline, within [0.5, 60] s
    (see the module's docstring), so a stalled attempt leaves time for
    others."""
    deadline = _bounds()[1]
    return max(_MIN_REQUEST_TIMEOUT, min(deadline * _ATTEMPT_SHARE, _MAX_REQUEST_TIMEOUT))


def with_retries(request: Callable[[], T], what: str) -> T:
    """`request()`, tried again after `Transient` failures; after the last
    attempt or past the deadline, an OSError naming `what` and the cause."""
    attempts, deadline = _bounds()
    start = time.monotonic()
    delay = _FIRST_DELAY
    for attempt in range(1, attempts + 1):
        try:
            return request()
        except Transient as error:
            elapsed = time.monotonic() - start
            pause = min(delay, _MAX_DELAY) * (0.5 + random.random() / 2)
            if attempt == attempts or elapsed + pause > deadline:
                raise OSError(
                    f"{what}: failed after {attempt} attempt{'s' if attempt > 1 else ''} "
                    f"in {elapsed:.1f} s: {error}"
                ) from error.__cause__ or error
            time.sleep(pause)
            delay *= 2
    raise AssertionError("unreachable")
