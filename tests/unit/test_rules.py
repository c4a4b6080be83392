"""The retry arithmetic, without a database."""

from __future__ import annotations

import random

import pytest

from workqueue.rules import RetryPolicy, is_exhausted, retry_delay


def test_retry_delays_grow_until_the_cap() -> None:
    policy = RetryPolicy(base_s=1, factor=2, cap_s=30, jitter=0)
    assert [retry_delay(n, policy) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_jitter_only_shortens_and_stays_within_its_share() -> None:
    policy = RetryPolicy(base_s=10, factor=2, cap_s=1000, jitter=0.25)
    rng = random.Random(7)
    draws = [retry_delay(3, policy, rng) for _ in range(1000)]
    assert all(30 <= d <= 40 for d in draws)
    assert max(draws) - min(draws) > 5  # it really spreads


def test_jittered_delays_still_grow() -> None:
    rng = random.Random(1)
    policy = RetryPolicy(base_s=2, factor=2, cap_s=3600, jitter=0.25)
    delays = [retry_delay(n, policy, rng) for n in range(1, 10)]
    assert delays == sorted(delays)


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "exhausted"),
    [(0, 3, False), (2, 3, False), (3, 3, True), (4, 3, True), (1, 1, True)],
)
def test_is_exhausted(attempts: int, max_attempts: int, exhausted: bool) -> None:
    assert is_exhausted(attempts, max_attempts) is exhausted


@pytest.mark.parametrize("attempts", [1024, 1025, 5000, 10**9])
def test_no_attempt_count_overflows_the_delay(attempts: int) -> None:
    """Issue 8.10: the power was taken before the cap (OverflowError from attempt 1,025)."""
    delay = retry_delay(attempts, RetryPolicy(jitter=0))
    assert delay == RetryPolicy().cap_s


def test_a_policy_that_cannot_grow_stays_at_its_base() -> None:
    assert retry_delay(10**6, RetryPolicy(base_s=3, factor=1, jitter=0)) == 3
    assert retry_delay(5, RetryPolicy(base_s=7200, jitter=0)) == 3600
