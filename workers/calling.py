"""Calling a handler: on the loop (async) or in the handler threads (sync), within its time
limit, and what it returned made the JSON its item stores (``runtime.result_json``: in the
handler's thread for a sync one, so a large result is written off the loop); and the threads
that cannot be stopped.

A sync handler's thread cannot be stopped: cancelled, it is *abandoned*. Its item is settled
and no longer held (its late writes to the queue are refused by the claim token), its run's
``cancelled`` flag is set, and the thread runs on to its end, keeping its slot of the worker's
capacity until it returns (``abandoned``, ``workqueue_worker_abandoned_threads``), so the
worker never runs more threads than its connection budget has room for.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.db import connections, reset_queries

from tenancy.contexts import OpContext
from workers.jobs import LIVENESS_LOST, TIMEOUT, Job
from workers.metrics import ABANDONED_THREADS, TIMED_OUT
from workers.outage import Outage
from workqueue.runtime import Handler, Run, WorkItem, is_async, result_json
from wqcore.logs import log_event

logger = logging.getLogger(__name__)


# The outages a handler thread has seen: its worker's account and its ``began`` at the
# thread's last call.
_SEEN = threading.local()


def _in_thread[T](
    fn: Callable[..., T], threads: set[int], outage: Outage | None = None
) -> Callable[..., T]:
    """Run ``fn`` and drop a connection that broke, so the next call in this thread reconnects.
    With DEBUG on, each call starts a fresh record of its queries, as Django's requests do
    (a worker's threads never see ``request_started``; the record would grow to its cap).
    ``threads`` collects the threads that ran a call: each may hold connections of its own.
    After an outage began (``outage``) the thread's first call checks its connections first."""

    def call(*args: Any, **kwargs: Any) -> T:
        threads.add(threading.get_ident())
        if outage is not None and getattr(_SEEN, "began", None) != (id(outage), outage.began):
            _SEEN.began = (id(outage), outage.began)
            _drop_dead_connections()
        if settings.DEBUG:
            reset_queries()
        try:
            return fn(*args, **kwargs)
        except Exception:
            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
            raise

    return call


def _drop_dead_connections() -> None:
    """Close this thread's connections that no longer answer (one round trip each): the
    database went away since they were last used (a restart, a failover), and a handler's
    first statement would fail on one, spending its item's attempt. Django checks so before a
    request (``CONN_HEALTH_CHECKS``); a worker's threads see no request, and check only after
    an outage, not before every item."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.is_usable():
            conn.close()


def _handle_sync(handler: Handler, ctx: OpContext, item: WorkItem, run: Run) -> str | None:
    """A sync handler's call, in a handler thread: its result as JSON text (None: none), or
    ``UnstorableResult``."""
    return result_json(handler.handle(ctx, item, run))


class HandlerCalls:
    """Calls handlers for the runner, and counts the threads abandoned while they ran on."""

    def __init__(
        self,
        pool: ThreadPoolExecutor | None,
        threads: int,
        *,
        threads_hold_slots: bool,
        on_thread_free: Callable[[], None],
        outage: Outage | None = None,
    ) -> None:
        self.pool = pool
        # The worker's account of outages: after one, each thread checks its connections.
        self.outage = outage
        # One turn per handler thread (Run.thread_turn), for handlers that use_threads.
        self.turns = asyncio.Semaphore(threads) if pool is not None else None
        # Handler threads still running after their item was cancelled (they cannot be
        # stopped). With one thread per slot (``threads_hold_slots``: a sync handler runs
        # here) each keeps its slot until it returns (``abandoned_slots``).
        self.abandoned = 0
        self.threads_hold_slots = threads_hold_slots
        self.on_thread_free = on_thread_free
        # The pool's threads that ran a call (every call goes through ``_in_thread``): the
        # threads it started, each with the Django connections its handlers opened.
        self.started: set[int] = set()

    @property
    def abandoned_slots(self) -> int:
        """Slots of the capacity that abandoned threads still hold."""
        return self.abandoned if self.threads_hold_slots else 0

    def lend_threads(self, job: Job) -> None:
        """Give the job's run the pool, for a handler that ``uses_threads`` (``Run.in_thread``)."""
        if self.pool is not None:
            job.run.threads, job.run.turns = self._in_pool, self.turns

    async def call_within(self, handler: Handler, job: Job, limit_s: float | None) -> str | None:
        """Run the handler, cancelled past ``limit_s``: then ``TimeoutError`` (the item's
        failure, retried like any other). A ``TimeoutError`` the handler raises itself, before
        its limit, is its own failure, passed on as it is. Returns its result as JSON text
        (None: none); one that cannot be stored raises ``UnstorableResult``, a failure too."""
        if limit_s is None:
            return await self._call(handler, job)
        scope = asyncio.timeout(limit_s)
        try:
            async with scope:
                return await self._call(handler, job)
        except TimeoutError:
            if not scope.expired():
                raise
            job.run.cancel(TIMEOUT)
            TIMED_OUT.labels(job.item.kind).inc()
            log_event(
                logger,
                logging.WARNING,
                "item_timed_out",
                item=job.item.id,
                kind=job.item.kind,
                limit_s=limit_s,
                attempt=job.item.attempts,
            )
            raise TimeoutError(
                f"the handler ran past its time limit of {limit_s:g} s and was cancelled"
            ) from None

    async def _call(self, handler: Handler, job: Job) -> str | None:
        if is_async(handler):
            return result_json(await handler.handle(job.ctx, job.item, job.run))  # type: ignore[misc]
        assert self.pool is not None
        # run_in_executor does not carry context variables over: the thread gets a copy of this
        # task's, so its lines name the item too.
        call = functools.partial(
            contextvars.copy_context().run,
            _in_thread(_handle_sync, self.started, self.outage),
            handler,
            job.ctx,
            job.item,
            job.run,
        )
        future = self.pool.submit(call)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            job.run.cancel()  # the thread goes on; the flag asks the handler to stop
            # A fence cancels every handler at once, and its one line counts them (fenced=N).
            quiet = job.cancel_reason == LIVENESS_LOST
            self._abandon(future, {"item": job.item.id, "kind": job.item.kind}, quiet=quiet)
            raise

    async def _in_pool(self, call: Callable[[], Any]) -> Any:
        """``call()`` in the handler pool (``Run.in_thread``), as a sync handler runs."""
        assert self.pool is not None
        future = self.pool.submit(_in_thread(call, self.started, self.outage))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self._abandon(future, {"call": "in_thread"})
            raise

    async def close_connections(self, wait_s: float = 2.0) -> None:
        """Close the Django connections the pool's threads opened, each on its own thread (a
        connection belongs to the thread that opened it): one call per idle started thread,
        held at a barrier until every one has its own. ``runworker`` ends its process anyway;
        a worker run inside another process (a test's drain) must not leave them open. A
        thread still running an abandoned handler keeps its connection."""
        idle = len(self.started) - self.abandoned
        if self.pool is None or idle <= 0:
            return
        barrier = threading.Barrier(idle)

        def close_then_wait() -> None:
            connections.close_all()
            try:
                barrier.wait(wait_s)
            except threading.BrokenBarrierError:
                pass

        loop = asyncio.get_running_loop()
        calls = [loop.run_in_executor(self.pool, close_then_wait) for _ in range(idle)]
        await asyncio.wait(calls, timeout=wait_s + 1)

    def _abandon(self, future: Future[Any], what: dict[str, Any], *, quiet: bool = False) -> None:
        """A cancelled run's thread that is still running: count it until it returns (it
        cannot be stopped; whatever it writes to the queue later is refused by the token).
        ``quiet``: counted (the gauge) without a line of its own, when and as it returns."""
        if future.done() or future.cancel():  # it ended, or never started: nothing runs on
            return
        self.abandoned += 1
        ABANDONED_THREADS.set(self.abandoned)
        if not quiet:
            log_event(
                logger,
                logging.WARNING,
                "handler_thread_abandoned",
                **what,
                abandoned=self.abandoned,
            )
        loop = asyncio.get_running_loop()

        def returned(_: Any) -> None:
            try:
                loop.call_soon_threadsafe(self._thread_returned, what, quiet)
            except RuntimeError:  # the worker's loop has ended
                pass

        future.add_done_callback(returned)

    def _thread_returned(self, what: dict[str, Any], quiet: bool) -> None:
        self.abandoned -= 1
        ABANDONED_THREADS.set(self.abandoned)
        if not quiet:
            log_event(
                logger,
                logging.INFO,
                "handler_thread_returned",
                **what,
                abandoned=self.abandoned,
            )
        self.on_thread_free()
