"""Claiming: take work while a slot is free, wake on notice, back off while the database is away.

Each pass claims up to the free capacity (at most ``claim_batch``) in one statement
(``runtime.aclaim``), with a fresh ``RequestContext`` per claim, unless more finished items than
the capacity still wait for their completion to be written (then it waits for the write).
After a full batch the next claim goes out at once and the batch's handlers run while it is on
its way: the default capacity is two batches, so a draining worker's claims and handlers overlap.
While claims come back full and the capacity holds two batches or more, a second claimer joins:
two claims are then on their way at once (each on its own connection, disjoint by ``SKIP
LOCKED``), so a draining worker is not bound by one claim's round trip. It claims only whole
batches, only while the lane has a backlog, and rests as soon as a claim comes back short, so
an idle worker still sends one claim per notice or poll.
With nothing to claim it waits for a ``work_available`` notice (the wake event) or the poll
interval; the claim after that wait takes the first due item alone, by the lighter statement
(``woken``: nothing was left to share out, so the fair claim's walk over the tenants is skipped
on the path from a notice to a handler), and the one after it is fair again. While it waits it
offers the listener's thread one slot (``woken.py``): a notice then sends that claim from the
thread at once, and the loop starts what it took. A claim that came
back short while a rate limit held items back says when that limit frees: the worker claims
again then, if that is sooner than its poll (``rate_wake.py``), by the fair claim (those items
are a backlog). When the database
does not answer, it backs off (doubling from the poll interval up to ``outage_backoff_max_s``)
and the outage is logged once, not once per pass.
A worker that holds a liveness lock (``liveness_lock.py``) claims only while it holds one: a
claim waits for the lock, and one that comes back after the lock was lost (or under another
lock than the one it was sent under) is handed back unrun, since the sweep may hand the items
of the lost lock to another worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from tenancy.contexts import AppType, OpContext, new_request_context
from workers.completing import Completer
from workers.config import WorkerSettings
from workers.liveness_lock import LivenessLock
from workers.metrics import IN_FLIGHT, RELEASED, for_kind, observe_many, waited
from workers.outage import Outage
from workers.rate_wake import RateWake
from workers.running import Runner
from workers.woken import Offer, WokenClaims
from workqueue import runtime
from wqcore.logs import log_event
from wqcore.store import Done, OwnConnection, begin

logger = logging.getLogger(__name__)


class _Declined:
    """The listener's thread did not claim on the offer it took (``woken.py``)."""


DECLINED = _Declined()


class ClaimLoop:
    """Claims items and hands each to the runner (``Runner.start``), while the runner has a
    free slot and the completer's backlog is short."""

    def __init__(
        self,
        settings: WorkerSettings,
        worker_id: str,
        outage: Outage,
        runner: Runner,
        completer: Completer,
        liveness: LivenessLock | None = None,
    ) -> None:
        self.settings = settings
        # The liveness lock claims wait for (None: the worker holds none, and claims freely),
        # and the event its holder sets (from its thread) once it holds one.
        self.liveness = liveness
        self.held = asyncio.Event()
        self.worker_id = worker_id
        self.outage = outage
        self.runner = runner
        self.completer = completer
        # Set by a work_available notice (the listener), and by the stop.
        self.wake = asyncio.Event()
        # Set when a job ends, and after each completion write (the completer's backlog).
        self.slot_freed = runner.jobs.slot_freed
        self.written = completer.written
        # Slots asked for by claims on their way (two claimers share the capacity).
        self.reserved = 0
        # Set while claims come back full (the lane has a backlog): the second claimer's cue.
        self.full = asyncio.Event()
        # Set when the first claimer has ended: the second one ends after its claim in flight.
        self.over = asyncio.Event()
        # When to claim again for items a rate limit held back (the first claimer's).
        self.rate_wake = RateWake(settings.poll_interval_ms / 1000)
        # The slot offered to the listener's thread while idle (``woken.py``).
        self.woken = WokenClaims(self._claim_first, self._clocks, self._deliver)

    @property
    def claimers(self) -> int:
        """Two while the capacity holds two whole batches, else one."""
        s = self.settings
        return 2 if (s.capacity or 1) >= 2 * s.claim_batch else 1

    async def run(self, stop: asyncio.Event) -> None:
        """Claim until ``stop``; in ``once`` mode, until nothing is left to claim or run."""
        waker = asyncio.ensure_future(self._wake_on(stop))
        second = asyncio.ensure_future(self._claim_while_full(stop)) if self.claimers > 1 else None
        try:
            await self._claim_until(stop)
        finally:
            # Never cancelled mid-claim: a claim that committed must start what it took.
            self.over.set()
            self.full.set()
            if second is not None:
                await second
            waker.cancel()

    async def _claim_until(self, stop: asyncio.Event) -> None:
        s = self.settings
        poll_s = s.poll_interval_ms / 1000
        backoff_s = poll_s
        # Whether the last claim found less than it asked and the loop then waited: the next
        # claim takes the first due item alone, by the lighter statement (``runtime.aclaim``).
        woken = False
        # Whether that wait ended at a rate limit's moment (``rate_wake``), not at a notice.
        rate_woken = False
        # An offer the listener's thread took during the wait: its claim is the next one.
        taken: Offer | None = None
        writes = self.completer.writes
        while taken is not None or not stop.is_set():
            if taken is not None:
                asked, woken, rate_woken = 1, True, False
                outcome = await self._taken(taken)
                taken = None
                if isinstance(outcome, _Declined):
                    continue  # a cap or a rate limit: the loop's own woken claim counts it
                claimed = outcome
            else:
                if self.completer.backlog > (s.capacity or 1):
                    self.written.clear()
                    await self._wait(self.written, None, stop)
                    continue
                free = self._free()
                if free <= 0:
                    self.slot_freed.clear()
                    await self._wait(self.slot_freed, None, stop)
                    continue
                if not await self._until_held(stop):
                    continue
                # Cleared before the claim: a notice that lands during it wakes the next one.
                self.wake.clear()
                asked = min(free, s.claim_batch)
                writes = self.completer.writes
                claimed = await self._claim(asked, woken, rate_woken)
                rate_woken = False
            if claimed is None:
                await self._wait(self.wake, backoff_s, stop)
                backoff_s = min(backoff_s * 2, s.outage_backoff_max_s)
                continue
            backoff_s = poll_s
            if claimed:
                if woken:
                    # The first item after a wait has started (``_claim``: at once), before the
                    # next claim is even planned.
                    woken = False
                    continue  # more may be due
                if len(claimed) == asked:
                    # A full batch: the next claim goes out at once, and this batch's handlers
                    # run while it is on its way (with a capacity of two batches, the default).
                    continue
            woken = False
            # Less than asked: nothing more was due when the claim ran. Work announced since
            # (the wake event, cleared before the claim) or due by then (the poll) comes next.
            if s.once:
                if not self.runner.in_flight() and not self.reserved:
                    backlog = self.completer.backlog
                    if not backlog and self.completer.writes == writes:
                        return
                    # The statement that completes an item makes its workflow's next steps
                    # due: look again once the completions (written during this claim, or
                    # not yet) are written.
                    if backlog:
                        self.written.clear()
                        await self._wait(self.written, None, stop)
                    continue
                self.slot_freed.clear()
                await self._wait(self.slot_freed, None, stop)
                continue
            timeout_s, rate_woken = self.rate_wake.timeout_s()
            offer = self._offer(stop)
            await self._wait(self.wake, timeout_s, stop)
            if offer is not None and not self._withdraw(offer):
                taken = offer
                continue
            # At a rate limit's moment the items it held back wait: the fair claim takes them.
            rate_woken = rate_woken and not self.wake.is_set()
            woken = not rate_woken

    async def _claim_while_full(self, stop: asyncio.Event) -> None:
        """The second claimer: whole batches, while claims come back full (see the module's
        docstring). A failed claim is the first claimer's to account for and back off from."""
        s = self.settings
        while True:
            await self._wait(self.full, None, stop)
            if stop.is_set() or self.over.is_set():
                return
            if self.completer.backlog > (s.capacity or 1) or self._free() < s.claim_batch:
                # Room for a whole batch first (a claim only for the rest is the first's).
                self.slot_freed.clear()
                self.written.clear()
                await self._wait_any((self.slot_freed, self.written, self.over), stop)
                continue
            if not await self._until_held(stop):
                continue
            claimed = await self._claim(s.claim_batch, woken=False)
            if claimed is None or len(claimed) < s.claim_batch:
                self.full.clear()

    def _free(self) -> int:
        return (self.settings.capacity or 1) - self.runner.in_flight() - self.reserved

    async def _claim(
        self, asked: int, woken: bool, rate_woken: bool = False
    ) -> list[tuple[OpContext, runtime.WorkItem]] | None:
        """Claim up to ``asked`` and start each item; None when the claim failed (logged, or
        counted by the outage account). Sets or clears ``full`` by what came back; tells the
        rate wake what the claim said (``rate_woken``: this claim is a rate wake's)."""
        s = self.settings
        sent_at = self._clocks()
        epoch = self._held_epoch()
        if epoch is None:  # lost since the wait: the next pass waits for a new lock
            self.full.clear()
            return []
        self.reserved += asked
        try:
            claimed = await runtime.aclaim(
                new_request_context(AppType.WORKER),
                s.lane,
                list(s.kinds),
                self.worker_id,
                s.lease_s,
                asked,
                woken=woken,
            )
        except Exception as exc:
            self._failed(exc)
            return None
        finally:
            self._unreserve(asked)
        started = self._start(claimed, epoch, now=woken)
        took = await self._claimed(claimed, sent_at, started, rate_woken)
        if len(took) == asked and not woken:
            self.full.set()
        return took

    def _start(self, claimed: runtime.Claimed, epoch: int, *, now: bool) -> bool:
        """Start each item claimed under the liveness lock ``epoch`` (``now``: a woken claim's
        item, at once: its handler is the wake's reason); False, starting none, when the worker
        no longer holds that lock."""
        if not claimed:
            return True
        if self._held_epoch() != epoch:
            return False
        for ctx, item in claimed:
            self.runner.start(ctx, item, now=now)
        # The claim's metrics run after the handlers just started have taken their first step
        # (the loop runs its callbacks in order): they are off the path to a start.
        asyncio.get_running_loop().call_soon(self._count, claimed)
        return True

    async def _claimed(
        self,
        claimed: runtime.Claimed,
        sent_at: tuple[float, float],
        started: bool,
        rate_woken: bool,
    ) -> list[tuple[OpContext, runtime.WorkItem]]:
        """What a claim sent at ``sent_at`` (``_clocks``) came back with: the outage account
        and the rate wake told; the items handed back unrun when they were not ``started``
        (the liveness lock was lost meanwhile: ``[]``). Clears ``full``."""
        self.outage.ok(sent_at[0])
        self.rate_wake.claimed(sent_at[1], claimed.rate_wait_s, bool(claimed), rate_woken)
        self.full.clear()
        if not started:
            await self._hand_back(claimed)
            return []
        return claimed

    def _failed(self, exc: Exception) -> None:
        if not self.outage.failed("claim", exc):
            log_event(logger, logging.ERROR, "claim_failed", exc_info=exc, worker=self.worker_id)
        self.full.clear()

    def _unreserve(self, slots: int) -> None:
        # The slots a claim held are free again (whatever it took): a claimer waiting for room,
        # or for the end of a run in ``once`` mode, looks again.
        self.reserved -= slots
        self.slot_freed.set()

    def _clocks(self) -> tuple[float, float]:
        """Now, by the outage account's clock and the rate wake's: when a claim is sent."""
        return self.outage.now(), self.rate_wake.clock()

    # -- the woken claim from the listener's thread (woken.py) ------------------------------

    def _offer(self, stop: asyncio.Event) -> Offer | None:
        """Offer the listener's thread one slot for the wait ahead, if one is free and the
        worker holds its liveness lock."""
        epoch = self._held_epoch()
        if epoch is None or stop.is_set() or self._free() < 1:
            return None
        s = self.settings
        rctx = new_request_context(AppType.WORKER)
        plan = runtime.claim_first.plan(rctx, s.lane, list(s.kinds), self.worker_id, s.lease_s)
        first = begin(plan)
        if isinstance(first, Done):
            # Decided without a statement (a cap in effect, or one known to hold items back):
            # the loop's own woken claim, which counts them, goes on the notice.
            return None
        self.reserved += 1
        offer = Offer(asyncio.get_running_loop(), epoch, plan, first)
        self.woken.offer(offer)
        return offer

    def _withdraw(self, offer: Offer) -> bool:
        """Withdraw ``offer`` after the wait; False when the thread took it (its claim is the
        loop's next: ``_taken``)."""
        if not self.woken.withdraw(offer):
            return False
        offer.plan.close()
        self._unreserve(1)
        return True

    def _claim_first(self, offer: Offer, connection: OwnConnection) -> runtime.Claimed | None:
        """The thread's claim (``runtime.claim_first``, begun with the offer), on its own
        connection."""
        return connection.run(offer.plan, offer.first)

    def _deliver(self, offer: Offer, result: runtime.Claimed | BaseException | None) -> None:
        """On the loop, first thing after the thread's claim: its items start at once; the
        wait ends (the wake event)."""
        self._unreserve(1)
        if isinstance(result, runtime.Claimed):
            offer.started = self._start(result, offer.epoch, now=True)
        self.wake.set()

    async def _taken(
        self, offer: Offer
    ) -> list[tuple[OpContext, runtime.WorkItem]] | _Declined | None:
        """What the claim the thread sent on ``offer`` came to, as ``_claim`` says it;
        ``DECLINED`` when it did not claim (a cap or a rate limit is in effect)."""
        result = await offer.done
        if isinstance(result, Exception):
            self._failed(result)
            return None
        if isinstance(result, BaseException):
            raise result
        if result is None:
            return DECLINED
        return await self._claimed(result, offer.sent_at, offer.started, rate_woken=False)

    def _held_epoch(self) -> int | None:
        """Which liveness lock the worker holds now (0 when it takes none; None: none now)."""
        return 0 if self.liveness is None else self.liveness.held_epoch

    async def _until_held(self, stop: asyncio.Event) -> bool:
        """Wait while the worker has lost its liveness lock and holds no new one; True once it
        holds one (at once, nearly always), False when stopped."""
        while self._held_epoch() is None:
            if stop.is_set():
                return False
            # Cleared, then looked at again: a lock taken meanwhile has set it, or is seen now.
            self.held.clear()
            if self._held_epoch() is not None:
                break
            assert self.liveness is not None
            await self._wait(self.held, self.liveness.check_s, stop)
        return not stop.is_set()

    async def _hand_back(self, claimed: list[tuple[OpContext, runtime.WorkItem]]) -> None:
        """Release what a claim took while the worker lost its liveness lock, unrun (each
        attempt given back); what cannot be released now is the rescue's or the lease's."""
        released = 0
        for ctx, item in claimed:
            try:
                await runtime.arelease(ctx, item, "claimed as its worker lost its liveness lock")
            except Exception as exc:
                if not isinstance(exc, runtime.Conflict):
                    self.outage.failed("release", exc)
                continue
            released += 1
            RELEASED.labels(item.kind, "liveness_lost").inc()
        # INFO: nothing went wrong that the liveness line has not said already.
        log_event(
            logger,
            logging.INFO,
            "claim_handed_back",
            worker=self.worker_id,
            items=len(claimed),
            released=released,
            reason="liveness_lost",
        )

    @staticmethod
    async def _wait_any(events: tuple[asyncio.Event, ...], stop: asyncio.Event) -> None:
        """Until any of ``events`` is set (``stop`` sets them too, see ``_wake_on``)."""
        if stop.is_set() or any(event.is_set() for event in events):
            return
        waiters = [asyncio.ensure_future(event.wait()) for event in events]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    def _count(self, claimed: list[tuple[OpContext, runtime.WorkItem]]) -> None:
        lane = self.settings.lane
        for kind, n in Counter(item.kind for _, item in claimed).items():
            for_kind(kind).claimed.inc(n)
        waits: dict[str, list[float]] = {}
        for _, item in claimed:
            # updated_at is the claim's now(): how long the item waited once due.
            wait_s = (item.updated_at - item.available_at).total_seconds()
            waits.setdefault(item.kind, []).append(max(wait_s, 0.0))
        for kind, values in waits.items():
            observe_many(waited(lane, kind), values)
        IN_FLIGHT.set(self.runner.in_flight())

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
        for event in (self.wake, self.slot_freed, self.written, self.full, self.held):
            event.set()
