"""The worker: wires the parts of one ``runworker`` process and drains it on stop.

One asyncio loop per process. The item's route: the claim loop (``claiming.py``) claims and
hands each item to the runner (``running.py``), which runs it as a task of its own and hands
what finished to the completer (``completing.py``), which completes in batches; the runner's
lease keeper (``lease.py``) renews what is held, and the reporter (``reporting.py``) writes
what the handlers report of their progress. Around it: the listener (``listen.py``) wakes
the claim loop on a notice; the heartbeat (``liveness.py``) beats in memory for ``/healthz``
(``http.py``) and publishes best effort; the outbox relayer and the sweep (``sweep/``) run on
a thread of their own. The claim, the completions and the failures run on the store's async
connections on this loop; sync handlers run in a thread pool sized to the capacity (or, for
async handlers that use threads for some items, to what the connection budget leaves); async
handlers run on the loop. The lease renewals, the loop watchdog (``watchdog.py``) and the
liveness lock's checks (``liveness_lock.py``: the session whose advisory lock tells the sweep
this process lives; the claim loop claims only while it is held) run on a second loop in a
thread of their own (``offloop.py``), so an async handler that blocks this loop neither loses
the leases of what the process holds nor goes unnoticed.

Shutdown drains: stop claiming, let running items finish within the grace period, cancel the
rest and release each with a note, flush completions, stop the lease keeper's thread (only
now: it keeps the leases of what is still draining, and the liveness lock ends with it), stop
the heartbeat, mark the worker offline.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.db import close_old_connections, connections, reset_queries

from workers import timers
from workers.claiming import ClaimLoop
from workers.completing import Completer
from workers.config import LEASE_CONNECTIONS, METRICS_PORT_SPAN, WorkerSettings
from workers.http import serve
from workers.jobs import Job
from workers.listen import CHANNEL, Listener
from workers.liveness import Liveness
from workers.liveness_lock import fencing_lock, liveness_task
from workers.offloop import OffLoop
from workers.outage import Outage, fold_driver_warnings
from workers.periodic import PeriodicTask
from workers.relayer import CHANNEL as OUTBOX_CHANNEL
from workers.relayer import Relayer
from workers.reporting import Reporter
from workers.running import Runner
from workers.sweep.config import SweepSettings
from workers.sweep.sweeper import close_lock
from workers.watchdog import LoopWatchdog
from wqcore.appname import name_thread_connections
from wqcore.logs import log_event
from wqcore.store import AsyncStore, aclose_async_store, use_async_store

logger = logging.getLogger(__name__)


class Worker:
    def __init__(
        self,
        settings: WorkerSettings,
        sweep: SweepSettings | None = None,
        *,
        on_ended: Callable[[Job], None] | None = None,
    ) -> None:
        """``on_ended``: called with each item's job as its run ends here (``Job.ended`` says
        how), on the worker's loop: a drain in a site's tests reports from it."""
        self.settings = settings
        self.sweep_settings = sweep or SweepSettings()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.outage = Outage()
        self.stop_claiming = asyncio.Event()
        self.stopped = asyncio.Event()
        self.force = asyncio.Event()
        self.signals = 0
        self.store = _worker_store(settings)
        self._liveness_thread = ThreadPoolExecutor(1, thread_name_prefix="worker-liveness")
        # The outbox relay and the sweep passes: one thread, so they never overlap.
        self._maintenance_thread = ThreadPoolExecutor(
            1,
            thread_name_prefix="worker-maintenance",
            initializer=name_thread_connections,
            initargs=("sweep",),
        )
        self._handler_pool = _handler_pool(settings)
        self.liveness = _liveness(self.worker_id, settings)
        self._build_route(settings, on_ended)
        self.relayer = Relayer(self.in_maintenance_thread, self.outage)
        self.listener = Listener(
            settings.lane,
            self.claim_loop.wake,
            self.outage,
            on_notice=self.relayer.on_notice,
            channels=(CHANNEL, OUTBOX_CHANNEL),
            claims=self.claim_loop.woken,
        )
        self.http: ThreadingHTTPServer | None = None
        self._publishing: asyncio.Future[bool] | None = None
        # Set by run(): the watchdog on this worker's loop, and the keeper's thread.
        self.watchdog: LoopWatchdog | None = None
        self._off_loop: OffLoop | None = None

    def _build_route(
        self, settings: WorkerSettings, on_ended: Callable[[Job], None] | None
    ) -> None:
        """The item's route: the claim loop (claiming under the liveness lock) hands each item
        to the runner, which hands its outcome to the completer; the reporter writes what
        running handlers report (throttled, and before each outcome)."""
        self.reporter = Reporter(self.outage, interval_s=settings.progress_flush_s)
        self.completer = Completer(
            self.outage,
            flush_ms=settings.complete_flush_ms,
            flush_at=settings.claim_batch,
            reporter=self.reporter,
        )
        self.runner = Runner(
            self.worker_id,
            settings,
            self.completer,
            self.outage,
            self._handler_pool,
            on_ended,
            reporter=self.reporter,
        )
        self.liveness_lock = fencing_lock(
            self.worker_id, settings, self.outage, self.runner, self._claims_held
        )
        self.claim_loop = ClaimLoop(
            settings, self.worker_id, self.outage, self.runner, self.completer, self.liveness_lock
        )

    def _claims_held(self) -> asyncio.Event:
        # The claim loop's event, set while a liveness lock is held (the lock is made first).
        return self.claim_loop.held

    def request_stop(self) -> None:
        """First signal: drain. Second: cancel what runs now (still releasing it)."""
        self.signals += 1
        if self.signals == 1:
            log_event(
                logger,
                logging.INFO,
                "worker_stopping",
                worker=self.worker_id,
                in_flight=len(self.runner.jobs),
            )
            self.liveness.state = "draining"
            self.stop_claiming.set()
        else:
            log_event(
                logger,
                logging.INFO,
                "worker_stopping_now",
                worker=self.worker_id,
                in_flight=len(self.runner.jobs),
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
        self._start()
        # The lease keeper and the watchdog, off this loop: one thread, its own loop and store.
        lock = self.liveness_lock
        off_loop = self._off_loop = OffLoop(
            "worker-lease", self._off_loop_tasks, _lease_store, lock.close if lock else None
        )
        off_loop.start()
        background = [
            asyncio.create_task(
                timers.heartbeat_task(
                    self,
                ).run(),
                name="heartbeat",
            ),
            asyncio.create_task(self.completer.run(self.stopped), name="completions"),
            asyncio.create_task(
                timers.progress_task(
                    self,
                ).run(),
                name="progress",
            ),
            *self._extra_tasks(),
        ]
        if not self.settings.once:
            # A run to the end of the work never waits for a notice: its claim loop looks
            # again until nothing is due. No LISTEN session, and no stop waiting on its thread.
            background.append(asyncio.create_task(self.listener.run(self.stopped), name="listen"))
        try:
            await self.claim_loop.run(self.stop_claiming)
            await self.runner.jobs.drain(self.settings.shutdown_grace_s, self.force)
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
            await self._go_offline()

    def _start(self) -> None:
        """Open the store, beat once, serve the endpoint, say so; watch this loop."""
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
            kinds=",".join(s.kinds),
            lane=s.lane,
            capacity=s.capacity,
            threads=s.threads if self._handler_pool else 0,
            sweep="on" if s.sweep else "off",
            metrics_port=self.http.server_port if self.http is not None else None,
        )
        loop = asyncio.get_running_loop()
        self.runner.jobs.loop = loop
        if s.loop_blocked_warn_s > 0:
            self.watchdog = LoopWatchdog(
                loop, s.loop_blocked_warn_s, describe=self.runner.describe_on_loop
            )

    async def _go_offline(self) -> None:
        """Publish the last beat, stop the endpoint, close the store and the threads."""
        self.liveness.state = "offline"
        if self._publishing is not None:  # let a beat still in flight land first
            await asyncio.wait({self._publishing}, timeout=self.settings.heartbeat_interval_s)
        await self._publish()
        if self.http is not None:
            self.http.shutdown()
            self.http.server_close()  # shutdown() stops the loop; this closes its socket
        await aclose_async_store()
        await self._close_thread(self._liveness_thread)
        await self._close_thread(self._maintenance_thread, close_lock)
        # The signals' sync receivers ran on Django's sync thread (asend_robust): the
        # connections they opened there end with the worker too.
        await sync_to_async(connections.close_all)()
        if self._handler_pool:
            await self.runner.calls.close_connections()
            self._handler_pool.shutdown(wait=False, cancel_futures=True)
        log_event(logger, logging.INFO, "worker_offline", worker=self.worker_id)

    def _extra_tasks(self) -> list[asyncio.Task[None]]:
        """The outbox relayer, the ready ring's turns, and the sweep on its timer unless it is
        turned off here."""
        tasks = [
            asyncio.create_task(self.relayer.run(self.stopped), name="relayer"),
            asyncio.create_task(timers.ring_task(self).run(), name="ready_ring"),
        ]
        if self.settings.sweep:
            tasks.append(asyncio.create_task(timers.sweep_task(self).run(), name="sweep"))
            if self.sweep_settings.rescue_interval_s > 0:
                rescue = timers.rescue_task(self)
                tasks.append(asyncio.create_task(rescue.run(), name="rescue"))
        return tasks

    async def in_maintenance_thread[T](self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the maintenance thread (the relay's and the sweep's, one at a time)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._maintenance_thread, _closing_broken(fn))

    def _off_loop_tasks(self, stop: asyncio.Event) -> list[PeriodicTask]:
        """What runs on the keeper's thread, on its loop, until ``stop`` (that loop's event)."""
        tasks = [timers.lease_task(self, stop)]
        if self.watchdog is not None:
            tasks.append(timers.watchdog_task(self, self.watchdog, stop))
        if self.liveness_lock is not None:
            tasks.append(liveness_task(self.liveness_lock, stop, self.outage))
        return tasks

    async def heartbeat(self) -> None:
        """Beat (what /healthz reads) and publish the beat."""
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
            if self.liveness.stop_requested and self.signals < 2:
                # A forced stop: as at a second SIGTERM (drained first, if it was not).
                log_event(logger, logging.INFO, "worker_stop_requested", worker=self.worker_id)
                while self.signals < 2:
                    self.request_stop()
            elif self.liveness.drain_requested and self.signals == 0:
                log_event(logger, logging.INFO, "worker_drain_requested", worker=self.worker_id)
                self.request_stop()
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


def _worker_store(settings: WorkerSettings) -> AsyncStore:
    """The loop's store: its tenant, system and claim pools (``WorkerSettings.connections``)."""
    own = settings.connections
    return AsyncStore(
        tenant_size=own.store_tenant, system_size=own.store_system, generic_size=own.store_claim
    )


def _liveness(worker_id: str, settings: WorkerSettings) -> Liveness:
    """The heartbeat: stale (``/healthz`` 503) once ``stale_after_beats`` beats are missed."""
    return Liveness(
        worker_id,
        ",".join(settings.kinds),
        settings.lane,
        stale_after_s=settings.heartbeat_interval_s * settings.stale_after_beats,
    )


def _handler_pool(settings: WorkerSettings) -> ThreadPoolExecutor | None:
    """The threads sync handlers run in (and async ones that ``uses_threads``), if any."""
    if not settings.needs_threads:
        return None
    return ThreadPoolExecutor(settings.threads, thread_name_prefix="worker-handler")


def _lease_store() -> AsyncStore:
    """The keeper thread's store: its renewal is one system statement, so one system
    connection (``LEASE_CONNECTIONS``) and no tenant or claim pool (never opened)."""
    return AsyncStore(tenant_size=0, system_size=LEASE_CONNECTIONS, generic_size=0)


def _closing_broken[T](fn: Callable[[], T]) -> Callable[[], T]:
    """Run ``fn`` on a worker thread; a connection it broke is dropped, so the next call on
    that thread reconnects instead of failing too. Before it, as Django does before each
    request, a connection is checked (CONN_HEALTH_CHECKS): one the server ended while this
    thread was idle (an outage, a restart) is replaced, instead of failing the first call after
    the database is back and reporting a second outage; with DEBUG on, the record of queries
    starts afresh too."""

    def call() -> T:
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
