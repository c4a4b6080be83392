"""Signals an error tracker (or any site code) hooks into: what became of an attempt.

Each is sent once per event, by the process that settled the attempt (the worker, or the sweep
for an attempt whose lease ran out), after the statement that settled it committed. The sender
is the ``WorkItem`` class (Django matches senders by identity, so a kind's name could not be
one: a receiver that wants one kind checks ``item.kind``). A receiver that raises is logged
(``signal_receiver_failed``) and changes nothing: the item is settled already. The worker
sends them with ``asend_robust``: an ``async def`` receiver runs on the worker's loop, a plain
one in a thread (asgiref's ``sync_to_async``), so a slow receiver never stalls the worker's
other items.

Arguments (keywords):

- ``work_failed``: an attempt failed (retried or dead-lettered): ``item`` (the work item as the
  settle left it), ``error`` (the text stored), ``exception`` (what the handler raised, or None
  when the sweep found the lease expired), ``traceback`` (text, maybe empty), ``dead_lettered``
  (bool).
- ``work_retried``: it will run again: ``item``, ``error``, ``exception``, ``traceback``.
- ``work_dead_lettered``: a dead letter, final until an operator requeues it: ``item``,
  ``error``, ``exception``, ``traceback``.
- ``work_done``: an item completed: ``item_id``, ``org_id``, ``kind`` (sent only when someone
  listens: completions are written in batches and carry no item object).
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

from workqueue.models import Status, WorkItem
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

work_failed = Signal()
work_retried = Signal()
work_dead_lettered = Signal()
work_done = Signal()
# Items were inserted by ``enqueue`` or ``enqueue_many`` (the sync face, which joins the caller's
# transaction), sent right after the statement, before the commit: ``items``, a list of
# ``(id, kind, lane)``. For code that acts when that transaction commits (``transaction.on_commit``
# in the receiver): the testing module's ``inline``.
work_enqueued = Signal()


def send_enqueued(items: list[tuple[Any, str, str]]) -> None:
    """``work_enqueued`` for what an enqueue inserted, when anything listens."""
    if items and work_enqueued.has_listeners(WorkItem):
        work_enqueued.send(WorkItem, items=items)


def log_receiver_failures(signal_name: str, results: list[tuple[Any, Any]]) -> None:
    """Log each receiver that raised (``send_robust`` hands back what it raised)."""
    for receiver, result in results:
        if isinstance(result, BaseException):
            log_event(
                logger,
                logging.ERROR,
                "signal_receiver_failed",
                exc_info=(type(result), result, result.__traceback__),
                signal=signal_name,
                receiver=getattr(receiver, "__qualname__", repr(receiver)),
            )


async def asend_settled(
    item: Any, error: str, exception: BaseException | None, traceback: str
) -> None:
    """Send ``work_failed``, then ``work_retried`` or ``work_dead_lettered``, for a failed
    attempt that ``item`` (as its settle returned it) now shows. An item the settle ended
    cancelled (someone asked while it ran) is no failure to report: nothing is sent."""
    if item.status == Status.CANCELLED:
        return
    dead = item.status == Status.FAILED
    kwargs = {"item": item, "error": error, "exception": exception, "traceback": traceback}
    sender = WorkItem
    if work_failed.has_listeners(sender):
        results = await work_failed.asend_robust(sender, dead_lettered=dead, **kwargs)
        log_receiver_failures("work_failed", results)
    signal, name = (
        (work_dead_lettered, "work_dead_lettered") if dead else (work_retried, "work_retried")
    )
    if signal.has_listeners(sender):
        log_receiver_failures(name, await signal.asend_robust(sender, **kwargs))


def send_settled(item: Any, error: str, exception: BaseException | None, traceback: str) -> None:
    """Sync version of ``asend_settled`` (the sweep's thread)."""
    if item.status == Status.CANCELLED:
        return
    dead = item.status == Status.FAILED
    kwargs = {"item": item, "error": error, "exception": exception, "traceback": traceback}
    sender = WorkItem
    if work_failed.has_listeners(sender):
        log_receiver_failures(
            "work_failed", work_failed.send_robust(sender, dead_lettered=dead, **kwargs)
        )
    signal, name = (
        (work_dead_lettered, "work_dead_lettered") if dead else (work_retried, "work_retried")
    )
    if signal.has_listeners(sender):
        log_receiver_failures(name, signal.send_robust(sender, **kwargs))
