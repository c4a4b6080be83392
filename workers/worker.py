"""The worker: wires the parts of one ``runworker`` process and drains it on stop.

One asyncio loop per process. The parts, one job each: the listener (``listen.py``) wakes the
claim loop (``claiming.py``), which starts each item as a task (``running.py``); finished items
complete in batches (``completing.py``); the lease keeper (``lease.py``) renews what is held;
the heartbeat (``liveness.py``) beats in memory for ``/healthz`` (``http.py``) and publishes
best effort; the sweep (``sweep/``) runs on its timer unless turned off. The claim, the
completions and the failures run on the store's async connections on this loop; sync
handlers run in a thread pool sized to the capacity (or, for async handlers that use threads
for some items, to what the connection budget leaves); async handlers run on the loop. The
lease renewals and the loop watchdog (``watchdog.py``) run on a second loop in a thread of
their own (``offloop.py``), so an async handler that blocks this loop neither loses the leases
of what the process holds nor goes unnoticed.

Shutdown drains: stop claiming, let running items finish within the grace period, cancel the
rest and release each with a note, flush completions, stop the lease keeper's thread (only
now: it keeps the leases of what is still draining), stop the heartbeat, mark the worker
offline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings as django_settings
from django.db import close_old_connections, connections, reset_queries

from tenancy.contexts import OpContext
from workers.claiming import ClaimLoop
from workers.completing import Completer
from workers.config import LEASE_CONNECTIONS, METRICS_PORT_SPAN, WorkerSettings
from workers.handlers import Handler, handler_for, is_async
from workers.http import serve
from workers.lease import LeaseKeeper
from workers.listen import CHANNEL, Listener
from workers.liveness import Liveness
from workers.metrics import IN_FLIGHT
from workers.offloop import OffLoop
from workers.outage import Outage, fold_driver_warnings
from workers.periodic import PeriodicTask
from workers.relayer import CHANNEL as OUTBOX_CHANNEL
from workers.relayer import Relayer
from workers.running import CANCEL_REQUESTED, SHUTDOWN, Job, Runner
from workers.sweep.config import SweepSettings
from workers.sweep.sweeper import close_lock, sweep_once
from workers.watchdog import LoopWatchdog
from workqueue import api
from wqcore.logs import fields_of_item, log_event
from wqcore.store import AsyncStore, aclose_async_store, use_async_store

logger = logging.getLogger(__name__)


class Worker:
    def __init__(self, settings: WorkerSettings, sweep: SweepSettings | None = None) -> None:
        self.settings = settings
        self.sweep_settings = sweep or SweepSettings()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.kinds = list(settings.kinds)
        # A kind with no handler here (a release that dropped it) is claimed and released.
        self.handlers: dict[str, Handler] = {
            kind: handler for kind in self.kinds if (handler := handler_for(kind)) is not None
        }
        self.jobs: dict[uuid.UUID, Job] = {}
        # When the in-flight gauge was last set by an item's end (claims set it too).
        self._in_flight_set_at = 0.0
        self.outage = Outage()
        self.stop_claiming = asyncio.Event()
        self.stopped = asyncio.Event()
        self.force = asyncio.Event()
        self.wake = asyncio.Event()
        self.slot_freed = asyncio.Event()
        self.signals = 0
        own = settings.connections
        self.store = AsyncStore(
            tenant_size=own.store_tenant, system_size=own.store_system, generic_size=own.store_claim
        )
        self._liveness_thread = ThreadPoolExecutor(1, thread_name_prefix="worker-liveness")
        # The outbox relay and the sweep passes: one thread, so they never overlap.
        self._maintenance_thread = ThreadPoolExecutor(1, thread_name_prefix="worker-maintenance")
        self._handler_pool = (
            ThreadPoolExecutor(settings.threads, thread_name_prefix="worker-handler")
            if settings.needs_threads
            else None
        )
        self.liveness = Liveness(
            self.worker_id,
            ",".join(self.kinds),
            settings.lane,
            stale_after_s=settings.heartbeat_interval_s * settings.stale_after_beats,
        )
        self.lease_keeper = LeaseKeeper(
            api.aextend_leases,
            self._lost_threadsafe,
            on_cancel=self._cancel_threadsafe,
            lease_s=settings.lease_s,
            timeout_s=settings.renew_timeout_s,
            outage=self.outage,
        )
        self.completer = Completer(
            self.outage, flush_ms=settings.complete_flush_ms, flush_at=settings.claim_batch
        )
        self.runner = Runner(
            self.worker_id,
            self.handlers,
            self.completer,
            self.lease_keeper,
            self.outage,
            self._handler_pool,
            self._done,
            threads_hold_slots=settings.runs_sync_handlers,
            on_thread_free=self.slot_freed.set,
        )
        self.relayer = Relayer(self._in_maintenance_thread, self.outage)
        self.listener = Listener(
            settings.lane,
            self.wake,
            self.outage,
            on_notice=lambda channel, payload: self.relayer.notice(),
            channels=(CHANNEL, OUTBOX_CHANNEL),
        )
        self.claim_loop = ClaimLoop(
            settings,
            self.worker_id,
            self.outage,
            # An abandoned handler thread keeps its slot until it returns (running.py).
            in_flight=lambda: len(self.jobs) + self.runner.abandoned_slots,
            start=self._start,
            wake=self.wake,
            slot_freed=self.slot_freed,
            backlog=lambda: self.completer.backlog,
            written=self.completer.written,
        )
        self.http: Any = None
        self._publishing: asyncio.Future[bool] | None = None
        # Set by run(): this worker's loop, the watchdog on it, and the keeper's thread.
        self._loop: asyncio.AbstractEventLoop | None = None
        self.watchdog: LoopWatchdog | None = None
        self._off_loop: OffLoop | None = None

    @property
    def own_connections(self) -> int:
        """The connections this worker opens besides its handler threads."""
        return self.settings.connections.own()

    def request_stop(self) -> None:
        """First signal: drain. Second: cancel what runs now (still releasing it)."""
        self.signals += 1
        if self.signals == 1:
            log_event(
                logger,
                logging.INFO,
                "worker_stopping",
                worker=self.worker_id,
                in_flight=len(self.jobs),
            )
            self.liveness.state = "draining"
            self.stop_claiming.set()
        else:
            log_event(
                logger,
                logging.INFO,
                "worker_stopping_now",
                worker=self.worker_id,
                in_flight=len(self.jobs),
            )
            self.force.set()

    async def run(self) -> None:
        # The driver's own warnings of lost connections are this outage account's lines.
        unfold = fold_driver_warnings(self.outage)
        try:
            await self._run()
        finally:
            unfold()

    async def _run(self) -> None:
        s = self.settings
        use_async_store(self.store)
        self.liveness.beat()
        if s.metrics_port >= 0:
            self.http = serve(
                self.liveness,
                s.metrics_host,
                s.metrics_port,
                fixed=s.metrics_port_fixed,
                span=METRICS_PORT_SPAN,
            )
        log_event(
            logger,
            logging.INFO,
            "worker_started",
            worker=self.worker_id,
            kinds=",".join(self.kinds),
            lane=s.lane,
            capacity=s.capacity,
            threads=s.threads if self._handler_pool else 0,
            sweep="on" if s.sweep else "off",
            metrics_port=self.http.server_port if self.http else None,
        )
        self._loop = asyncio.get_running_loop()
        if s.loop_blocked_warn_s > 0:
            self.watchdog = LoopWatchdog(
                self._loop, s.loop_blocked_warn_s, describe=self._running_on_loop
            )
        # The lease keeper and the watchdog, off this loop: one thread, its own loop and store.
        off_loop = self._off_loop = OffLoop("worker-lease", self._off_loop_tasks, _lease_store)
        off_loop.start()
        background = [
            asyncio.create_task(self._heartbeat_task().run(), name="heartbeat"),
            asyncio.create_task(self.completer.run(self.stopped), name="completions"),
            asyncio.create_task(self.listener.run(self.stopped), name="listen"),
            *self._extra_tasks(),
        ]
        try:
            await self.claim_loop.run(self.stop_claiming)
            await self._drain()
        finally:
            self.stopped.set()
            self.completer.waiting.set()
            await asyncio.gather(*background, return_exceptions=True)
            try:
                await self.completer.flush()  # nothing finished is left uncompleted
            finally:
                # Only now: every item has ended (drained, or cancelled and released) and its
                # completion is written, so no lease is left to keep. Closes its connection.
                await off_loop.stop()
            self.liveness.state = "offline"
            if self._publishing is not None:  # let a beat still in flight land first
                await asyncio.wait({self._publishing}, timeout=self.settings.heartbeat_interval_s)
            await self._publish()
            if self.http:
                self.http.shutdown()
            await aclose_async_store()
            await self._close_thread(self._liveness_thread)
            await self._close_thread(self._maintenance_thread, close_lock)
            if self._handler_pool:
                self._handler_pool.shutdown(wait=False, cancel_futures=True)
            log_event(logger, logging.INFO, "worker_offline", worker=self.worker_id)

    def _extra_tasks(self) -> list[asyncio.Task[None]]:
        """The outbox relayer, and the sweep on its timer unless it is turned off here."""
        tasks = [asyncio.create_task(self.relayer.run(self.stopped), name="relayer")]
        if self.settings.sweep:
            tasks.append(asyncio.create_task(self._sweep_task().run(), name="sweep"))
        return tasks

    async def _in_maintenance_thread(self, fn: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._maintenance_thread, _closing_broken(fn))

    # -- timers, each on the periodic primitive ------------------------------------------------

    def _heartbeat_task(self) -> PeriodicTask:
        s = self.settings
        return PeriodicTask(
            name="heartbeat",
            operation=self._heartbeat,
            interval_s=s.heartbeat_interval_s,
            mode="fixed_rate",
            # The beat is in memory; the publish inside is bounded on its own (_publish).
            timeout_s=None,
            stop=self.stopped,
            on_error="continue",
        )

    def _off_loop_tasks(self, stop: asyncio.Event) -> list[PeriodicTask]:
        """What runs on the keeper's thread, on its loop, until ``stop`` (that loop's event)."""
        tasks = [self._lease_task(stop)]
        if self.watchdog is not None:
            tasks.append(self._watchdog_task(self.watchdog, stop))
        return tasks

    def _lease_task(self, stop: asyncio.Event) -> PeriodicTask:
        keeper = self.lease_keeper
        return PeriodicTask(
            name="lease_keeper",
            operation=keeper.renew_once,
            interval_s=keeper.interval_s,
            mode="result_aware",
            # A failed renewal is retried sooner: half the lease is the whole budget.
            delay_for=lambda renewed: keeper.interval_s if renewed else keeper.retry_s,
            error_delay_s=keeper.retry_s,
            # Each renewal is bounded by its own timeout inside renew_once.
            timeout_s=None,
            stop=stop,
            on_error="continue",
        )

    def _watchdog_task(self, watchdog: LoopWatchdog, stop: asyncio.Event) -> PeriodicTask:
        return PeriodicTask(
            name="loop_watchdog",
            operation=watchdog.check,
            interval_s=watchdog.interval_s,
            mode="fixed_rate",
            timeout_s=None,  # never waits: it reads two clocks and sends a probe
            stop=stop,
            on_error="continue",
        )

    def _sweep_task(self) -> PeriodicTask:
        sweep = self.sweep_settings
        return PeriodicTask(
            name="sweep",
            operation=lambda: self._in_maintenance_thread(
                lambda: sweep_once(sweep, outage=self.outage)
            ),
            interval_s=sweep.interval_s,
            mode="fixed_delay",
            timeout_s=sweep.timeout_s,
            stop=self.stopped,
            on_error="continue",
            # The lock attempt meeting a server that went away is the outage's to log.
            report=lambda exc: self.outage.failed("sweep", exc),
        )

    async def _heartbeat(self) -> None:
        self.liveness.beat()
        await self._publish()

    async def _publish(self) -> None:
        """Publish the heartbeat, best effort, within one heartbeat interval: a failure or a
        timeout is counted and reported, never raised; while a publish hangs (the database is
        away) the next beats skip theirs instead of queueing behind it."""
        if self._publishing is not None and not self._publishing.done():
            return
        loop = asyncio.get_running_loop()
        started = self.outage.now()
        self._publishing = loop.run_in_executor(self._liveness_thread, self.liveness.publish)
        try:
            published = await asyncio.wait_for(
                asyncio.shield(self._publishing), self.settings.heartbeat_interval_s
            )
        except TimeoutError as exc:
            self.outage.failed("heartbeat", exc)
            return
        if published:
            self.outage.ok(started)
            return
        error = self.liveness.last_error
        if error is not None and not self.outage.failed("heartbeat", error):
            log_event(
                logger,
                logging.WARNING,
                "liveness_publish_failed",
                worker=self.worker_id,
                error=str(error),
            )

    async def _close_thread(self, executor: ThreadPoolExecutor, *more: Any) -> None:
        """Close what the thread opened (its Django connections, and ``more`` closers run on
        it), then the thread."""
        loop = asyncio.get_running_loop()
        for close in (connections.close_all, *more):
            await loop.run_in_executor(executor, close)
        executor.shutdown(wait=True)

    # -- items ----------------------------------------------------------------------------------

    def _start(self, ctx: OpContext, item: api.WorkItem) -> None:
        job = Job(ctx, item)
        self.jobs[item.id] = job
        self.runner.start(job)

    def _done(self, item_id: uuid.UUID) -> None:
        self.jobs.pop(item_id, None)
        # The gauge at most every tenth of a second (and when the last item ends): a drain
        # ends thousands of items a second, and a scrape reads the value every few seconds.
        now = time.monotonic()
        if not self.jobs or now - self._in_flight_set_at >= 0.1:
            self._in_flight_set_at = now
            IN_FLIGHT.set(len(self.jobs))
        self.slot_freed.set()

    def _lost_threadsafe(self, item_id: uuid.UUID, reason: str) -> None:
        """The lease keeper lost this item (called on its thread): cancel it on this loop.

        A handler in a thread learns it at once (``run.cancelled``), even while this loop is
        blocked; but only after the cancellation is queued on the loop, ahead of whatever the
        handler's return queues there, so a handler that stops on the flag is cancelled, never
        completed. An async handler is cancelled when the loop next runs."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._lost, item_id, reason)
        except RuntimeError:  # the loop has ended: so has every item
            return
        job = self.jobs.get(item_id)
        if job is not None:
            job.run.cancel()

    def _cancel_threadsafe(self, item_id: uuid.UUID) -> None:
        """The lease renewal reported that someone asked to cancel this item (called on the
        keeper's thread): cancel its handler on this loop, as ``_lost_threadsafe`` does (the
        flag only after the cancellation is queued)."""
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._cancel_requested, item_id)
        except RuntimeError:  # the loop has ended: so has every item
            return
        job = self.jobs.get(item_id)
        if job is not None and job.in_handler:
            job.run.cancel(CANCEL_REQUESTED)

    def _cancel_requested(self, item_id: uuid.UUID) -> None:
        """Cancel the item's handler; its task ends the item cancelled (``Runner``)."""
        job = self.jobs.get(item_id)
        if job is None or job.task is None or job.cancel_reason:
            return  # it ended, or is being cancelled already
        if not job.in_handler:
            # Not started yet: it never will. Or its outcome is being written: that stands
            # (a retry or a hand-back of a cancel-requested item ends it cancelled).
            job.cancel_wanted = True
            return
        log_event(logger, logging.INFO, "item_cancel_requested", item=item_id, kind=job.item.kind)
        job.cancel(CANCEL_REQUESTED)

    def _running_on_loop(self) -> dict[str, str]:
        """For the watchdog, on its thread while this loop is blocked: the item whose task the
        loop is running now, or else every item whose handler runs on the loop."""
        assert self._loop is not None
        current = asyncio.current_task(self._loop)
        jobs = _snapshot(self.jobs)
        on_loop = [job for job in jobs if current is not None and job.task is current]
        if on_loop:
            return {"items": f"{on_loop[0].item.id}:{on_loop[0].item.kind}"}
        on_loop = [
            job
            for job in jobs
            if (handler := self.handlers.get(job.item.kind)) and is_async(handler)
        ]
        shown = ",".join(f"{job.item.id}:{job.item.kind}" for job in on_loop[:10])
        # Not an item's own task (the worker's, or a task a handler started): say which.
        found = {"items": shown or "-", "task": current.get_name() if current is not None else "-"}
        if len(on_loop) > 10:
            found["more"] = str(len(on_loop) - 10)
        return found

    def _lost(self, item_id: uuid.UUID, reason: str) -> None:
        """The lease keeper lost this item: cancel its task now (the token refuses its writes)."""
        job = self.jobs.get(item_id)
        if job is None or job.task is None:
            return
        log_event(logger, logging.WARNING, "item_lost", **fields_of_item(job.item), reason=reason)
        job.cancel(reason)

    # -- shutdown -------------------------------------------------------------------------------

    async def _drain(self) -> None:
        tasks = [job.task for job in self.jobs.values() if job.task is not None]
        if tasks:
            force = asyncio.create_task(self.force.wait())
            grace = asyncio.create_task(asyncio.sleep(self.settings.shutdown_grace_s))
            waiting = asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.wait({waiting, force, grace}, return_when=asyncio.FIRST_COMPLETED)
            force.cancel()
            grace.cancel()
        left = [job for job in self.jobs.values() if job.task is not None]
        for job in left:
            job.cancel(SHUTDOWN)
        if left:
            log_event(logger, logging.INFO, "worker_released_on_stop", items=len(left))
            await asyncio.gather(*(job.task for job in left), return_exceptions=True)  # type: ignore[misc]


def _lease_store() -> AsyncStore:
    """The keeper thread's store: its renewal is one system statement, so one system
    connection (``LEASE_CONNECTIONS``) and no tenant or claim pool (never opened)."""
    return AsyncStore(tenant_size=0, system_size=LEASE_CONNECTIONS, generic_size=0)


def _snapshot(jobs: dict[uuid.UUID, Job]) -> list[Job]:
    """The jobs now, read from another thread: the copy is one step under the GIL, but retry
    if the loop changed the dict meanwhile."""
    for _ in range(5):
        try:
            return list(jobs.values())
        except RuntimeError:  # changed size during iteration
            continue
    return []


def _closing_broken(fn: Any) -> Any:
    """Run ``fn`` on a worker thread; a connection it broke is dropped, so the next call on
    that thread reconnects instead of failing too. Before it, as Django does before each
    request, a connection is checked (CONN_HEALTH_CHECKS): one the server ended while this
    thread was idle (an outage, a restart) is replaced, instead of failing the first call after
    the database is back and reporting a second outage; with DEBUG on, the record of queries
    starts afresh too."""

    def call() -> Any:
        close_old_connections()
        if django_settings.DEBUG:
            reset_queries()
        try:
            return fn()
        except Exception:
            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
            raise

    return call
