"""Running one item: its span, its handler, and what the handler's outcome does to the item.

The item's route through a worker: the claim loop (``claiming.py``) hands each claimed item to
``Runner.start``, which makes its job (``jobs.py``), holds its lease (``lease.py``) and runs it
as a task of its own: the handler (``calling.py``) under the context the claim returned, inside
a span linked (never parented) to the enqueuing request's trace. It returns: the runner hands
the item and its result (JSON text, made by ``calling.py``) to the completer
(``completing.py``), which writes completions in batches; a result that cannot be stored fails
the item for good, as a ``PermanentError`` would, with a message saying what to return. It raises:
the failure is classified (``handlers.failure_of``: a ``PermanentError``, or any error after
``run.mark_side_effect()``, dead-letters at once; anything else retries, ``SystemExit`` and
``KeyboardInterrupt`` included: ``handlers.is_failure``) and settled here. It is cancelled: on
shutdown the item is released with a note; when the lease was lost there is nothing to write
(another holder has it, or soon will); when someone asked to cancel it (the lease renewal
reported the request) it ends ``cancelled`` under its claim token, or a dead letter if it had
marked a side effect. It runs past its time limit (``Kind.time_limit_s``, or the handler's
``timeout_for(item)``): it is cancelled and fails as ``TimeoutError``, through the retry path
like any failure. It snoozes (``run.snooze``): the item is deferred, its attempt given back.
However it ends, its job says how (``Job.ended``) and the job ends (``Jobs.end``). What the
handler reported (``run.progress``, ``run.set_meta``) is written by the reporter
(``reporting.py``) while it runs, and its last report before any outcome of an item still held.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings as django_settings
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tenancy.contexts import OpContext
from workers.calling import HandlerCalls
from workers.completing import Completer
from workers.config import WorkerSettings
from workers.jobs import CANCEL_REQUESTED, SHUTDOWN, Ended, Job, Jobs
from workers.lease import LeaseKeeper
from workers.metrics import CANCELLED, RELEASED, for_kind
from workers.outage import Outage
from workers.reporting import Reporter
from workqueue import runtime
from workqueue.runtime import Handler, handler_for, is_async, is_failure
from wqcore.conf import wq_settings
from wqcore.logs import bind_item, log_event
from wqcore.tracing import exporting

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("workqueue.worker")

_NO_SPAN = contextlib.nullcontext(trace.INVALID_SPAN)


def logs_traceback() -> bool:
    """Whether a handler's failure logs its traceback: where someone reads it (stderr is a
    terminal, or DEBUG is on: the lines after the event), and in JSON (one field, ``exc``, of
    the event's one line); a text log in a pipe keeps one line per event, the traceback stored
    with the attempt."""
    try:
        terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        terminal = False
    return terminal or bool(django_settings.DEBUG) or wq_settings.LOG_FORMAT == "json"


def _links(traceparent: str | None) -> list[Link]:
    """A link to the enqueuing request's span: the item outlives its request, so never a parent."""
    if not traceparent:
        return []
    carrier = {"traceparent": traceparent}
    span_context = trace.get_current_span(
        TraceContextTextMapPropagator().extract(carrier)
    ).get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


def span_for(item: runtime.WorkItem) -> Any:
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


def first_line(text: str) -> str:
    """The first line of an error (a dead letter's log line carries it, not the traceback)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:500]


class Runner:
    """Runs claimed items: one task each, settling each by its outcome."""

    def __init__(
        self,
        worker_id: str,
        settings: WorkerSettings,
        completer: Completer,
        outage: Outage,
        handler_pool: ThreadPoolExecutor | None,
        on_ended: Callable[[Job], None] | None = None,
        reporter: Reporter | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.completer = completer
        self.outage = outage
        # A kind with no handler here (a release that dropped it) is claimed and released.
        self.handlers: dict[str, Handler] = {
            kind: handler for kind in settings.kinds if (handler := handler_for(kind)) is not None
        }
        self.jobs = Jobs(on_ended)
        assert settings.renew_timeout_s is not None
        self.leases = LeaseKeeper(
            runtime.aextend_leases,
            self.jobs.lost_threadsafe,
            on_cancel=self.jobs.cancel_threadsafe,
            lease_s=settings.lease_s,
            timeout_s=settings.renew_timeout_s,
            outage=outage,
        )
        # Writes what the handlers report (run.progress, run.set_meta), throttled; the
        # completer writes a finished item's last report, the runner any other's.
        if reporter is None:
            reporter = Reporter(outage, interval_s=settings.progress_flush_s)
        self.reporter = reporter
        reporter.jobs = self.jobs
        self.calls = HandlerCalls(
            handler_pool,
            settings.threads,
            threads_hold_slots=settings.runs_sync_handlers,
            on_thread_free=self.jobs.slot_freed.set,
            outage=outage,
        )

    def describe_on_loop(self) -> dict[str, str]:
        """For the watchdog, on its thread while the loop is blocked: the item whose task the
        loop is running now, or else every item whose handler runs on the loop."""
        loop = self.jobs.loop
        assert loop is not None
        current = asyncio.current_task(loop)
        jobs = self.jobs.running()
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

    def in_flight(self) -> int:
        """Slots of the capacity taken: the items held, and abandoned threads still running."""
        return len(self.jobs) + self.calls.abandoned_slots

    def start(self, ctx: OpContext, item: runtime.WorkItem, *, now: bool = False) -> None:
        """Run a claimed item: hold its lease, and start its task. ``now``: the task's first
        step runs here, up to its first await (an async handler's first line runs before this
        returns), not a pass of the loop later: for the item a woken worker claimed alone,
        whose handler is what the claim was for. Not for a batch: its next claim goes out
        first, and its handlers run while it is on its way."""
        job = self.jobs.add(ctx, item)
        self.leases.hold(job.fence)
        self.calls.lend_threads(job)
        run = self._run(job)
        if now:
            job.task = asyncio.eager_task_factory(asyncio.get_running_loop(), run, context=None)
        else:
            job.task = asyncio.create_task(run, context=None)

    async def _run(self, job: Job) -> None:
        # The task that runs it, known from its first step (a task started ``now`` is returned
        # to ``start`` only after that step).
        job.task = asyncio.current_task()
        # Every line logged while the item runs names it (wqcore.logs.ItemFilter): this task's
        # own context (create_task copied it), and the copy its handler's thread runs in. Set
        # here, in this coroutine. And the handler's failure is caught here too, in the task's
        # own coroutine, never in one it awaits: asyncio throws what a handler's thread raised
        # into this one, and a GeneratorExit thrown in closes the coroutines it awaits first,
        # which then must not await again (handlers.is_failure).
        bind_item(job.item)
        item = job.item
        handler = self.handlers.get(item.kind)
        try:
            if handler is None or job.cancel_wanted:
                await self._not_run(job, handler)
                return
            with span_for(item) as span:
                started = time.perf_counter()
                try:
                    job.in_handler = True
                    limit_s = runtime.time_limit(handler, item)
                    result = await self.calls.call_within(handler, job, limit_s)
                except asyncio.CancelledError:
                    span.set_status(Status(StatusCode.ERROR, "cancelled"))
                    raise
                except BaseException as exc:
                    # SystemExit and KeyboardInterrupt too: left to reach the task's step,
                    # asyncio would raise them out of the event loop and end the process with
                    # the item still claimed (handlers.is_failure says why none is a signal).
                    if not is_failure(exc, job.task):
                        raise
                    await self._raised(job, exc, span)
                    return
                finally:
                    job.in_handler = False
                    for_kind(item.kind).handler_seconds.observe(time.perf_counter() - started)
            await self._returned(job, result)
        except asyncio.CancelledError:
            await self._cancelled(job)
        except Exception as exc:
            # A settle that failed (the database is away): the lease runs out and the sweep
            # hands the item back, its attempt counted.
            job.ended = Ended.UNSETTLED
            if not self.outage.failed("settle", exc):
                log_event(logger, logging.ERROR, "item_settle_failed", exc_info=True)
        finally:
            self.leases.drop(job.fence)
            self.jobs.end(job)

    async def _not_run(self, job: Job, handler: Handler | None) -> None:
        """A kind this worker does not handle is handed back; one someone asked to cancel
        before its handler started ends cancelled."""
        if handler is None:
            await self._release(job, f"worker {self.worker_id} does not handle {job.item.kind}")
            RELEASED.labels(job.item.kind, "unhandled").inc()
        else:
            await self._end_cancelled(job)

    async def _raised(self, job: Job, exc: BaseException, span: Any) -> None:
        """The handler raised: a snooze defers the item, anything else fails it."""
        self.leases.drop(job.fence)
        await self._flush_final(job)
        if job.run.snoozed_s is not None:
            await self._snooze(job)
            return
        job.exception = exc
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        await self._fail(job, exc)

    async def _returned(self, job: Job, result: str | None) -> None:
        """The handler returned: its completion (with its result, JSON text) is queued, unless
        it snoozed."""
        if job.run.snoozed_s is not None:  # it swallowed Snoozed: still snoozed
            self.leases.drop(job.fence)
            await self._flush_final(job)
            await self._snooze(job)
            return
        # No lease to keep from here (``_run`` drops it before anything else runs).
        self.completer.add(job.fence, job.item.kind, result, job.run.report)
        job.ended = Ended.DONE

    async def _flush_final(self, job: Job) -> None:
        """The item's last report, before an outcome the runner writes."""
        await self.reporter.flush_final([(job.fence, job.run.report, job.item.kind)])

    async def _cancelled(self, job: Job) -> None:
        """Its task was cancelled: hand it back on shutdown, end it as a cancel request asks,
        or, lost to another holder, write nothing."""
        reason = job.cancel_reason or SHUTDOWN
        CANCELLED.labels(job.item.kind, reason).inc()
        if reason in (SHUTDOWN, CANCEL_REQUESTED):  # still held: its last report first
            await self._flush_final(job)
        if reason == SHUTDOWN:
            await self._release(job, f"worker {self.worker_id} shut down before it finished")
            RELEASED.labels(job.item.kind, SHUTDOWN).inc()
        elif reason == CANCEL_REQUESTED:
            await self._end_cancelled(job)
        else:
            job.ended = Ended.LOST

    async def _snooze(self, job: Job) -> None:
        """Defer the item by what the handler asked (``run.snooze``), its attempt given back."""
        item, delay_s = job.item, job.run.snoozed_s or 0.0
        try:
            await runtime.adefer(job.ctx, item, delay_s, note=f"snoozed for {delay_s:g} s")
        except runtime.Conflict:
            job.ended = Ended.LOST
            log_event(logger, logging.WARNING, "stale_snooze_refused", item=item.id)
            return
        job.ended = Ended.SNOOZED
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
                await runtime.afail(
                    job.ctx,
                    item,
                    "cancelled as asked after a side effect, not retried automatically",
                    permanent=True,
                )
                job.ended = Ended.DEAD_LETTERED
            else:
                await runtime.acancel_held(job.ctx, item, "cancelled as asked while it ran")
                job.ended = Ended.CANCELLED
        except runtime.Conflict:
            job.ended = Ended.LOST
            log_event(logger, logging.WARNING, "stale_cancel_refused", item=item.id)
            return
        except Exception as exc:
            # The database is away: the lease runs out and the sweep ends it cancelled.
            job.ended = Ended.UNSETTLED
            if not self.outage.failed("cancel", exc):
                log_event(logger, logging.ERROR, "item_cancel_failed", exc_info=True, item=item.id)
            return
        log_event(
            logger, logging.INFO, "item_cancelled", item=item.id, kind=item.kind, outcome=job.ended
        )

    async def _fail(self, job: Job, exc: BaseException) -> None:
        item = job.item
        error, permanent = runtime.failure_of(exc, job.run)
        trace = "".join(traceback.format_exception(exc))
        shown = exc if logs_traceback() else None
        # A handler with its own retry policy says how long to wait (RetryableError.delay_s).
        delay_s = getattr(exc, "delay_s", None)
        try:
            failed = await runtime.afail(
                job.ctx, item, error, permanent=permanent, delay_s=delay_s, traceback=trace
            )
        except runtime.Conflict:
            job.ended = Ended.LOST
            log_event(logger, logging.WARNING, "stale_fail_refused")
            return
        if failed.status == runtime.Status.PENDING:
            job.ended = Ended.RETRIED
            for_kind(item.kind).retried.inc()
            log_event(
                logger,
                logging.INFO,
                "item_retried",
                exc_info=shown,
                error=first_line(error),
                available_at=failed.available_at.isoformat(),
            )
        else:
            job.ended = Ended.DEAD_LETTERED
            # WARNING, with the error's first line: what an error tracker's logging hook sees.
            log_event(
                logger,
                logging.WARNING,
                "item_dead_lettered",
                exc_info=shown,
                error=first_line(error),
            )
        await runtime.asend_settled(failed, failed.last_error, exc, trace)

    async def _release(self, job: Job, note: str) -> None:
        """Hand the item back; if that fails, its lease runs out and the sweep hands it back."""
        try:
            await runtime.arelease(job.ctx, job.item, note)
            job.ended = Ended.RELEASED
        except runtime.Conflict:
            job.ended = Ended.LOST
            log_event(logger, logging.WARNING, "stale_release_refused")
        except Exception as exc:
            job.ended = Ended.UNSETTLED
            if not self.outage.failed("release", exc):
                log_event(logger, logging.ERROR, "item_release_failed", exc_info=True)
