"""Claiming: take work while a slot is free, wake on notice, back off while the database is away.

Each pass claims up to the free capacity (at most ``claim_batch``) in one statement
(``api.aclaim``), with a fresh ``RequestContext`` per claim, unless more finished items than
the capacity still wait for their completion to be written (then it waits for the write).
After a full batch the next claim goes out at once and the batch's handlers run while it is on
its way: the default capacity is two batches, so a draining worker's claims and handlers overlap.
With nothing to claim it waits for a ``work_available`` notice (the wake event) or the poll
interval; the claim after that wait takes the first due item alone, by the lighter statement
(``woken``: nothing was left to share out, so the fair claim's walk over the tenants is skipped
on the path from a notice to a handler), and the one after it is fair again. When the database
does not answer, it backs off (doubling from the poll interval up to ``outage_backoff_max_s``)
and the outage is logged once, not once per pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable

from tenancy.contexts import AppType, OpContext, new_request_context
from workers.config import WorkerSettings
from workers.metrics import IN_FLIGHT, for_kind, waited
from workers.outage import Outage
from workqueue import api
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


class ClaimLoop:
    def __init__(
        self,
        settings: WorkerSettings,
        worker_id: str,
        outage: Outage,
        *,
        in_flight: Callable[[], int],
        start: Callable[[OpContext, api.WorkItem], None],
        wake: asyncio.Event,
        slot_freed: asyncio.Event,
        backlog: Callable[[], int] = lambda: 0,
        written: asyncio.Event | None = None,
    ) -> None:
        self.settings = settings
        self.worker_id = worker_id
        self.outage = outage
        self.in_flight = in_flight
        self.start = start
        self.wake = wake
        self.slot_freed = slot_freed
        # Finished items whose completion is not written yet, and the event set after each
        # write (workers.completing.Completer).
        self.backlog = backlog
        self.written = written or asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        """Claim until ``stop``; in ``once`` mode, until nothing is left to claim or run."""
        waker = asyncio.ensure_future(self._wake_on(stop))
        try:
            await self._claim_until(stop)
        finally:
            waker.cancel()

    async def _claim_until(self, stop: asyncio.Event) -> None:
        s = self.settings
        poll_s = s.poll_interval_ms / 1000
        backoff_s = poll_s
        # Whether the last claim found less than it asked and the loop then waited: the next
        # claim takes the first due item alone, by the lighter statement (``api.aclaim``).
        woken = False
        while not stop.is_set():
            if self.backlog() > (s.capacity or 1):
                self.written.clear()
                await self._wait(self.written, None, stop)
                continue
            free = (s.capacity or 1) - self.in_flight()
            if free <= 0:
                self.slot_freed.clear()
                await self._wait(self.slot_freed, None, stop)
                continue
            # Cleared before the claim: a notice that lands during the claim wakes the next one.
            self.wake.clear()
            started = self.outage.now()
            asked = min(free, s.claim_batch)
            try:
                claimed = await api.aclaim(
                    new_request_context(AppType.WORKER),
                    s.lane,
                    list(s.kinds),
                    self.worker_id,
                    s.lease_s,
                    asked,
                    woken=woken,
                )
            except Exception as exc:
                if not self.outage.failed("claim", exc):
                    log_event(
                        logger, logging.ERROR, "claim_failed", exc_info=True, worker=self.worker_id
                    )
                await self._wait(self.wake, backoff_s, stop)
                backoff_s = min(backoff_s * 2, s.outage_backoff_max_s)
                continue
            self.outage.ok(started)
            backoff_s = poll_s
            for ctx, item in claimed:
                self.start(ctx, item)
            if claimed:
                # The claim's metrics run after the handlers just started have taken their first
                # step (the loop runs its callbacks in order): they are off the path to a start.
                asyncio.get_running_loop().call_soon(self._count, claimed)
                if woken:
                    # The first item after a wait starts before the next claim is even planned.
                    woken = False
                    await asyncio.sleep(0)
                    continue  # more may be due
                if len(claimed) == asked:
                    # A full batch: the next claim goes out at once, and this batch's handlers
                    # run while it is on its way (with a capacity of two batches, the default).
                    continue
            woken = False
            # Less than asked: nothing more was due when the claim ran. Work announced since
            # (the wake event, cleared before the claim) or due by then (the poll) comes next.
            if s.once:
                if not self.in_flight():
                    return
                self.slot_freed.clear()
                await self._wait(self.slot_freed, None, stop)
                continue
            await self._wait(self.wake, poll_s, stop)
            woken = True

    def _count(self, claimed: list[tuple[OpContext, api.WorkItem]]) -> None:
        lane = self.settings.lane
        for kind, n in Counter(item.kind for _, item in claimed).items():
            for_kind(kind).claimed.inc(n)
        for _, item in claimed:
            # updated_at is the claim's now(): how long the item waited once due.
            wait_s = (item.updated_at - item.available_at).total_seconds()
            waited(lane, item.kind).observe(max(wait_s, 0.0))
        IN_FLIGHT.set(self.in_flight())

    @staticmethod
    async def _wait(event: asyncio.Event, timeout_s: float | None, stop: asyncio.Event) -> None:
        """Until ``event`` is set (``stop`` sets both events, see ``_wake_on``), or ``timeout_s``
        passes. One waiter, not one per event: this is on the path from a notice to a claim."""
        if stop.is_set():
            return
        try:
            async with asyncio.timeout(timeout_s):
                await event.wait()
        except TimeoutError:
            pass

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        for event in (self.wake, self.slot_freed, self.written):
            event.set()
