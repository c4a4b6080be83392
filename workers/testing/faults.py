"""Faults for a site's own tests: each runs one item of the site's kind through the real claim,
fence, lease and settle, breaks its run in one way, and returns what became of it (``Fault``),
for an assertion that says what the queue guarantees (``workers/testing/guarantees.py``).

- ``kill_mid_handler``: a ``runworker`` process SIGKILLed while its handler runs (or has
  returned, its outcome not written); the sweep's rescue hands the item back; it runs again.
- ``expire_lease``: a frozen worker's lease moved into the past by the database's clock; the
  sweep's requeue hands the item back; it runs again; the frozen worker wakes and its late
  completion is refused.
- ``stale_holder``: the same, the holder frozen before its handler began: once awake, its
  handler runs after the newer claim's, and its progress and completion are refused.
- ``cut_mid_settle``: the worker's session ended (``pg_terminate_backend``) while its
  completion statement waits to write; the worker settles again on a new one (or, with
  ``kill``, dies there and the item runs again).
- ``raise_after_side_effect``: the handler's first attempt raises once it has returned (its
  writes made); the attempt is spent and the item retried, or dead-lettered when the handler
  had marked its side effect.

Each needs the test's writes committed (pytest-django's ``django_db(transaction=True)``,
``TransactionTestCase``), as ``drain`` does. The item runs in a lane of its own; ``ctx`` is the
context to enqueue with (default ``context()``), ``options`` go to ``enqueue``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db.models import DateTimeField, ExpressionWrapper
from django.db.models.functions import Now

from tenancy.contexts import AppType, OpContext, new_request_context
from workers.sweep import requeue_stale, rescue
from workers.sweep.config import SweepSettings
from workers.testing.draining import Ran, drain, refuse_in_transaction
from workers.testing.guarantees import (
    Fault,
    assert_attempt_counted,
    assert_ran_again_once,
    assert_settled_whole,
    assert_side_effect_not_retried,
    assert_stale_write_refused,
    read_attempts,
    read_item,
)
from workers.testing.held import RETURNED, STARTED, HeldWorker
from workers.testing.tenants import context
from workqueue import runtime
from wqcore.scope import system_scope
from wqcore.statements import NoParams, Statement
from wqcore.store import System, execute

__all__ = [
    "Fault",
    "InjectedFault",
    "assert_attempt_counted",
    "assert_ran_again_once",
    "assert_settled_whole",
    "assert_side_effect_not_retried",
    "assert_stale_write_refused",
    "cut_mid_settle",
    "expire_lease",
    "kill_mid_handler",
    "raise_after_side_effect",
    "stale_holder",
]

CUT_WAITING_SESSIONS = Statement("cut_waiting_sessions", NoParams, Path(__file__).parent / "sql")
# How far into the past an expired lease is moved: any moment before now() is expired.
_PAST = timedelta(seconds=1)
# How often a fault looks again for what it waits for (the database's answer, never a timer's).
_LOOK_S = 0.05


class InjectedFault(Exception):
    """What ``raise_after_side_effect`` raises after the handler returned. Do not raise
    directly."""


def _enqueue(
    kind: str, payload: Mapping[str, Any], ctx: OpContext | None, options: dict[str, Any]
) -> runtime.WorkItem:
    refuse_in_transaction("a fault")
    lane = f"fault-{uuid.uuid4().hex[:12]}"
    item, _ = runtime.enqueue(ctx or context(), kind, dict(payload), lane=lane, **options)
    return item


def _wait_for(what: str, done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:g} s")
        time.sleep(_LOOK_S)


def _claimed(item_id: uuid.UUID) -> bool:
    return read_item(item_id).status == runtime.Status.CLAIMED


def _rescue(item_id: uuid.UUID, timeout_s: float) -> None:
    """The sweep's rescue step, as a sweeper runs it, until the item is handed back (its
    holder's liveness lock seen free twice, ``SWEEP_RESCUE_GRACE_S`` apart)."""
    rctx, settings = new_request_context(AppType.SWEEP), SweepSettings()

    def handed_back() -> bool:
        rescue.run_once(rctx, settings)
        return not _claimed(item_id)

    _wait_for(f"the rescue of {item_id} (its worker was killed)", handed_back, timeout_s)


def _expire(item_id: uuid.UUID) -> None:
    """Move the claim's lease into the past by the database's clock, then run the sweep's
    requeue step, which hands back what an expired lease held."""
    with system_scope() as alias:
        runtime.WorkItem.objects.using(alias).filter(
            pk=item_id, status=runtime.Status.CLAIMED
        ).update(lease_expires_at=ExpressionWrapper(Now() - _PAST, output_field=DateTimeField()))
    requeue_stale.run_once(new_request_context(AppType.SWEEP), SweepSettings())
    if _claimed(item_id):
        raise AssertionError(f"the sweep's requeue did not hand back {item_id}, its lease past")


def _run_again(item: runtime.WorkItem) -> Ran | None:
    """Run the item once more, now (a retry's delay brought forward), through a worker in this
    process as ``drain`` does; its run, or None if it did not run."""
    runtime.bring_forward(item.lane, [item.kind])
    drained = drain(item.lane, [item.kind], raise_failures=False)
    runs = [run for run in drained.ran if run.item.id == item.id]
    return runs[-1] if runs else None


def _fault(what: str, item_id: uuid.UUID, rerun: Ran | None, **more: Any) -> Fault:
    return Fault(what, read_item(item_id), read_attempts(item_id), rerun, **more)


def kill_mid_handler(
    kind: str,
    payload: Mapping[str, Any],
    *,
    at: str = RETURNED,
    ctx: OpContext | None = None,
    timeout_s: float = 60.0,
    **options: Any,
) -> Fault:
    """Run one item of ``kind`` in a ``runworker`` process and SIGKILL it ``at`` a point of its
    handler's run: ``"returned"`` (the default: the handler's writes made, its outcome not
    written, the worst moment) or ``"started"``. The sweep's rescue hands the item back (the
    killed attempt spent, recorded ``holder_gone``); it then runs once more, through a worker in
    this process. For ``assert_ran_again_once``."""
    item = _enqueue(kind, payload, ctx, options)
    with HeldWorker(kind, item.lane, point=at) as worker:
        worker.wait_held(timeout_s)
        worker.kill()
    _rescue(item.id, timeout_s)
    return _fault("worker killed mid-handler", item.id, _run_again(item))


def _expire_and_wake(
    what: str,
    point: str,
    kind: str,
    payload: Mapping[str, Any],
    ctx: OpContext | None,
    timeout_s: float,
    options: dict[str, Any],
) -> Fault:
    item = _enqueue(kind, payload, ctx, options)
    with HeldWorker(kind, item.lane, point=point, report=True) as worker:
        worker.wait_held(timeout_s)
        worker.freeze()
        _expire(item.id)
        rerun = _run_again(item)
        newer = read_item(item.id)
        worker.thaw()
        worker.release()
        # Drained, the held worker's handler ends and its writes are sent (and refused).
        worker.stop()
        refused = tuple(event for event in worker.events() if event.startswith("stale_"))
    return _fault(what, item.id, rerun, newer=newer, refused=refused)


def expire_lease(
    kind: str,
    payload: Mapping[str, Any],
    *,
    ctx: OpContext | None = None,
    timeout_s: float = 60.0,
    **options: Any,
) -> Fault:
    """Run one item of ``kind`` in a ``runworker`` process, freeze it (SIGSTOP) once its handler
    returned, and move its lease into the past by the database's clock: the sweep's requeue
    hands the item back (``lease_expired``), and it runs again through a worker in this process.
    The frozen worker then wakes, and its completion of the old claim is refused by the fence.
    For ``assert_ran_again_once`` and ``assert_stale_write_refused``."""
    return _expire_and_wake("lease expired", RETURNED, kind, payload, ctx, timeout_s, options)


def stale_holder(
    kind: str,
    payload: Mapping[str, Any],
    *,
    ctx: OpContext | None = None,
    timeout_s: float = 60.0,
    **options: Any,
) -> Fault:
    """Claim one item of ``kind`` in a ``runworker`` process and freeze it before its handler
    begins; the lease moved into the past, the item is handed back and run to its end by a newer
    claim (a worker in this process). The stale holder then wakes: its handler runs, late, and
    its progress report and completion under the old claim are refused by the fence. For
    ``assert_stale_write_refused``."""
    return _expire_and_wake("stale holder", STARTED, kind, payload, ctx, timeout_s, options)


def cut_mid_settle(
    kind: str,
    payload: Mapping[str, Any],
    *,
    kill: bool = False,
    ctx: OpContext | None = None,
    timeout_s: float = 60.0,
    **options: Any,
) -> Fault:
    """Run one item of ``kind`` in a ``runworker`` process and end its database session while
    its settle is on its way: the item's row is locked, the handler let go, and the session
    whose completion waits for that lock is terminated (``pg_terminate_backend``), its
    transaction rolled back whole. The item as the cut left it is kept (``Fault.at_cut``).
    The worker then settles again on a new session; with ``kill`` it is SIGKILLed instead, and
    the rescue hands the item back to run again. For ``assert_settled_whole``."""
    item = _enqueue(kind, payload, ctx, options)
    rerun = None
    with HeldWorker(kind, item.lane) as worker:
        worker.wait_held(timeout_s)
        with system_scope() as alias:
            # The lock is the moment: the worker's settle waits for it, mid-statement.
            locking = runtime.WorkItem.objects.using(alias).select_for_update()
            list(locking.filter(pk=item.id).values_list("pk", flat=True))
            worker.release()
            cut: list[int] = []

            def cut_one() -> bool:
                if not worker.alive():
                    raise AssertionError(f"the held worker ended:\n{worker.output()}")
                cut.extend(row[0] for row in execute(System(CUT_WAITING_SESSIONS, NoParams())).rows)
                return bool(cut)

            _wait_for("the worker's settle (waiting for the item's row)", cut_one, timeout_s)
            # Read under the lock still held: the worker's second settle waits for it.
            at_cut = read_item(item.id), read_attempts(item.id)
            if kill:
                worker.kill()
        if not kill:
            _wait_for(
                f"the settle of {item.id} after the cut", lambda: not _claimed(item.id), timeout_s
            )
    if kill:
        _rescue(item.id, timeout_s)
        rerun = _run_again(item)
    return _fault("connection cut mid-settle", item.id, rerun, at_cut=at_cut, cut=len(cut))


def raise_after_side_effect(
    kind: str,
    payload: Mapping[str, Any],
    *,
    ctx: OpContext | None = None,
    **options: Any,
) -> Fault:
    """Run one item of ``kind`` through a worker in this process, its first attempt made to
    raise ``InjectedFault`` once the handler returned (its writes made: a crash after the mail
    went out). The attempt is spent: the item is retried (run again here, its delay brought
    forward) or, if the handler had marked its side effect (``run.mark_side_effect()``),
    dead-lettered for a human. For ``assert_attempt_counted`` and
    ``assert_side_effect_not_retried``."""
    own = runtime.handler_for(kind)
    if own is None:
        raise ValueError(f"no handler runs {kind} in this process")
    item = _enqueue(kind, payload, ctx, options)
    with runtime.handled_by(kind, _raising_after(type(own), item.id)):
        first = drain(item.lane, [kind], raise_failures=False)
    rerun = None
    if read_item(item.id).status == runtime.Status.PENDING:
        rerun = _run_again(item)
    runs = [run for run in first.ran if run.item.id == item.id]
    return _fault("raised after its side effect", item.id, rerun, first=runs[-1] if runs else None)


def _raising_after(own: type[Any], item_id: uuid.UUID) -> type[Any]:
    """``own``, raising ``InjectedFault`` when its first run of ``item_id`` returns."""
    message = "injected by raise_after_side_effect: the handler had returned (its writes made)"

    def check(item: runtime.WorkItem) -> None:
        if item.id == item_id and item.attempts == 1:
            raise InjectedFault(message)

    if runtime.is_async(own()):

        class RaisingAsync(own):  # type: ignore[misc]
            async def handle(
                self, ctx: OpContext, item: runtime.WorkItem, run: runtime.Run
            ) -> object:
                result = await super().handle(ctx, item, run)
                check(item)
                return result

        return RaisingAsync

    class RaisingSync(own):  # type: ignore[misc]
        def handle(self, ctx: OpContext, item: runtime.WorkItem, run: runtime.Run) -> object:
            result = super().handle(ctx, item, run)
            check(item)
            return result

    return RaisingSync
