"""The pure arithmetic of retries. No database, no clock: the statements apply the results."""

from __future__ import annotations

import math
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

    def __post_init__(self) -> None:
        if not (self.base_s > 0 and self.factor >= 1 and self.cap_s > 0):
            raise ValueError("a retry policy needs base_s > 0, factor >= 1 and cap_s > 0")
        if not 0 <= self.jitter < 1:
            raise ValueError("a retry policy's jitter must be in [0, 1)")


DEFAULT_RETRY = RetryPolicy()


def retry_delay(
    attempts: int, policy: RetryPolicy = DEFAULT_RETRY, rng: random.Random | None = None
) -> float:
    """Seconds to wait after the ``attempts``-th attempt failed (attempts counts from 1).

    The cap is applied before the power is taken, so no attempt count can overflow.
    """
    exponent = max(attempts - 1, 0)
    if policy.base_s >= policy.cap_s:
        delay = policy.cap_s
    elif policy.factor == 1:
        delay = policy.base_s
    elif exponent >= math.log(policy.cap_s / policy.base_s, policy.factor):
        delay = policy.cap_s
    else:
        delay = min(policy.base_s * policy.factor**exponent, policy.cap_s)
    draw = (rng or random).random()
    return delay * (1.0 - policy.jitter * draw)


def is_exhausted(attempts: int, max_attempts: int) -> bool:
    """Whether an item that has been claimed ``attempts`` times may not be tried again.

    Spelled once more in ``sql/requeue_stale.sql`` (the stale filter runs in the statement);
    ``tests/contract/test_maintenance.py`` holds the two to each other.
    """
    return attempts >= max_attempts
