"""What a handler is, what it may raise, and which handler runs which kind.

A handler gets the ``OpContext`` the claim returned and the claimed item; it never builds a
context. It returns to complete the item, or raises:

- ``RetryableError`` (or any other exception): the item is retried after a growing delay, and
  dead-lettered once its attempts are spent;
- ``PermanentError``: dead-lettered at once.

Once it calls ``run.mark_side_effect()`` (an e-mail went out, a card was charged), a failure is
never retried automatically: the item is dead-lettered for a human, who knows whether repeating
the effect is safe (reference: seed-stream-kernel.md, rule 4).

Handlers may be ``async def handle`` (cancelled for real when the worker loses the lease or
shuts down) or plain ``def handle`` (run in a thread; cancellation sets ``run.cancelled``,
which a long handler should check). Whatever a cancelled handler writes to the queue later is
refused by the claim token.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable
from typing import Protocol

from tenancy.contexts import OpContext
from workqueue.api import WorkItem


class HandlerError(Exception):
    """Base of the errors a handler raises on purpose. Do not raise directly."""


class RetryableError(HandlerError):
    """This attempt failed; a later one may succeed."""


class PermanentError(HandlerError):
    """No attempt will succeed (bad input, a refused address): dead-letter at once."""


class Run:
    """What a running handler can tell the worker, and learn from it."""

    def __init__(self) -> None:
        self._cancelled = threading.Event()
        self.side_effect = False

    def mark_side_effect(self) -> None:
        """From here on, a failure is dead-lettered, never retried automatically."""
        self.side_effect = True

    @property
    def cancelled(self) -> bool:
        """True once the worker lost the item (lease) or is stopping: stop and return."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()


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


def is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler.handle)
