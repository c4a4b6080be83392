"""What a handler is, what it may raise, and which handler runs which kind.

A handler gets the ``OpContext`` the claim returned and the claimed item; it never builds a
context. It returns to complete the item (what it returns, JSON, is the item's result, stored by
the statement that completes it: ``workqueue/results.py``; a result that cannot be stored
dead-letters the item, naming what to change), or raises:

- ``RetryableError`` (or any other exception): the item is retried after a growing delay, and
  dead-lettered once its attempts are spent;
- ``PermanentError``: dead-lettered at once.

``SystemExit`` and ``KeyboardInterrupt`` too are the item's failure, retried like any other
error (``is_failure`` says which exceptions are): a script turned handler that calls
``sys.exit()`` ends its run, not the worker.

Once it calls ``run.mark_side_effect()`` (an e-mail went out, a card was charged), a failure is
never retried automatically: the item is dead-lettered for a human, who knows whether repeating
the effect is safe: a retry would repeat it.

``run.progress(done, total, note=...)`` and ``run.set_meta({...})`` say how far it got and
what it found: recorded in memory at once, written to the item by the worker, throttled
(``workqueue/progress.py``).

``run.dry_run`` is True when an operator dry-runs a dead letter (``triage/dry_run.py``): the
handler's database writes are rolled back and its mail kept, but whatever else leaves the
process (an HTTP call, a broker) would happen: skip it when the flag is set, or send it through
the outbox.

``run.snooze(seconds)`` is not a failure: the item goes back for later without spending an
attempt (for "not yet" answers, a rate-limited service's "retry after").

A handler runs at most its kind's ``timeout`` (``Kind.timeout``, else ``WORKQUEUE
["KIND_TIMEOUT_S"]``; a handler class may narrow it per item with ``timeout_for(item)``): past
it, it is cancelled and the item fails as ``TimeoutError`` (retried, or a dead letter once its
attempts are spent or it marked a side effect). Someone may cancel a running item
(``workqueue.api.cancel``): the worker learns it at its next lease renewal and cancels the
handler; the item ends ``cancelled`` (a dead letter if it marked a side effect).

Handlers may be ``async def handle`` (cancelled for real when the worker loses the lease, the
item is cancelled or times out, or the worker shuts down) or plain ``def handle`` (run in a
thread, which Python cannot stop: cancellation sets ``run.cancelled``, which a long handler
should check; see ``workers/README.md`` for what happens to a thread that never checks). An
async handler that runs some of its work in threads (the ``django.tasks`` handler, for sync
task functions) says so with ``uses_threads = True`` and hands that work to ``await
run.in_thread(fn, ...)`` (inside ``async with run.thread_turn()`` when it should not begin
before a thread is free): the worker keeps the capacity of an async handler and gives it the
threads its connection budget leaves. Whatever a cancelled handler
writes to the queue later is refused by the claim token.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, NoReturn, Protocol

from tenancy.contexts import OpContext
from workqueue.exceptions import UnstorableResult
from workqueue.kinds import get_kind
from workqueue.models import WorkItem
from workqueue.progress import Report
from workqueue.settle import MAX_RETRY_DELAY_S


class HandlerError(Exception):
    """Base of the errors a handler raises on purpose. Do not raise directly."""


class RetryableError(HandlerError):
    """This attempt failed; a later one may succeed.

    ``delay_s`` (optional) is how long to wait before the next attempt, for a handler that
    applies its own retry policy; by default the kind's policy decides.
    """

    def __init__(self, *args: object, delay_s: float | None = None) -> None:
        super().__init__(*args)
        self.delay_s = delay_s


class PermanentError(HandlerError):
    """No attempt will succeed (bad input, a refused address): dead-letter at once."""


class Snoozed(HandlerError):
    """Raised by ``run.snooze``: not a failure; the item goes back for later, its attempt
    given back."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(f"snoozed for {delay_s:g} s")
        self.delay_s = delay_s


class InThread(Protocol):
    """Runs ``call()`` in the worker's handler threads and hands back what it returned."""

    def __call__[T](self, call: Callable[[], T], /) -> Awaitable[T]: ...


# Taken only by a run's first report (``Run._report``).
_FIRST_REPORT = threading.Lock()


class Run:
    """What a running handler can tell the worker, and learn from it."""

    def __init__(self) -> None:
        # Set from the worker's loop or the lease keeper's thread, read by the handler (a plain
        # flag: nothing waits on it).
        self._cancelled = False
        self.side_effect = False
        # Set by ``snooze``: the worker defers the item by this much (seconds), whatever the
        # handler does after (even swallowing ``Snoozed``).
        self.snoozed_s: float | None = None
        # Why the worker cancelled this run (``running.CANCEL_REASONS``), once it has.
        self.cancel_reason: str | None = None
        # Set by the worker for a handler that ``uses_threads``: runs a call in its pool, and
        # the pool's turns (one per thread).
        self.threads: InThread | None = None
        self.turns: asyncio.Semaphore | None = None
        # What it reported (``progress``, ``set_meta``), until the worker writes it: made by
        # the first report, so a run that reports nothing costs its worker nothing for it.
        self.report: Report | None = None
        # True when the run is a dry run (``workqueue/triage/dry_run.py``): its database writes
        # are rolled back and its mail kept; anything else that leaves the process (HTTP, a
        # broker) the dry run cannot stop, so a handler that does such a thing checks this.
        self.dry_run = False

    def mark_side_effect(self) -> None:
        """From here on, a failure is dead-lettered, never retried automatically."""
        self.side_effect = True

    def snooze(self, seconds: float) -> NoReturn:
        """Not yet (a rate-limited service said "later"): put the item back to run after
        ``seconds`` (0 to a day) without spending an attempt, and stop this run here (raises
        ``Snoozed``; the worker defers the item under its claim token). A value out of range
        raises ``ValueError`` naming ``seconds``, and the run goes on."""
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise ValueError(f"seconds: must be a number, not {type(seconds).__name__}")
        delay = float(seconds)
        if not 0.0 <= delay <= MAX_RETRY_DELAY_S:  # also refuses NaN
            raise ValueError(f"seconds: must be 0 to {MAX_RETRY_DELAY_S:g} (got {seconds})")
        self.snoozed_s = delay
        raise Snoozed(delay)

    def progress(self, done: float, total: float | None = None, *, note: str = "") -> None:
        """Say how far the run got: ``done`` of ``total`` (None: not known), with a short
        ``note``; each call replaces the last. Cheap enough for every row of a loop: it only
        records the value (no I/O), which the worker writes to the item at most every
        ``WORKQUEUE["WORKER_PROGRESS_FLUSH_S"]`` and once more before its outcome. A count
        that is negative, not finite or past 2**53, a ``total`` below ``done``, a note that is
        not text or longer than 200 characters raises ``ValueError`` naming it; nothing is
        recorded (``workqueue/progress.py``)."""
        self._report().progress(done, total, note)

    def set_meta(self, meta: Mapping[str, Any]) -> None:
        """Merge ``meta`` (text keys, JSON values) into the item's metadata, key by key,
        written as ``progress`` is. What one run sets, merged, is at most 16 KiB as JSON; a
        value that is not JSON or a larger total raises ``ValueError`` naming ``meta``, and
        nothing is recorded."""
        self._report().merge_meta(meta)

    def _report(self) -> Report:
        report = self.report
        if report is None:
            with _FIRST_REPORT:  # a handler's threads may report at once: one report
                if self.report is None:
                    self.report = Report()
                report = self.report
        return report

    @property
    def cancelled(self) -> bool:
        """True once the worker lost the item (lease), someone cancelled it, its time limit
        passed, or the worker is stopping: stop and return."""
        return self._cancelled

    def cancel(self, reason: str | None = None) -> None:
        if reason is not None and self.cancel_reason is None:
            self.cancel_reason = reason
        self._cancelled = True

    @contextlib.asynccontextmanager
    async def thread_turn(self) -> AsyncIterator[None]:
        """Wait for a free handler thread and keep its turn for the block, so work that should
        not begin before a thread is free (its start is recorded) waits here rather than in
        the pool's queue. Without a pool there is nothing to wait for."""
        if self.turns is None:
            yield
            return
        async with self.turns:
            yield

    async def in_thread[T](self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run the sync ``fn(*args)`` in the worker's handler threads, with the caller's
        context variables. Cancelling the caller sets ``cancelled``; the thread runs on."""
        if self.threads is None:
            raise RuntimeError("this handler has no threads: set uses_threads = True on its class")
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        try:
            return await self.threads(call)
        except asyncio.CancelledError:
            self.cancel()
            raise


class Handler(Protocol):
    """Runs one kind of work. ``handle`` may be sync or async; what it returns (or its
    coroutine does) is the item's result: JSON, or None for none."""

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> Awaitable[object] | object: ...


_HANDLERS: dict[str, type[Handler]] = {}


def handles[C: type[Handler]](kind: str) -> Callable[[C], C]:
    """Class decorator: this handler runs ``kind``."""

    def register(cls: C) -> C:
        if _HANDLERS.get(kind, cls) is not cls:
            raise ValueError(f"kind {kind} already has the handler {_HANDLERS[kind].__name__}")
        _HANDLERS[kind] = cls
        return cls

    return register


def handler_for(kind: str) -> Handler | None:
    """A new handler for ``kind``, or None when no worker package handles it."""
    cls = _HANDLERS.get(kind)
    return cls() if cls is not None else None


def handled_kinds() -> list[str]:
    return sorted(_HANDLERS)


@contextlib.contextmanager
def handled_by(kind: str, cls: type[Handler]) -> Iterator[None]:
    """``kind`` run by ``cls`` in the block, by its own handler again after: a test's fault
    put around a site's handler (``workers.testing.faults``)."""
    before = _HANDLERS.get(kind)
    _HANDLERS[kind] = cls
    try:
        yield
    finally:
        if before is None:
            _HANDLERS.pop(kind, None)
        else:
            _HANDLERS[kind] = before


def is_failure(exc: BaseException, task: asyncio.Task[Any] | None) -> bool:
    """Whether ``exc``, caught around a handler's call in ``task`` (the task that runs it), is
    that handler's failure, to be recorded on its item like any other error.

    Everything a handler raises is, ``SystemExit`` and ``KeyboardInterrupt`` included (any
    ``BaseException``): ``sys.exit()`` or ``exit()`` in a handler ends that run, not the
    worker, and no real signal raises ``KeyboardInterrupt`` in a handler, because ``runworker``
    turns SIGINT and SIGTERM into a drain with ``loop.add_signal_handler`` (Python's own SIGINT
    handler, which raises it, is not installed while the worker runs; and only the main thread
    ever gets it). Two are not failures:

    - ``asyncio.CancelledError``: the worker cancelling the task (the lease was lost, or it is
      shutting down); the caller handles the cancellation.
    - ``GeneratorExit`` thrown by Python to close a coroutine whose task is being destroyed:
      it arrives outside that task's own step, and a coroutine that caught it must not await
      again. A ``GeneratorExit`` raised inside the step (by the handler's code, or from a
      thread through ``run_in_executor``) is an ordinary failure.
    """
    if isinstance(exc, asyncio.CancelledError):
        return False
    if isinstance(exc, GeneratorExit):
        try:
            return task is not None and asyncio.current_task() is task
        except RuntimeError:  # no running loop: the coroutine is being closed
            return False
    return True


def is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler.handle)


def needs_threads(handler: Handler) -> bool:
    """Whether the handler runs in threads: a sync one, or an async one that ``uses_threads``."""
    return not is_async(handler) or bool(getattr(handler, "uses_threads", False))


def time_limit(handler: Handler, item: WorkItem) -> float | None:
    """How long ``handler`` may run ``item``, in seconds (None: no limit): the handler's own
    ``timeout_for(item)`` when it has one and it names a limit (the ``django.tasks`` handler:
    a task's own), else the kind's (``Kind.time_limit_s``)."""
    own = getattr(handler, "timeout_for", None)
    if own is not None:
        limit = own(item)
        if limit is not None:
            return float(limit) if limit > 0 else None
    return get_kind(item.kind).time_limit_s()


def failure_of(exc: BaseException, run: Run) -> tuple[str, bool]:
    """The error to store and whether it is permanent: a ``PermanentError``, a result that
    cannot be stored (its message as it is: what to return instead), or any failure after the
    handler marked a side effect (a human decides whether repeating it is safe)."""
    if isinstance(exc, UnstorableResult):
        return str(exc), True
    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if run.side_effect and not isinstance(exc, PermanentError):
        return f"failed after a side effect, not retried automatically: {error}", True
    return error, isinstance(exc, PermanentError)
