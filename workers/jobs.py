"""The items a worker holds now: each one's job (its context, item, run and task), and what
reaches a job from outside its task: the end of its run, a lost lease, a cancel request, the
stop.

A job is added when the claim hands its item to the runner and ended when its task ends; in
between the lease keeper, on a thread of its own, may report its lease lost or a cancel
request (``lost_threadsafe``, ``cancel_threadsafe``): each is handed to the worker's loop, where
the task is cancelled with its reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tenancy.contexts import OpContext
from workers.metrics import IN_FLIGHT
from workqueue import runtime
from workqueue.runtime import Run
from wqcore.logs import fields_of_item, log_event

logger = logging.getLogger(__name__)

# Why a job's task was cancelled: the worker is stopping; someone asked to cancel the item (its
# lease renewal said so); the handler ran past its time limit.
SHUTDOWN = "shutdown"
CANCEL_REQUESTED = "cancel_requested"
TIMEOUT = "timeout"
# The worker's liveness session failed: it fenced itself (``liveness_lock.py``); its items are
# the sweep's to hand back, nothing is written.
LIVENESS_LOST = "liveness_lost"
# The worker claimed the item again under a new token while its earlier claim's task still ran.
RECLAIMED = "reclaimed"


class Ended(StrEnum):
    """How an item's run ended here (``Job.ended``)."""

    # The handler returned: its completion is queued (the batch writes it under the token).
    DONE = "done"
    # It failed and runs again after a delay.
    RETRIED = "retried"
    # It failed for good: a dead letter.
    DEAD_LETTERED = "dead_lettered"
    # It asked for later (``run.snooze``): handed back, its attempt given back.
    SNOOZED = "snoozed"
    # Handed back unrun or unfinished: a kind this worker does not handle, or shutdown.
    RELEASED = "released"
    # Someone asked to cancel it: it ended cancelled.
    CANCELLED = "cancelled"
    # Another holder has it: the lease was lost, or the claim token refused a settle.
    LOST = "lost"
    # Its settle failed (the database is away): the lease runs out and the sweep hands it back.
    UNSETTLED = "unsettled"


@dataclass
class Job:
    ctx: OpContext
    item: runtime.WorkItem
    run: Run = field(default_factory=Run)
    task: asyncio.Task[None] | None = None
    # Why the task was cancelled: lost to another holder, self-fenced, cancel requested, or
    # shutdown.
    cancel_reason: str | None = None
    # While the handler runs (a cancel request arriving after it returned changes nothing:
    # its outcome is being written).
    in_handler: bool = False
    # A cancel request that came before the handler started: it never starts.
    cancel_wanted: bool = False
    # What the holder presents to write to the item (made once: the lease keeper holds it and
    # the completion sends it).
    fence: runtime.Fence = field(init=False)
    # How its run ended here, and what its handler raised (None: it returned).
    ended: Ended | None = None
    exception: BaseException | None = None

    def __post_init__(self) -> None:
        self.fence = runtime.Fence.of(self.item)

    def cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        self.run.cancel(reason)
        if self.task is not None:
            self.task.cancel()


class Jobs:
    """The jobs of the items held now, by item id, on the worker's loop."""

    def __init__(self, on_ended: Callable[[Job], None] | None = None) -> None:
        self._jobs: dict[uuid.UUID, Job] = {}
        self.on_ended = on_ended
        # Set whenever a job ends (a slot of the capacity is free again).
        self.slot_freed = asyncio.Event()
        # When the in-flight gauge was last set by a job's end (claims set it too).
        self._gauge_set_at = 0.0
        # The worker's loop, where cancellations from the lease keeper's thread are handed.
        self.loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, ctx: OpContext, item: runtime.WorkItem) -> Job:
        """A job for a claim just made. A job of an earlier claim of the same item may still
        be here: this worker was frozen past its lease, the item was handed back and it claimed
        the item again before its task heard the old claim was lost. That claim is gone (its
        token refuses every write): its task is cancelled as lost, and it gives up the entry."""
        job = Job(ctx, item)
        stale = self._jobs.get(item.id)
        if stale is not None and stale.task is not None and stale.cancel_reason is None:
            log_event(
                logger, logging.WARNING, "item_lost", **fields_of_item(stale.item), reason=RECLAIMED
            )
            stale.cancel(RECLAIMED)
        self._jobs[item.id] = job
        return job

    def _holding(self, fence: runtime.Fence) -> Job | None:
        """The job of the claim ``fence`` was minted for, if it is still held here."""
        job = self._jobs.get(fence.item_id)
        return job if job is not None and job.fence == fence else None

    def end(self, job: Job) -> None:
        """The job's task ended: its slot is free, and ``on_ended`` hears how it ended."""
        if self._jobs.get(job.item.id) is job:
            del self._jobs[job.item.id]
        if self.on_ended is not None:
            self.on_ended(job)
        # The gauge at most every tenth of a second (and when the last item ends): a drain
        # ends thousands of items a second, and a scrape reads the value every few seconds.
        now = time.monotonic()
        if not self._jobs or now - self._gauge_set_at >= 0.1:
            self._gauge_set_at = now
            IN_FLIGHT.set(len(self._jobs))
        self.slot_freed.set()

    def running(self) -> list[Job]:
        """The jobs now, read from any thread: the copy is one step under the GIL, but retry
        if the loop changed the dict meanwhile."""
        for _ in range(5):
            try:
                return list(self._jobs.values())
            except RuntimeError:  # changed size during iteration
                continue
        return []

    # -- from the lease keeper's thread ---------------------------------------------------------

    def lost_threadsafe(self, fence: runtime.Fence, reason: str) -> None:
        """The lease keeper lost this item (called on its thread): cancel it on the loop.

        A handler in a thread learns it at once (``run.cancelled``), even while the loop is
        blocked; but only after the cancellation is queued on the loop, ahead of whatever the
        handler's return queues there, so a handler that stops on the flag is cancelled, never
        completed. An async handler is cancelled when the loop next runs."""
        if not self._call_soon(self._lost, fence, reason):
            return
        job = self._holding(fence)
        if job is not None:
            job.run.cancel()

    def cancel_threadsafe(self, fence: runtime.Fence) -> None:
        """The lease renewal reported that someone asked to cancel this item (called on the
        keeper's thread): cancel its handler on the loop, as ``lost_threadsafe`` does (the flag
        only after the cancellation is queued)."""
        if not self._call_soon(self._cancel_requested, fence):
            return
        job = self._holding(fence)
        if job is not None and job.in_handler:
            job.run.cancel(CANCEL_REQUESTED)

    def lose_all_threadsafe(self, reason: str) -> int:
        """The worker fenced itself (called on the keeper's thread): cancel every job on the
        loop, writing nothing, with no line per item (the caller logs one); returns how many.
        Each handler's flag is set after the cancellations are queued, as ``lost_threadsafe``
        does."""
        if not self._call_soon(self._lose_all, reason):
            return 0
        jobs = self.running()
        for job in jobs:
            job.run.cancel(reason)
        return len(jobs)

    def lose_all_but_threadsafe(self, kept: set[runtime.Fence], reason: str) -> int:
        """As ``lose_all_threadsafe``, but the jobs of the claims in ``kept`` go on (they still
        hold: ``liveness_lock.py``); returns how many were cancelled."""
        if not self._call_soon(self._lose_all, reason, kept):
            return 0
        jobs = [job for job in self.running() if job.fence not in kept]
        for job in jobs:
            job.run.cancel(reason)
        return len(jobs)

    def _call_soon(self, callback: Callable[..., None], *args: object) -> bool:
        if self.loop is None:
            return False
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop has ended: so has every item
            return False
        return True

    def _lost(self, fence: runtime.Fence, reason: str) -> None:
        """Cancel the lost claim's task now (the token refuses its writes); a newer claim of
        the same item runs on."""
        job = self._holding(fence)
        if job is None or job.task is None:
            return
        log_event(logger, logging.WARNING, "item_lost", **fields_of_item(job.item), reason=reason)
        job.cancel(reason)

    def _lose_all(self, reason: str, kept: Set[runtime.Fence] = frozenset()) -> None:
        """Every job there is when this runs on the loop but those in ``kept``, those a claim
        started since the keeper's thread looked included. None of a new lock's yet: that lock
        is published after this was queued, and a claim under it takes a round trip, after this
        has run."""
        for job in list(self._jobs.values()):
            if job.fence in kept:
                continue
            # One already being cancelled (shutdown, a cancel request) is writing under its
            # token, which still holds: let that write end it.
            if job.task is not None and not job.task.done() and job.cancel_reason is None:
                job.cancel(reason)

    def _cancel_requested(self, fence: runtime.Fence) -> None:
        """Cancel the item's handler; its task ends the item cancelled (``Runner``)."""
        job = self._holding(fence)
        if job is None or job.task is None or job.cancel_reason:
            return  # it ended, or is being cancelled already
        if not job.in_handler:
            # Not started yet: it never will. Or its outcome is being written: that stands
            # (a retry or a hand-back of a cancel-requested item ends it cancelled).
            job.cancel_wanted = True
            return
        log_event(
            logger, logging.INFO, "item_cancel_requested", item=fence.item_id, kind=job.item.kind
        )
        job.cancel(CANCEL_REQUESTED)

    # -- the stop -------------------------------------------------------------------------------

    async def drain(self, grace_s: float, force: asyncio.Event) -> None:
        """Let the running items finish within ``grace_s`` (or until ``force``), then cancel
        the rest, each handed back by its task with a note."""
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        if tasks:
            forced = asyncio.create_task(force.wait())
            grace = asyncio.create_task(asyncio.sleep(grace_s))
            waiting = asyncio.gather(*tasks, return_exceptions=True)
            first: set[asyncio.Future[Any]] = {waiting, forced, grace}
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            forced.cancel()
            grace.cancel()
        left = [job for job in self._jobs.values() if job.task is not None]
        for job in left:
            job.cancel(SHUTDOWN)
        if left:
            log_event(logger, logging.INFO, "worker_released_on_stop", items=len(left))
            await asyncio.gather(*(job.task for job in left if job.task), return_exceptions=True)
