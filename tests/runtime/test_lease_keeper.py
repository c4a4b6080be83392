"""The lease keeper, with a controlled clock (the database's clock still sets each lease), and
the thread it runs on, off the worker's loop."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from django.db import connections

from tenancy.contexts import AppType, new_request_context
from tests.helpers import row
from workers.lease import CONFLICT, SELF_FENCED, LeaseKeeper
from workers.offloop import OffLoop
from workers.periodic import PeriodicTask
from workers.worker import _lease_store
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.settle import Renewed, extend_leases


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _held() -> runtime.Fence:
    return runtime.Fence(uuid.uuid4(), uuid.uuid4(), uuid.uuid4())


def _keeper(
    renew, clock: Clock, lost: list, lease_s: float = 30, timeout_s: float = 0.05
) -> LeaseKeeper:
    return LeaseKeeper(
        renew,
        lambda i, why: lost.append((i, why)),
        lease_s=lease_s,
        timeout_s=timeout_s,
        clock=clock,
    )


def test_renewal_extends_the_lease_in_the_database(ctx) -> None:
    api.enqueue(ctx, "NOOP", {})
    [(_, item)] = claim(new_request_context(AppType.WORKER), "default", None, "w1", 5, 1)
    lost: list = []

    def extend_and_close(held, lease_s):
        try:
            return extend_leases(held, lease_s)
        finally:
            connections.close_all()

    async def renew(held, lease_s):
        return await asyncio.to_thread(extend_and_close, held, lease_s)

    # Its first statement connects (on a busy machine, longer than the other tests' bound).
    keeper = _keeper(renew, Clock(), lost, lease_s=600, timeout_s=10)
    keeper.hold(runtime.Fence.of(item))
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
    assert lost == [(theirs, CONFLICT)]
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
    assert lost == [(held, SELF_FENCED)]


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
    assert lost == [(held, SELF_FENCED)]


@pytest.mark.parametrize("lease_s", [3.0, 30.0, 300.0])
def test_the_keeper_renews_every_third_of_the_lease(lease_s: float) -> None:
    keeper = _keeper(None, Clock(), [], lease_s=lease_s)
    assert keeper.interval_s == pytest.approx(lease_s / 3)


def test_a_lease_that_ended_while_its_renewal_ran_is_not_reported_lost() -> None:
    """hold and drop come from the worker's loop while a renewal runs on the keeper's thread:
    an item that finished meanwhile, or was claimed again under a new token, is not the lease
    the statement refused."""
    clock, lost = Clock(), []
    finished, again = _held(), _held()
    claimed_again = runtime.Fence(again.org_id, again.item_id, uuid.uuid4())
    keeper: LeaseKeeper

    async def renew(held, lease_s):
        keeper.drop(finished)  # completed while the statement ran
        keeper.hold(claimed_again)  # lost, then claimed again by this worker: a new token
        return set()  # the old tokens are refused

    keeper = _keeper(renew, clock, lost)
    keeper.hold(finished)
    keeper.hold(again)
    assert asyncio.run(keeper.renew_once()) is True
    assert lost == []
    assert len(keeper) == 1  # the new claim is kept
    keeper.drop(again)  # the old claim's task ends after the new claim was made
    assert len(keeper) == 1, "dropping the old claim keeps the new claim's lease"
    keeper.drop(claimed_again)
    assert len(keeper) == 0


def test_the_keeper_renews_on_a_thread_of_its_own_while_the_caller_blocks(ctx) -> None:
    """On the keeper's thread and its store (one system connection): renewals go on while the
    thread that started it is blocked (here: this test's, in time.sleep), and stop closes it."""
    api.enqueue(ctx, "NOOP", {})
    [(_, item)] = claim(new_request_context(AppType.WORKER), "default", None, "w1", 5, 1)
    lost: list = []
    keeper = LeaseKeeper(
        runtime.aextend_leases, lambda i, why: lost.append((i, why)), lease_s=600, timeout_s=10
    )
    keeper.hold(runtime.Fence.of(item))
    renewed_on: list[str] = []

    async def renew_once() -> bool:
        renewed_on.append(threading.current_thread().name)
        return await keeper.renew_once()

    def tasks(stop: asyncio.Event) -> list[PeriodicTask]:
        return [
            PeriodicTask(
                name="lease_keeper",
                operation=renew_once,
                interval_s=0.1,
                mode="fixed_delay",
                timeout_s=None,
                stop=stop,
                on_error="continue",
            )
        ]

    off_loop = OffLoop("test-lease", tasks, _lease_store)
    off_loop.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(renewed_on) < 3:
            time.sleep(0.1)  # this thread blocks; the keeper's does not
        extended = row(item.id).lease_expires_at
    finally:
        asyncio.run(off_loop.stop())
    assert len(renewed_on) >= 3 and set(renewed_on) == {"test-lease"}
    assert (extended - item.lease_expires_at).total_seconds() > 500
    assert lost == []


def test_a_keeper_thread_that_cannot_start_stops_the_worker_from_starting() -> None:
    """Without it every lease would lapse: refusing to start beats running items twice."""

    def tasks(stop: asyncio.Event) -> list[PeriodicTask]:
        raise ValueError("no tasks")

    with pytest.raises(RuntimeError, match="test-lease thread did not start"):
        OffLoop("test-lease", tasks, _lease_store).start()


def test_a_cancel_request_the_renewal_reports_is_passed_on_once_and_the_lease_kept() -> None:
    held, other = _held(), _held()
    asked: list = []

    async def renew(fences, lease_s):
        return Renewed({f.item_id for f in fences}, [held.item_id])

    keeper = LeaseKeeper(
        renew, lambda i, why: None, on_cancel=asked.append, lease_s=30, timeout_s=1, clock=Clock()
    )
    keeper.hold(held)
    keeper.hold(other)
    assert asyncio.run(keeper.renew_once()) and asyncio.run(keeper.renew_once())
    assert asked == [held], "reported once"
    assert len(keeper) == 2, "still renewed until its holder ends it"
