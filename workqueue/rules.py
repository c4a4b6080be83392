"""The pure arithmetic of retries. No database, no clock: the statements apply the results."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How long a failed item waits before its next attempt: exponential, jittered, capped."""

    base_s: float = 2.0
    factor: float = 2.0
    cap_s: float = 3600.0
    # The delay is drawn from [d * (1 - jitter), d]; spreads a burst of failures out.
    jitter: float = 0.25


DEFAULT_RETRY = RetryPolicy()


def retry_delay(
    attempts: int, policy: RetryPolicy = DEFAULT_RETRY, rng: random.Random | None = None
) -> float:
    """Seconds to wait after the ``attempts``-th attempt failed (attempts counts from 1)."""
    exponent = max(attempts - 1, 0)
    delay = min(policy.base_s * policy.factor**exponent, policy.cap_s)
    draw = (rng or random).random()
    return delay * (1.0 - policy.jitter * draw)


def is_exhausted(attempts: int, max_attempts: int) -> bool:
    """Whether an item that has been claimed ``attempts`` times may not be tried again.

    Spelled once more in ``sql/requeue_stale.sql`` (the stale filter runs in the statement);
    ``tests/contract/test_maintenance.py`` holds the two to each other.
    """
    return attempts >= max_attempts
