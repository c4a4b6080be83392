"""The lease keeper, with a controlled clock (the database's clock still sets each lease)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from django.db import connections

from tenancy.contexts import AppType, new_request_context
from tests.helpers import row
from workers.lease import CONFLICT, SELF_FENCED, LeaseKeeper
from workqueue import api


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _held() -> api.Fence:
    return api.Fence(uuid.uuid4(), uuid.uuid4(), uuid.uuid4())


def _keeper(renew, clock: Clock, lost: list, lease_s: float = 30) -> LeaseKeeper:
    return LeaseKeeper(
        renew, lambda i, why: lost.append((i, why)), lease_s=lease_s, timeout_s=0.05, clock=clock
    )


def test_renewal_extends_the_lease_in_the_database(ctx) -> None:
    api.enqueue(ctx, "NOOP", {})
    [(_, item)] = api.claim(new_request_context(AppType.WORKER), "default", None, "w1", 5, 1)
    lost: list = []

    def extend_and_close(held, lease_s):
        try:
            return api.extend_leases(held, lease_s)
        finally:
            connections.close_all()

    async def renew(held, lease_s):
        return await asyncio.to_thread(extend_and_close, held, lease_s)

    keeper = _keeper(renew, Clock(), lost, lease_s=600)
    keeper.hold(api.Fence.of(item))
    assert asyncio.run(keeper.renew_once()) is True
    assert (row(item.id).lease_expires_at - item.lease_expires_at).total_seconds() > 500
    assert lost == []


def test_a_renewal_refused_for_another_holder_cancels_at_once() -> None:
    clock, lost = Clock(), []
    mine, theirs = _held(), _held()

    async def renew(held, lease_s):
        return {mine[1]}  # the statement renewed only one of the two

    keeper = _keeper(renew, clock, lost)
    keeper.hold(mine)
    keeper.hold(theirs)
    assert asyncio.run(keeper.renew_once()) is True
    assert lost == [(theirs[1], CONFLICT)]
    assert len(keeper) == 1


def test_a_renewal_that_times_out_is_retried_and_keeps_the_item() -> None:
    clock, lost, calls = Clock(), [], []
    held = _held()

    async def renew(items, lease_s):
        calls.append(clock.now)
        if len(calls) == 1:
            await asyncio.sleep(1)  # longer than the 0.05 s bound
        return {held[1]}

    keeper = _keeper(renew, clock, lost)
    keeper.hold(held)
    assert asyncio.run(keeper.renew_once()) is False  # the timeout counts as a failure
    assert lost == [] and len(keeper) == 1
    assert keeper.retry_s < keeper.interval_s  # retried sooner than the interval
    clock.now += keeper.retry_s
    assert asyncio.run(keeper.renew_once()) is True
    assert lost == [] and len(calls) == 2


def test_renewal_failing_for_half_the_lease_cancels_the_task() -> None:
    clock, lost = Clock(), []
    held = _held()

    async def renew(items, lease_s):
        raise OSError("database unreachable")

    keeper = _keeper(renew, clock, lost, lease_s=30)
    keeper.hold(held)
    for _ in range(5):  # failing, but for less than half the lease since the claim
        clock.now += 2.5
        asyncio.run(keeper.renew_once())
    assert lost == []
    clock.now += 2.5  # 15 s since the last success: half the 30 s lease
    asyncio.run(keeper.renew_once())
    assert lost == [(held[1], SELF_FENCED)]


def test_half_the_lease_is_measured_from_the_last_success() -> None:
    clock, lost = Clock(), []
    held = _held()
    fail = {"now": False}

    async def renew(items, lease_s):
        if fail["now"]:
            raise OSError("blip")
        return {held[1]}

    keeper = _keeper(renew, clock, lost, lease_s=30)
    keeper.hold(held)
    clock.now += 10
    asyncio.run(keeper.renew_once())  # success at t+10
    fail["now"] = True
    clock.now += 14  # 24 s since the claim, 14 since the last success
    asyncio.run(keeper.renew_once())
    assert lost == []
    clock.now += 1
    asyncio.run(keeper.renew_once())
    assert lost == [(held[1], SELF_FENCED)]


@pytest.mark.parametrize("lease_s", [3.0, 30.0, 300.0])
def test_the_keeper_renews_every_third_of_the_lease(lease_s: float) -> None:
    keeper = _keeper(None, Clock(), [], lease_s=lease_s)
    assert keeper.interval_s == pytest.approx(lease_s / 3)
