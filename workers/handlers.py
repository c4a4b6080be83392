"""What a handler is, what it may raise, and which handler runs which kind.

A handler gets the ``OpContext`` the claim returned and the claimed item; it never builds a
context. It returns to complete the item, or raises:

- ``RetryableError`` (or any other exception): the item is retried after a growing delay, and
  dead-lettered once its attempts are spent;
- ``PermanentError``: dead-lettered at once.

``SystemExit`` and ``KeyboardInterrupt`` too are the item's failure, retried like any other
error (``is_failure`` says which exceptions are): a script turned handler that calls
``sys.exit()`` ends its run, not the worker.

Once it calls ``run.mark_side_effect()`` (an e-mail went out, a card was charged), a failure is
never retried automatically: the item is dead-lettered for a human, who knows whether repeating
the effect is safe: a retry would repeat it.

Handlers may be ``async def handle`` (cancelled for real when the worker loses the lease or
shuts down) or plain ``def handle`` (run in a thread; cancellation sets ``run.cancelled``,
which a long handler should check). An async handler that runs some of its work in threads
(the ``django.tasks`` handler, for sync task functions) says so with ``uses_threads = True``
and hands that work to ``await run.in_thread(fn, ...)`` (inside ``async with run.thread_turn()``
when it should not begin before a thread is free): the worker keeps the capacity of an async
handler and gives it the threads its connection budget leaves. Whatever a cancelled handler
writes to the queue later is refused by the claim token.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from tenancy.contexts import OpContext
from workqueue.api import WorkItem


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


class Run:
    """What a running handler can tell the worker, and learn from it."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()
        self.side_effect = False
        # Set by the worker for a handler that ``uses_threads``: runs a call in its pool, and
        # the pool's turns (one per thread).
        self.threads: Callable[..., Awaitable[Any]] | None = None
        self.turns: asyncio.Semaphore | None = None

    def mark_side_effect(self) -> None:
        """From here on, a failure is dead-lettered, never retried automatically."""
        self.side_effect = True

    @property
    def cancelled(self) -> bool:
        """True once the worker lost the item (lease) or is stopping: stop and return."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()

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
    """Runs one kind of work. ``handle`` may be sync or async."""

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> Awaitable[None] | None: ...


_HANDLERS: dict[str, type] = {}


def handles(kind: str):  # type: ignore[no-untyped-def]
    """Class decorator: this handler runs ``kind``."""

    def register(cls: type) -> type:
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
