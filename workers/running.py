"""Running one item: its span, its handler, and what the handler's outcome does to the item.

Each claimed item runs as its own task: the handler under the context the claim returned,
inside a span linked (never parented) to the enqueuing request's trace. It returns: the item
is queued for batched completion. It raises: the failure is classified (a ``PermanentError``,
or any error after ``run.mark_side_effect()``, dead-letters at once; anything else retries,
``SystemExit`` and ``KeyboardInterrupt`` included: ``handlers.is_failure``).
It is cancelled: on shutdown the item is released with a note; when the lease was lost there
is nothing to write (another holder has it, or soon will); when someone asked to cancel it (the
lease renewal reported the request) it ends ``cancelled`` under its claim token, or a dead
letter if it had marked a side effect. It runs past its time limit (``Kind.time_limit_s``, or
the handler's ``timeout_for(item)``): it is cancelled and fails as ``TimeoutError``, through
the retry path like any failure. It snoozes (``run.snooze``): the item is deferred, its attempt
given back.

A sync handler's thread cannot be stopped: cancelled, it is *abandoned*. Its item is settled
and no longer held (its late writes to the queue are refused by the claim token), its run's
``cancelled`` flag is set, and the thread runs on to its end, keeping its slot of the worker's
capacity until it returns (``abandoned``, ``workqueue_worker_abandoned_threads``), so the
worker never runs more threads than its connection budget has room for.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connections, reset_queries
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tenancy.contexts import OpContext
from workers.completing import Completer
from workers.handlers import Handler, PermanentError, Run, is_async, is_failure
from workers.lease import LeaseKeeper
from workers.metrics import ABANDONED_THREADS, CANCELLED, RELEASED, TIMED_OUT, for_kind
from workers.outage import Outage
from workqueue import api
from wqcore.logs import bind_item, log_event
from wqcore.tracing import exporting

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("workqueue.worker")

SHUTDOWN = "shutdown"
# Someone asked to cancel the item (its lease renewal said so).
CANCEL_REQUESTED = "cancel_requested"
# The handler ran past its time limit.
TIMEOUT = "timeout"
_NO_SPAN = contextlib.nullcontext(trace.INVALID_SPAN)


@dataclass
class Job:
    ctx: OpContext
    item: api.WorkItem
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
    fence: api.Fence = field(init=False)

    def __post_init__(self) -> None:
        self.fence = api.Fence.of(self.item)

    def cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        self.run.cancel(reason)
        if self.task is not None:
            self.task.cancel()


def _links(traceparent: str | None) -> list[Link]:
    """A link to the enqueuing request's span: the item outlives its request, so never a parent."""
    if not traceparent:
        return []
    carrier = {"traceparent": traceparent}
    span_context = trace.get_current_span(
        TraceContextTextMapPropagator().extract(carrier)
    ).get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


def span_for(item: api.WorkItem) -> Any:
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


def _in_thread[T](fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn`` and drop a connection that broke, so the next call in this thread reconnects.
    With DEBUG on, each call starts a fresh record of its queries, as Django's requests do
    (a worker's threads never see ``request_started``; the record would grow to its cap)."""

    def call(*args: Any, **kwargs: Any) -> T:
        if settings.DEBUG:
            reset_queries()
        try:
            return fn(*args, **kwargs)
        except Exception:
            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
            raise

    return call


def time_limit(handler: Handler, item: api.WorkItem) -> float | None:
    """How long ``handler`` may run ``item``, in seconds (None: no limit): the handler's own
    ``timeout_for(item)`` when it has one and it names a limit (the ``django.tasks`` handler:
    a task's own), else the kind's (``Kind.time_limit_s``)."""
    own = getattr(handler, "timeout_for", None)
    if own is not None:
        limit = own(item)
        if limit is not None:
            return float(limit) if limit > 0 else None
    return api.get_kind(item.kind).time_limit_s()


def first_line(text: str) -> str:
    """The first line of an error (a dead letter's log line carries it, not the traceback)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:500]


def failure_of(exc: BaseException, run: Run) -> tuple[str, bool]:
    """The error to store and whether it is permanent: a ``PermanentError``, or any failure
    after the handler marked a side effect (a human decides whether repeating it is safe)."""
    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if run.side_effect and not isinstance(exc, PermanentError):
        return f"failed after a side effect, not retried automatically: {error}", True
    return error, isinstance(exc, PermanentError)


class Runner:
    """Runs claimed items: one task each, settling each by its outcome."""

    def __init__(
        self,
        worker_id: str,
        handlers: dict[str, Handler],
        completer: Completer,
        lease_keeper: LeaseKeeper,
        outage: Outage,
        handler_pool: ThreadPoolExecutor | None,
        on_done: Callable[[uuid.UUID], None],
        *,
        threads_hold_slots: bool = False,
        on_thread_free: Callable[[], None] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.handlers = handlers
        self.completer = completer
        self.lease_keeper = lease_keeper
        self.outage = outage
        self.handler_pool = handler_pool
        self.on_done = on_done
        # One turn per handler thread (Run.thread_turn), for handlers that use_threads
        # (_max_workers: the size ThreadPoolExecutor was made with).
        self.turns = asyncio.Semaphore(handler_pool._max_workers) if handler_pool else None
        # Handler threads still running after their item was cancelled (they cannot be
        # stopped). With one thread per slot (``threads_hold_slots``: a sync handler runs
        # here) each keeps its slot until it returns (``abandoned_slots``).
        self.abandoned = 0
        self.threads_hold_slots = threads_hold_slots
        self.on_thread_free = on_thread_free

    @property
    def abandoned_slots(self) -> int:
        """Slots of the capacity that abandoned threads still hold."""
        return self.abandoned if self.threads_hold_slots else 0

    def start(self, job: Job) -> None:
        self.lease_keeper.hold(job.fence)
        if self.handler_pool is not None:
            job.run.threads, job.run.turns = self._in_pool, self.turns
        job.task = asyncio.create_task(self._run(job), context=None)

    async def _run(self, job: Job) -> None:
        # Every line logged while the item runs names it (wqcore.logs.ItemFilter): this task's
        # own context (create_task copied it), and the copy its handler's thread runs in. Set
        # here, in this coroutine: no wrapper coroutine may stand between the task and the
        # handler's call (handlers.is_failure tells a GeneratorExit by the task running it).
        bind_item(job.item)
        item = job.item
        handler = self.handlers.get(item.kind)
        try:
            if handler is None:
                await self._release(job, f"worker {self.worker_id} does not handle {item.kind}")
                RELEASED.labels(item.kind, "unhandled").inc()
                return
            if job.cancel_wanted:
                await self._end_cancelled(job)
                return
            with span_for(item) as span:
                started = time.perf_counter()
                try:
                    job.in_handler = True
                    await self._handle_within(handler, job, time_limit(handler, item))
                except asyncio.CancelledError:
                    span.set_status(Status(StatusCode.ERROR, "cancelled"))
                    raise
                except BaseException as exc:
                    # SystemExit and KeyboardInterrupt too: left to reach the task's step,
                    # asyncio would raise them out of the event loop and end the process with
                    # the item still claimed (handlers.is_failure says why none is a signal).
                    if not is_failure(exc, job.task):
                        raise
                    self.lease_keeper.drop(item.id)
                    if job.run.snoozed_s is not None:
                        await self._snooze(job)
                        return
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                    await self._fail(job, exc)
                    return
                finally:
                    job.in_handler = False
                    for_kind(item.kind).handler_seconds.observe(time.perf_counter() - started)
            if job.run.snoozed_s is not None:  # it swallowed Snoozed: still snoozed
                self.lease_keeper.drop(item.id)
                await self._snooze(job)
                return
            # No lease to keep from here (the finally below drops it before anything else runs).
            self.completer.add(job.fence, item.kind)
        except asyncio.CancelledError:
            reason = job.cancel_reason or SHUTDOWN
            CANCELLED.labels(item.kind, reason).inc()
            if reason == SHUTDOWN:
                await self._release(job, f"worker {self.worker_id} shut down before it finished")
                RELEASED.labels(item.kind, SHUTDOWN).inc()
            elif reason == CANCEL_REQUESTED:
                await self._end_cancelled(job)
        except Exception as exc:
            # A settle that failed (the database is away): the lease runs out and the sweep
            # hands the item back, its attempt counted.
            if not self.outage.failed("settle", exc):
                log_event(logger, logging.ERROR, "item_settle_failed", exc_info=True)
        finally:
            self.lease_keeper.drop(item.id)
            self.on_done(item.id)

    async def _in_pool(self, call: Callable[[], Any]) -> Any:
        """``call()`` in the handler pool (``Run.in_thread``), as a sync handler runs."""
        assert self.handler_pool is not None
        future = self.handler_pool.submit(_in_thread(call))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self._abandon(future, {"call": "in_thread"})
            raise

    async def _handle_within(self, handler: Handler, job: Job, limit_s: float | None) -> None:
        """Run the handler, cancelled past ``limit_s``: then ``TimeoutError`` (the item's
        failure, retried like any other). A ``TimeoutError`` the handler raises itself, before
        its limit, is its own failure, passed on as it is."""
        if limit_s is None:
            await self._handle(handler, job)
            return
        scope = asyncio.timeout(limit_s)
        try:
            async with scope:
                await self._handle(handler, job)
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

    async def _handle(self, handler: Handler, job: Job) -> None:
        if is_async(handler):
            await handler.handle(job.ctx, job.item, job.run)  # type: ignore[misc]
            return
        assert self.handler_pool is not None
        # run_in_executor does not carry context variables over: the thread gets a copy of this
        # task's, so its lines name the item too.
        call = functools.partial(
            contextvars.copy_context().run,
            _in_thread(handler.handle),
            job.ctx,
            job.item,
            job.run,
        )
        future = self.handler_pool.submit(call)
        try:
            await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            job.run.cancel()  # the thread goes on; the flag asks the handler to stop
            self._abandon(future, {"item": job.item.id, "kind": job.item.kind})
            raise

    def _abandon(self, future: Any, what: dict[str, Any]) -> None:
        """A cancelled run's thread that is still running: count it until it returns (it
        cannot be stopped; whatever it writes to the queue later is refused by the token)."""
        if future.done() or future.cancel():  # it ended, or never started: nothing runs on
            return
        self.abandoned += 1
        ABANDONED_THREADS.set(self.abandoned)
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
                loop.call_soon_threadsafe(self._thread_returned, what)
            except RuntimeError:  # the worker's loop has ended
                pass

        future.add_done_callback(returned)

    def _thread_returned(self, what: dict[str, Any]) -> None:
        self.abandoned -= 1
        ABANDONED_THREADS.set(self.abandoned)
        log_event(
            logger,
            logging.INFO,
            "handler_thread_returned",
            **what,
            abandoned=self.abandoned,
        )
        if self.on_thread_free is not None:
            self.on_thread_free()

    async def _snooze(self, job: Job) -> None:
        """Defer the item by what the handler asked (``run.snooze``), its attempt given back."""
        item, delay_s = job.item, job.run.snoozed_s or 0.0
        try:
            await api.adefer(job.ctx, item, delay_s, note=f"snoozed for {delay_s:g} s")
        except api.Conflict:
            log_event(logger, logging.WARNING, "stale_snooze_refused", item=item.id)
            return
        RELEASED.labels(item.kind, "snoozed").inc()
        log_event(
            logger, logging.INFO, "item_snoozed", item=item.id, kind=item.kind, delay_s=delay_s
        )

    async def _end_cancelled(self, job: Job) -> None:
        """End the item as its cancel request asked, under its claim token: ``cancelled``, or
        a dead letter when the handler had marked a side effect (a human decides)."""
        item = job.item
        try:
            if job.run.side_effect:
                await api.afail(
                    job.ctx,
                    item,
                    "cancelled as asked after a side effect, not retried automatically",
                    permanent=True,
                )
                outcome = "dead_lettered"
            else:
                await api.acancel_held(job.ctx, item, "cancelled as asked while it ran")
                outcome = "cancelled"
        except api.Conflict:
            log_event(logger, logging.WARNING, "stale_cancel_refused", item=item.id)
            return
        except Exception as exc:
            # The database is away: the lease runs out and the sweep ends it cancelled.
            if not self.outage.failed("cancel", exc):
                log_event(logger, logging.ERROR, "item_cancel_failed", exc_info=True, item=item.id)
            return
        log_event(
            logger, logging.INFO, "item_cancelled", item=item.id, kind=item.kind, outcome=outcome
        )

    async def _fail(self, job: Job, exc: BaseException) -> None:
        item = job.item
        error, permanent = failure_of(exc, job.run)
        trace = "".join(traceback.format_exception(exc))
        # A handler with its own retry policy says how long to wait (RetryableError.delay_s).
        delay_s = getattr(exc, "delay_s", None)
        try:
            failed = await api.afail(
                job.ctx, item, error, permanent=permanent, delay_s=delay_s, traceback=trace
            )
        except api.Conflict:
            log_event(logger, logging.WARNING, "stale_fail_refused")
            return
        if failed.status == api.Status.PENDING:
            for_kind(item.kind).retried.inc()
            log_event(
                logger,
                logging.INFO,
                "item_retried",
                error=first_line(error),
                available_at=failed.available_at.isoformat() if failed.available_at else None,
            )
        else:
            # WARNING, with the error's first line: what an error tracker's logging hook sees.
            log_event(logger, logging.WARNING, "item_dead_lettered", error=first_line(error))
        await api.asend_settled(failed, failed.last_error, exc, trace)

    async def _release(self, job: Job, note: str) -> None:
        """Hand the item back; if that fails, its lease runs out and the sweep hands it back."""
        try:
            await api.arelease(job.ctx, job.item, note)
        except api.Conflict:
            log_event(logger, logging.WARNING, "stale_release_refused")
        except Exception as exc:
            if not self.outage.failed("release", exc):
                log_event(logger, logging.ERROR, "item_release_failed", exc_info=True)
