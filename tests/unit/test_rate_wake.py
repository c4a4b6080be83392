"""The rate wake's timing (``workers/rate_wake.py``), on a controlled clock: when a worker claims
again for the items a rate limit held back, never sooner than its floor, never later than its
poll, and how the floor backs off while other workers take the slots."""

from __future__ import annotations

import pytest

from workers.rate_wake import RATE_WAKE_MIN_S, RateWake


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_without_a_limit_holding_items_back_the_worker_waits_for_its_poll(clock) -> None:
    wake = RateWake(poll_s=1.0, clock=clock)
    assert wake.timeout_s() == (1.0, False)
    wake.claimed(clock.now, None, took=True, rate_woken=False)
    assert wake.timeout_s() == (1.0, False)


def test_it_claims_again_when_the_limit_frees_counted_from_the_claims_start(clock) -> None:
    wake = RateWake(poll_s=1.0, clock=clock)
    began = clock.now
    clock.now += 0.03  # the claim's round trip
    wake.claimed(began, 0.1, took=True, rate_woken=False)
    assert wake.timeout_s() == (pytest.approx(0.07), True)


def test_a_moment_past_the_poll_is_the_polls(clock) -> None:
    wake = RateWake(poll_s=1.0, clock=clock)
    wake.claimed(clock.now, 60.0, took=False, rate_woken=False)
    assert wake.timeout_s() == (1.0, False)


def test_never_sooner_than_the_floor_after_the_claim_began(clock) -> None:
    wake = RateWake(poll_s=1.0, clock=clock)
    wake.claimed(clock.now, 0.0001, took=True, rate_woken=False)
    assert wake.timeout_s() == (pytest.approx(RATE_WAKE_MIN_S), True)
    clock.now += 5  # a moment long past: claim at once
    assert wake.timeout_s() == (0.0, True)


def test_the_floor_doubles_while_rate_wakes_find_nothing_and_falls_back_when_one_claims(
    clock,
) -> None:
    wake = RateWake(poll_s=1.0, clock=clock)
    wake.claimed(clock.now, 0.1, took=True, rate_woken=False)
    for expected in (0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0):
        clock.now = wake.due  # another worker took the slot: the next one is 100 ms on
        wake.claimed(clock.now, 0.1, took=False, rate_woken=True)
        assert wake.floor_s == pytest.approx(expected)
    # At the poll: the next wake is the poll's.
    assert wake.timeout_s() == (1.0, False)
    # A claim after a notice or the poll that found nothing leaves the floor as it is.
    wake.claimed(clock.now, 0.2, took=False, rate_woken=False)
    assert wake.floor_s == 1.0
    wake.claimed(clock.now, 0.05, took=True, rate_woken=False)
    assert wake.floor_s == RATE_WAKE_MIN_S
    assert wake.timeout_s() == (pytest.approx(0.05), True)


def test_a_wake_a_little_early_claims_again_at_the_moment_without_backing_off(clock) -> None:
    wake = RateWake(poll_s=1.0, clock=clock)
    wake.claimed(clock.now, 0.1, took=True, rate_woken=False)
    clock.now = wake.due
    # The database began the claim a moment before the bucket's free_at: the same moment again.
    wake.claimed(clock.now, 0.002, took=False, rate_woken=True)
    assert wake.floor_s == RATE_WAKE_MIN_S
    assert wake.timeout_s() == (pytest.approx(RATE_WAKE_MIN_S), True)
