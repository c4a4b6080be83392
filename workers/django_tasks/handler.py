"""The DJANGO_TASK handler: run the Django ``@task`` function an item names.

One attempt, in order: note the start on the task's record (its worker, the time; shared
with the other tasks the claim started); import the task by its path (``loading.py``: a path
that names no task of this queue is a permanent failure naming it); send ``task_started``;
call the function under the item's context (``tenancy.current``) - an async one on the
worker's event loop, a sync one in the worker's handler threads inside its tenant's scope (one
transaction, begun by its first query: a task that raises leaves no writes behind for its
retry; an async task opens ``tenant_scope`` itself where it queries); check that what it
returned is JSON; send ``task_finished``. Then return what the task returned (the worker
completes the item with it as the item's result) or note the error on the record and raise:
``TaskRaised`` retries after the task's own policy's
delay until its attempts are spent; ``TaskFailed`` (the task raised
``workqueue.handlers.PermanentError``, or returned something that is not JSON) dead-letters at
once. The item's last error starts with the exception's class path and message, then its
traceback; the record keeps each error as Django's ``TaskError``. A task that calls
``sys.exit()`` or raises ``KeyboardInterrupt`` fails like one that raises anything else (its
error's class is ``SystemExit`` / ``KeyboardInterrupt``); the worker goes on.

The result's status is the item's: it turns SUCCESSFUL, with its return value, when the
worker's batched completion lands (one statement writes both), just after ``task_finished``
(whose ``task_result`` already says SUCCESSFUL).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import traceback
from dataclasses import dataclass
from typing import Any

import pydantic
from django.dispatch import Signal
from django.utils import timezone

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tenancy.scope import deferred_tenant_scope
from workers.django_tasks.compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    log_task_finished,
    log_task_started,
    task_finished,
    task_started,
)
from workers.django_tasks.exceptions import (
    InvalidReturnValue,
    TaskFailed,
    TaskNotRunnable,
    TaskRaised,
)
from workers.django_tasks.kind import DJANGO_TASK, DjangoTaskPayload
from workers.django_tasks.loading import queue_backend, runnable_task
from workers.django_tasks.parents import running_step
from workers.django_tasks.progress import reporting_to
from workers.django_tasks.records import Started, error_json, recorder
from workers.django_tasks.values import json_text, json_value
from workqueue import runtime
from workqueue.runtime import PermanentError, Run, handles, is_failure
from wqcore.logs import fields_of_item, log_event

logger = logging.getLogger(__name__)


# Django's own receivers of the task signals: they only log, so they may run on the event
# loop. Calling them there, instead of through ``asend_robust`` (a hop to Django's sync thread
# and back per signal, two per task) spares the task both hops (bench/tasks_drain.py measures it).
_LOGGING_ONLY = frozenset({log_task_started, log_task_finished})


async def asend(signal: Signal, sender: type, result: TaskResult[..., Any]) -> None:
    """Send a task signal from the event loop: at once when only Django's logging receivers
    listen, else as ``asend_robust`` does (sync receivers may use the ORM: not on the loop)."""
    try:
        sync_receivers, async_receivers = signal._live_receivers(sender)
        only_logging = not async_receivers and all(r in _LOGGING_ONLY for r in sync_receivers)
    except Exception:  # a private API: if it changes, fall back to the documented one
        only_logging = False
    if only_logging:
        signal.send_robust(sender, task_result=result)
    else:
        await signal.asend_robust(sender, task_result=result)


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def stored_return(value: Any) -> Any:
    """What the task returned, as the JSON values its item's result stores (Django's rules:
    tuples as lists, bytes as text), within the payload's size; ``InvalidReturnValue``
    otherwise (a failure of the task, so its record and ``task_finished`` say so)."""
    try:
        normalized = json_value(value, "return value")
        json_text(normalized, "return value")
    except (TypeError, ValueError) as exc:
        raise InvalidReturnValue(f"the task returned what cannot be stored: {exc}") from None
    return normalized


@dataclass(frozen=True)
class Outcome:
    # What the task returned, as JSON values (its item's result), when it succeeded.
    value: Any = None
    # When it failed: the error its record keeps (``error_json``), and what the handler raises
    # to the worker.
    error: str = ""
    failure: Exception | None = None


@dataclass(frozen=True)
class Target:
    """What an item names: its payload, the task, and the backend its signals come from."""

    payload: DjangoTaskPayload
    task: Task[..., Any]
    sender: type

    @classmethod
    def of(cls, item: runtime.WorkItem) -> Target:
        """Read without the database; ``TaskNotRunnable`` when the item names no task here."""
        try:
            payload = DjangoTaskPayload.model_validate(item.payload)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise TaskNotRunnable(f"payload.{where}: {first['msg']}") from None
        task = runnable_task(payload.path, payload.backend, item.priority, item.lane)
        return cls(payload, task, type(queue_backend(payload.backend)))

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.task.func)


@dataclass(frozen=True)
class Call:
    """One attempt of one task: what it runs and the result its signals carry."""

    item: runtime.WorkItem
    task: Task[..., Any]
    sender: type
    result: TaskResult[..., Any]
    retry: runtime.RetryPolicy | None

    @classmethod
    def of(cls, item: runtime.WorkItem, target: Target, started: Started) -> Call:
        payload = target.payload
        result = TaskResult(
            task=target.task,
            id=str(item.id),
            status=TaskResultStatus.RUNNING,
            enqueued_at=item.created_at,
            started_at=started.started_at,
            finished_at=None,
            last_attempted_at=started.last_attempted_at,
            args=payload.args,
            kwargs=payload.kwargs,
            backend=payload.backend,
            errors=[TaskError(**error) for error in started.errors],
            worker_ids=started.worker_ids,
        )
        retry = payload.retry.policy() if payload.retry else None
        return cls(item, target.task, target.sender, result, retry)

    def _arguments(self) -> list[Any]:
        if self.task.takes_context:
            return [TaskContext(task_result=self.result), *self.result.args]
        return list(self.result.args)

    def run_sync(self, ctx: OpContext) -> Outcome:
        """The attempt of a sync task, in a handler thread."""
        with using_context(ctx):
            task_started.send_robust(self.sender, task_result=self.result)
            try:
                # One transaction in the task's tenant, opened by its first query (a task
                # that queries nothing costs no round trip): a raise leaves no writes behind.
                with deferred_tenant_scope(ctx.org_id):
                    returned = self.task.func(*self._arguments(), **self.result.kwargs)
                    value = stored_return(returned)  # not JSON: the writes roll back
            except BaseException as exc:
                # In a handler thread whatever the task raises is its failure, sys.exit() and
                # KeyboardInterrupt too (workqueue.handlers.is_failure).
                outcome = self._failed(exc)
                # Sent from the except block: Django's log receiver logs the traceback.
                task_finished.send_robust(self.sender, task_result=self.result)
                return outcome
            outcome = self._succeeded(value)
            task_finished.send_robust(self.sender, task_result=self.result)
            return outcome

    async def run_async(self, ctx: OpContext) -> Outcome:
        """The attempt of an async task, on the worker's event loop."""
        runner = asyncio.current_task()
        with using_context(ctx):
            await asend(task_started, self.sender, self.result)
            try:
                returned = await self.task.func(*self._arguments(), **self.result.kwargs)
                value = stored_return(returned)
            except BaseException as exc:
                # SystemExit and KeyboardInterrupt too, not a cancellation (is_failure).
                if not is_failure(exc, runner):
                    raise
                outcome = self._failed(exc)
            else:
                outcome = self._succeeded(value)
            await asend(task_finished, self.sender, self.result)
            return outcome

    def _succeeded(self, value: Any) -> Outcome:
        self._finish(TaskResultStatus.SUCCESSFUL)
        object.__setattr__(self.result, "_return_value", value)
        return Outcome(value)

    def _failed(self, exc: BaseException) -> Outcome:
        path = class_path(type(exc))
        trace = "".join(traceback.format_exception(exc))
        self.result.errors.append(TaskError(exception_class_path=path, traceback=trace))
        permanent = isinstance(exc, PermanentError)
        item = self.item
        final = permanent or runtime.is_exhausted(item.attempts, item.max_attempts)
        # READY: it runs again after its delay (the signal says what the attempt leaves).
        self._finish(TaskResultStatus.FAILED if final else TaskResultStatus.READY)
        summary = f"{path}: {exc}".splitlines()[0] if str(exc) else path
        note = f"{summary}\n\n{trace}"
        failure: Exception
        if isinstance(exc, TaskFailed):
            failure = exc
        elif permanent:
            failure = TaskFailed(note)
        else:
            delay_s = None if self.retry is None else runtime.retry_delay(item.attempts, self.retry)
            failure = TaskRaised(note, delay_s=delay_s)
        return Outcome(error=error_json(path, trace), failure=failure)

    def _finish(self, status: TaskResultStatus) -> None:
        object.__setattr__(self.result, "status", status)
        if status != TaskResultStatus.READY:
            object.__setattr__(self.result, "finished_at", timezone.now())


@handles(DJANGO_TASK.name)
class DjangoTaskHandler:
    # Sync task functions run in the worker's handler threads (Run.in_thread), async ones on
    # its event loop: the worker keeps an async handler's capacity and gives it the threads
    # its connection budget leaves (workers/config.py, threads).
    uses_threads = True

    def timeout_for(self, item: runtime.WorkItem) -> float | None:
        """The task's own time limit (``OPTIONS["TIMEOUT_S"]`` or ``@time_limit``, carried by
        the item); None: the DJANGO_TASK kind's."""
        value = item.payload.get("timeout_s") if isinstance(item.payload, dict) else None
        return float(value) if isinstance(value, int | float) else None

    async def handle(self, ctx: OpContext, item: runtime.WorkItem, run: Run) -> Any:
        """Run the task once; what it returned is the item's result."""
        fence = runtime.Fence.of(item)
        notes = recorder()
        target: Target | None = None
        try:
            target = Target.of(item)
        except TaskNotRunnable as exc:
            unrunnable = exc
        sync = target is not None and not target.is_async
        # A sync task waits for a free thread before its start is noted, not in the pool.
        async with run.thread_turn() if sync else contextlib.nullcontext():
            started = await notes.start(fence)
            if started is None:
                # Another holder has it now (the lease ran out): this claim runs nothing.
                log_event(logger, logging.WARNING, "task_start_refused", **fields_of_item(item))
                return None
            if target is None:
                trace = "".join(traceback.format_exception(unrunnable))
                error = error_json(class_path(type(unrunnable)), trace)
                await notes.failed(fence, error)
                raise unrunnable
            call = Call.of(item, target, started)
            # The task's progress() and set_meta(); parent_results() and parent_counts().
            with reporting_to(run), running_step(ctx, item):
                if sync:
                    outcome = await run.in_thread(call.run_sync, ctx)
                else:
                    outcome = await call.run_async(ctx)
        if outcome.failure is None:
            return outcome.value
        if not await notes.failed(fence, outcome.error):
            log_event(logger, logging.WARNING, "task_outcome_refused", **fields_of_item(item))
        raise outcome.failure
