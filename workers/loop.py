"""The worker loop: claim while a slot is free, run each item as its own task, settle it.

One asyncio loop per process. Database calls leave the loop for a few single-thread executors
(each thread holds its own connection, so nothing reconnects per item): one claims, one settles
(completions in batches, failures, releases), one renews leases, one publishes liveness. Sync
handlers run in a thread pool sized to the capacity; async handlers run on the loop.

The loop wakes on ``LISTEN work_available`` (a notice names the lane) and falls back to polling
every ``poll_interval_ms``. Shutdown drains: stop claiming, let running items finish within the
grace period, cancel the rest and release each with a note, flush completions, stop the
heartbeat, mark the worker offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import connections
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from project.observability import exporting
from tenancy.contexts import AppType, OpContext, new_request_context
from workers.config import WorkerSettings
from workers.handlers import Handler, PermanentError, Run, handler_for, is_async
from workers.hot_path import HotPath
from workers.http import serve
from workers.lease import Held, LeaseKeeper
from workers.liveness import Liveness
from workers.metrics import CANCELLED, IN_FLIGHT, RELEASED, for_kind
from workers.periodic import PeriodicTask
from workqueue import api
from workqueue.exceptions import Conflict
from workqueue.metrics import STALE_WRITES
from workqueue.models import Status as ItemStatus
from workqueue.models import WorkItem

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("workqueue.worker")

SHUTDOWN = "shutdown"
_NO_SPAN = contextlib.nullcontext(trace.INVALID_SPAN)


@dataclass
class Job:
    ctx: OpContext
    item: WorkItem
    run: Run = field(default_factory=Run)
    task: asyncio.Task[None] | None = None
    # Why the task was cancelled: lost to another holder, self-fenced, or shutdown.
    cancel_reason: str | None = None

    @property
    def held(self) -> Held:
        return (self.item.org_id, self.item.id, self.item.claim_token)  # type: ignore[return-value]


def _links(traceparent: str | None) -> list[Link]:
    """A link to the enqueuing request's span: the item outlives its request, so never a parent."""
    if not traceparent:
        return []
    carrier = {"traceparent": traceparent}
    span_context = trace.get_current_span(
        TraceContextTextMapPropagator().extract(carrier)
    ).get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


def _in_thread[T](fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn`` and drop a connection that broke, so the next call in this thread reconnects."""

    def call(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except Exception:
            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
            raise

    return call


class Worker:
    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.kinds = list(settings.kinds)
        # A kind with no handler here (a release that dropped it) is claimed and released.
        self.handlers: dict[str, Handler] = {
            kind: handler for kind in self.kinds if (handler := handler_for(kind)) is not None
        }
        self.jobs: dict[uuid.UUID, Job] = {}
        self.completions: list[tuple[Held, str]] = []
        self.stop_claiming = asyncio.Event()
        self.stopped = asyncio.Event()
        self.force = asyncio.Event()
        self.wake = asyncio.Event()
        self.slot_freed = asyncio.Event()
        self.completion_waiting = asyncio.Event()
        self.signals = 0
        self._executors = {
            name: ThreadPoolExecutor(1, thread_name_prefix=f"worker-{name}")
            for name in ("settle", "liveness")
        }
        self._handler_pool = (
            ThreadPoolExecutor(settings.capacity, thread_name_prefix="worker-handler")
            if settings.needs_threads
            else None
        )
        self.liveness = Liveness(
            self.worker_id,
            ",".join(self.kinds),
            settings.lane,
            stale_after_s=settings.heartbeat_interval_s * settings.stale_after_beats,
        )
        self.hot = HotPath()
        self.lease_keeper = LeaseKeeper(
            self.hot.extend_leases,
            self._lost,
            lease_s=settings.lease_s,
            timeout_s=settings.renew_timeout_s,
        )
        self.http: Any = None

    # -- database calls, off the loop ---------------------------------------------------------

    async def _db[R](self, executor: str, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        loop = asyncio.get_running_loop()
        call = functools.partial(_in_thread(fn), *args, **kwargs)
        return await loop.run_in_executor(self._executors[executor], call)

    # -- the loop -----------------------------------------------------------------------------

    def request_stop(self) -> None:
        """First signal: drain. Second: cancel what runs now (still releasing it)."""
        self.signals += 1
        if self.signals == 1:
            logger.info("worker_stopping worker=%s in_flight=%d", self.worker_id, len(self.jobs))
            self.liveness.state = "draining"
            self.stop_claiming.set()
            self.wake.set()
        else:
            logger.info(
                "worker_stopping_now worker=%s in_flight=%d", self.worker_id, len(self.jobs)
            )
            self.force.set()

    async def run(self) -> None:
        s = self.settings
        self.liveness.beat()
        if s.metrics_port >= 0:
            self.http = serve(self.liveness, s.metrics_host, s.metrics_port)
        logger.info(
            "worker_started worker=%s kinds=%s lane=%s capacity=%d metrics_port=%s",
            self.worker_id,
            ",".join(self.kinds),
            s.lane,
            s.capacity,
            self.http.server_port if self.http else "-",
        )
        heartbeat = PeriodicTask(
            name="heartbeat",
            operation=self._heartbeat,
            interval_s=s.heartbeat_interval_s,
            mode="fixed_rate",
            timeout_s=s.heartbeat_interval_s,
            stop=self.stopped,
            on_error="continue",
        )
        background = [
            asyncio.create_task(heartbeat.run(), name="heartbeat"),
            asyncio.create_task(self.lease_keeper.run(self.stopped), name="lease-keeper"),
            asyncio.create_task(self._flush_completions(), name="completions"),
            asyncio.create_task(self._listen(), name="listen"),
        ]
        try:
            await self._claim_loop()
            await self._drain()
        finally:
            self.stopped.set()
            self.completion_waiting.set()
            await asyncio.gather(*background, return_exceptions=True)
            await self._flush_once()  # nothing finished is left uncompleted
            self.liveness.state = "offline"
            await self._db("liveness", self.liveness.publish)
            if self.http:
                self.http.shutdown()
            await self.hot.close()
            for executor in self._executors.values():
                executor.submit(connections.close_all).result()
                executor.shutdown(wait=True)
            if self._handler_pool:
                self._handler_pool.shutdown(wait=False, cancel_futures=True)
            logger.info("worker_offline worker=%s", self.worker_id)

    async def _heartbeat(self) -> None:
        self.liveness.beat()
        await self._db("liveness", self.liveness.publish)

    async def _listen(self) -> None:
        """Wake the claim loop on each ``work_available`` notice for this lane."""
        params = connections["default"].get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        while not self.stopped.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
                    await conn.execute("LISTEN work_available")
                    self.wake.set()  # anything enqueued while we were not listening
                    gen = conn.notifies()
                    stop = asyncio.create_task(self.stopped.wait())
                    try:
                        while True:
                            nxt = asyncio.ensure_future(anext(gen))
                            done, _ = await asyncio.wait(
                                {nxt, stop}, return_when=asyncio.FIRST_COMPLETED
                            )
                            if stop in done:
                                nxt.cancel()
                                return
                            notice = nxt.result()
                            if notice.payload in (self.settings.lane, "*"):
                                self.wake.set()
                    finally:
                        stop.cancel()
            except (psycopg.Error, OSError, StopAsyncIteration) as exc:
                # The poll fallback keeps claiming meanwhile; reconnect after a pause.
                logger.warning("listen_failed error=%s", exc)
                try:
                    await asyncio.wait_for(self.stopped.wait(), 1.0)
                except TimeoutError:
                    pass

    async def _claim_loop(self) -> None:
        s = self.settings
        poll_s = s.poll_interval_ms / 1000
        while not self.stop_claiming.is_set():
            free = s.capacity - len(self.jobs)
            if free <= 0:
                self.slot_freed.clear()
                await self.slot_freed.wait()
                continue
            # Cleared before the claim: a notice that lands during the claim wakes the next one.
            self.wake.clear()
            rctx = new_request_context(AppType.WORKER)
            try:
                claimed, orphans = await self.hot.claim(
                    rctx, s.lane, self.kinds, self.worker_id, s.lease_s, min(free, s.claim_batch)
                )
                if orphans:
                    await self.hot.fail_orphans(orphans)
            except Exception:
                logger.exception("claim_failed worker=%s", self.worker_id)
                claimed = []
                await self._pause(poll_s)
                continue
            for ctx, item in claimed:
                self._start(ctx, item)
            if claimed:
                for kind, n in Counter(item.kind for _, item in claimed).items():
                    for_kind(kind).claimed.inc(n)
                IN_FLIGHT.set(len(self.jobs))
                continue
            if s.once:
                if not self.jobs:
                    return
                self.slot_freed.clear()
                await self.slot_freed.wait()
                continue
            await self._pause(poll_s)

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.wake.wait(), seconds)
        except TimeoutError:
            pass

    # -- one item -----------------------------------------------------------------------------

    def _start(self, ctx: OpContext, item: WorkItem) -> None:
        job = Job(ctx, item)
        self.jobs[item.id] = job
        self.lease_keeper.hold(job.held)
        job.task = asyncio.create_task(self._run_job(job), context=None)

    def _lost(self, item_id: uuid.UUID, reason: str) -> None:
        """The lease keeper lost this item: cancel its task now (the token refuses its writes)."""
        job = self.jobs.get(item_id)
        if job is None or job.task is None:
            return
        logger.warning("item_lost item=%s reason=%s", item_id, reason)
        job.cancel_reason = reason
        job.run.cancel()
        job.task.cancel()

    async def _run_job(self, job: Job) -> None:
        item = job.item
        handler = self.handlers.get(item.kind)
        try:
            if handler is None:
                await self._release(job, f"worker {self.worker_id} does not handle {item.kind}")
                RELEASED.labels(item.kind, "unhandled").inc()
                return
            with self._span(item) as span:
                started = time.perf_counter()
                try:
                    await self._handle(handler, job)
                except asyncio.CancelledError:
                    span.set_status(Status(StatusCode.ERROR, "cancelled"))
                    raise
                except Exception as exc:
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                    self.lease_keeper.drop(item.id)
                    await self._fail(job, exc)
                    return
                finally:
                    for_kind(item.kind).handler_seconds.observe(time.perf_counter() - started)
            self.lease_keeper.drop(item.id)
            self.completions.append((job.held, item.kind))
            self.completion_waiting.set()
        except asyncio.CancelledError:
            reason = job.cancel_reason or SHUTDOWN
            CANCELLED.labels(item.kind, reason).inc()
            if reason == SHUTDOWN:
                await self._release(job, f"worker {self.worker_id} shut down before it finished")
                RELEASED.labels(item.kind, SHUTDOWN).inc()
            # A lost item has another holder (or soon will): there is nothing to write.
        except Exception:
            logger.exception("item_settle_failed item=%s", item.id)
        finally:
            self.lease_keeper.drop(item.id)
            self.jobs.pop(item.id, None)
            self.slot_freed.set()

    def _span(self, item: WorkItem) -> Any:
        """The item's span, linked to the enqueuing trace; a no-op when no span is exported."""
        if not exporting():
            return _NO_SPAN
        return tracer.start_as_current_span(
            f"work {item.kind}",
            context=otel_context.Context(),
            kind=SpanKind.CONSUMER,
            links=_links(item.traceparent),
            attributes={
                "workqueue.item_id": str(item.id),
                "workqueue.kind": item.kind,
                "workqueue.lane": item.lane,
                "workqueue.attempt": item.attempts,
                "workqueue.org_id": str(item.org_id),
            },
        )

    async def _handle(self, handler: Handler, job: Job) -> None:
        if is_async(handler):
            await handler.handle(job.ctx, job.item, job.run)  # type: ignore[misc]
            return
        loop = asyncio.get_running_loop()
        assert self._handler_pool is not None
        try:
            await loop.run_in_executor(
                self._handler_pool, _in_thread(handler.handle), job.ctx, job.item, job.run
            )
        except asyncio.CancelledError:
            job.run.cancel()  # the thread goes on; the flag asks the handler to stop
            raise

    async def _fail(self, job: Job, exc: Exception) -> None:
        item = job.item
        permanent = isinstance(exc, PermanentError) or job.run.side_effect
        error = f"{type(exc).__name__}: {exc}"
        if job.run.side_effect and not isinstance(exc, PermanentError):
            error = f"failed after a side effect, not retried automatically: {error}"
        try:
            failed = await self._db("settle", api.fail, job.ctx, item, error, permanent=permanent)
        except Conflict:
            logger.warning("stale_fail_refused item=%s", item.id)
            return
        if failed.status == ItemStatus.PENDING:
            for_kind(item.kind).retried.inc()
        logger.info(
            "item_failed item=%s kind=%s attempt=%d status=%s error=%s",
            item.id,
            item.kind,
            item.attempts,
            failed.status,
            type(exc).__name__,
        )

    async def _release(self, job: Job, note: str) -> None:
        try:
            await self._db("settle", api.release, job.ctx, job.item, note)
        except Conflict:
            logger.warning("stale_release_refused item=%s", job.item.id)

    # -- completions, in batches --------------------------------------------------------------

    async def _flush_completions(self) -> None:
        delay_s = self.settings.complete_flush_ms / 1000
        while not self.stopped.is_set():
            await self.completion_waiting.wait()
            self.completion_waiting.clear()
            if delay_s and not self.stopped.is_set():
                await asyncio.sleep(delay_s)  # let more completions share the statement
            await self._flush_once()

    async def _flush_once(self) -> None:
        while self.completions:
            batch, self.completions = self.completions, []
            try:
                done = await self.hot.complete_many([held for held, _ in batch])
            except Exception:
                logger.exception("complete_failed items=%d", len(batch))
                self.completions[:0] = batch  # kept: retried by the next flush
                await asyncio.sleep(0.5)
                if self.stopped.is_set():
                    return
                continue
            completed: Counter[str] = Counter()
            for held, kind in batch:
                if held[1] in done:
                    completed[kind] += 1
                else:
                    STALE_WRITES.labels("complete").inc()
                    logger.warning("stale_complete_refused item=%s", held[1])
            for kind, n in completed.items():
                for_kind(kind).completed.inc(n)
            IN_FLIGHT.set(len(self.jobs))

    # -- shutdown -----------------------------------------------------------------------------

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
            job.cancel_reason = SHUTDOWN
            job.run.cancel()
            job.task.cancel()  # type: ignore[union-attr]
        if left:
            logger.info("worker_released_on_stop items=%d", len(left))
            await asyncio.gather(*(job.task for job in left), return_exceptions=True)  # type: ignore[misc]
