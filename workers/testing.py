"""Testing a site's own code: what it enqueued, and running that work inside the test.

For a site's tests (pytest-django or Django's ``TestCase``), beside ``workqueue.api``::

    from workers import testing

    def test_checkout_sends_the_receipt(client):        # @pytest.mark.django_db(transaction=True)
        client.post("/checkout/", {"order": 3})
        testing.assert_enqueued("SEND_RECEIPT", payload={"order_id": 3})
        drained = testing.drain("default")               # runs it as a worker would
        assert drained.done == 1

- ``enqueued``, ``assert_enqueued`` and ``refute_enqueued`` read what is waiting (by kind,
  lane, tenant, a payload's keys, or a ``@task``); a failed assertion lists what is there.
- ``drain(lane)`` runs every due item of the lane through a real worker in this process: the
  same claim, fencing token, lease, handler call and settle as ``runworker``, until nothing
  due is left (work the handlers enqueue included). It returns what became of each item and,
  by default, fails the test with each failing handler's traceback.
- ``perform(kind, payload)`` enqueues one item in a lane of its own and runs just that one.
- ``inline()`` runs each enqueue's lane as soon as its transaction commits (the work of a
  view runs before the test's next line; rolled-back work never runs).
- ``context(tenant, user)`` is an ``OpContext`` to enqueue with outside a request, and
  ``tenant(...)`` names it for the block (``@task.enqueue()``, and reads of the queue's tables
  under row-level security).

The worker runs on the queue's own connections, which see only committed rows: ``drain``,
``perform`` and ``inline`` need the test's writes committed (pytest-django's
``django_db(transaction=True)``, Django's ``TransactionTestCase``); inside a test's
transaction they say so and run nothing. ``enqueued`` and its assertions work in both.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connections, transaction
from django.db.models.functions import Now

from outbox.relay import relay_all
from tenancy.contexts import AppType, OpContext, Role, actor_of, new_request_context
from tenancy.current import using_context
from tenancy.modes import SINGLE_TENANT_ID, current_tenancy, tenant_id
from tenancy.scope import system_scope, tenant_scope
from workers.config import WorkerSettings
from workers.running import Ended, Job
from workers.worker import Worker
from workqueue import runtime
from wqcore.conf import system_alias, tenant_alias

__all__ = [
    "DrainFailed",
    "Drained",
    "Ran",
    "assert_enqueued",
    "context",
    "drain",
    "enqueued",
    "inline",
    "perform",
    "refute_enqueued",
    "tenant",
]

# The kind of every ``@task`` item (workers.django_tasks).
_TASK_KIND = "DJANGO_TASK"


# -- contexts -----------------------------------------------------------------------------------


def context(tenant: Any = None, user: Any = None, role: Role | None = None) -> OpContext:
    """An ``OpContext`` to enqueue with outside a request: ``tenant`` (its model instance, its
    key, or the queue's UUID; None in a single-tenant site) and ``user`` (a user or its key;
    None: the system). A member's role unless ``role`` says otherwise."""
    if tenant is None:
        if current_tenancy().name != "single":
            raise ValueError(
                "tenant: this site has tenants (WORKQUEUE['TENANCY'] is "
                f"{current_tenancy().name!r}); name the one to act for"
            )
        org_id = SINGLE_TENANT_ID
    else:
        org_id = tenant_id(tenant)
    if role is None:
        role = Role.SERVICE if user is None else Role.MEMBER
    rctx = new_request_context(AppType.CLI)
    return OpContext(org_id=org_id, user_id=actor_of(user), role=role, rctx=rctx)


@contextlib.contextmanager
def tenant(tenant: Any = None, user: Any = None) -> Iterator[OpContext]:
    """Act for ``tenant`` in the block: its context is the current one (``@task.enqueue()``
    reads it, as a view's does), and the everyday connection's transaction names the tenant,
    so the queue's tables read through row-level security show its rows. Yields the context."""
    ctx = context(tenant, user)
    with using_context(ctx), tenant_scope(ctx.org_id):
        yield ctx


# -- what was enqueued --------------------------------------------------------------------------


def _org_id(tenant: Any) -> uuid.UUID | None:
    if tenant is None:
        return None
    if isinstance(tenant, OpContext):
        return tenant.org_id
    return tenant_id(tenant)


def _task_path(task: Any) -> str:
    """The path a ``@task`` item names its task by (the function's module and name)."""
    func = getattr(task, "func", task)
    return f"{func.__module__}.{func.__qualname__}"


def _matches(item: runtime.WorkItem, payload: Mapping[str, Any] | None, task: Any) -> bool:
    body = item.payload if isinstance(item.payload, dict) else {}
    if payload is not None and any(
        key not in body or body[key] != value for key, value in payload.items()
    ):
        return False
    return task is None or body.get("path") == _task_path(task)


def enqueued(
    kind: str | None = None,
    *,
    lane: str | None = None,
    tenant: Any = None,
    payload: Mapping[str, Any] | None = None,
    task: Any = None,
    status: str | Sequence[str] = runtime.Status.PENDING,
) -> list[runtime.WorkItem]:
    """The items waiting (``status``: pending by default; a list, or ``"*"`` for any), oldest
    first, that are of ``kind``, in ``lane``, of ``tenant`` (a tenant, its key, a context),
    whose payload holds each key of ``payload`` with that value, or that run ``task`` (a
    ``@task``: its items' kind is DJANGO_TASK).

    Across tenants this reads on the system login, which in a site with three logins is
    another connection: inside a test's transaction, name the tenant."""
    if task is not None:
        kind = kind or _TASK_KIND
    filters: dict[str, Any] = {}
    if kind is not None:
        filters["kind"] = kind
    if lane is not None:
        filters["lane"] = lane
    if status != "*":
        filters["status__in"] = [status] if isinstance(status, str) else list(status)
    org_id = _org_id(tenant)
    if org_id is not None:
        filters["org_id"] = org_id
        scope: contextlib.AbstractContextManager[str] = tenant_scope(org_id)
    else:
        _refuse_unseen("enqueued() without a tenant", system_alias())
        scope = system_scope()
    with scope as alias:
        found = list(
            runtime.WorkItem.objects.using(alias).filter(**filters).order_by("created_at", "id")
        )
    return [item for item in found if _matches(item, payload, task)]


def _described(items: Sequence[runtime.WorkItem]) -> str:
    if not items:
        return "nothing"
    shown = "\n".join(
        f"  {i.kind} lane={i.lane} tenant={i.org_id} status={i.status} payload={i.payload}"
        for i in items[:20]
    )
    more = f"\n  ... and {len(items) - 20} more" if len(items) > 20 else ""
    return shown + more


def _asked(kind: str | None, **given: Any) -> str:
    parts = [kind or "any kind"] + [f"{k}={v!r}" for k, v in given.items() if v is not None]
    return " ".join(parts)


def assert_enqueued(
    kind: str | None = None,
    *,
    lane: str | None = None,
    tenant: Any = None,
    payload: Mapping[str, Any] | None = None,
    task: Any = None,
    count: int | None = None,
) -> list[runtime.WorkItem]:
    """Fail the test unless an item waits that matches (``count``: exactly that many); return
    the matches. The failure lists what does wait."""
    found = enqueued(kind, lane=lane, tenant=tenant, payload=payload, task=task)
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    waiting = enqueued(tenant=tenant) if tenant is not None else enqueued()
    wanted = _asked(kind, lane=lane, tenant=_org_id(tenant), payload=payload, task=task)
    how_many = "one or more" if count is None else str(count)
    raise AssertionError(
        f"expected {how_many} enqueued: {wanted}; found {len(found)}. Waiting:\n"
        f"{_described(waiting)}"
    )


def refute_enqueued(
    kind: str | None = None,
    *,
    lane: str | None = None,
    tenant: Any = None,
    payload: Mapping[str, Any] | None = None,
    task: Any = None,
) -> None:
    """Fail the test if an item waits that matches; the failure lists those."""
    found = enqueued(kind, lane=lane, tenant=tenant, payload=payload, task=task)
    if found:
        wanted = _asked(kind, lane=lane, tenant=_org_id(tenant), payload=payload, task=task)
        raise AssertionError(f"expected nothing enqueued: {wanted}; found:\n{_described(found)}")


# -- running it ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """One item's run in a drain: the item as the run left it, how the run ended
    (``"done"``, ``"retried"``, ``"dead_lettered"``, ``"snoozed"``, ``"released"``,
    ``"cancelled"``, ...: ``workers.running.Ended``), and what its handler raised."""

    item: runtime.WorkItem
    ended: str
    exception: BaseException | None = None

    @property
    def failed(self) -> bool:
        return self.exception is not None and self.ended in (Ended.RETRIED, Ended.DEAD_LETTERED)


@dataclass(frozen=True)
class Drained:
    """What a drain ran, in the order the runs ended (an item run twice is there twice)."""

    ran: list[Ran] = field(default_factory=list)

    def _count(self, ended: str) -> int:
        return sum(1 for run in self.ran if run.ended == ended)

    @property
    def done(self) -> int:
        return self._count(Ended.DONE)

    @property
    def retried(self) -> int:
        return self._count(Ended.RETRIED)

    @property
    def dead_lettered(self) -> int:
        return self._count(Ended.DEAD_LETTERED)

    @property
    def snoozed(self) -> int:
        return self._count(Ended.SNOOZED)

    @property
    def failures(self) -> list[Ran]:
        return [run for run in self.ran if run.failed]

    def counts(self) -> dict[str, int]:
        """How many runs ended each way, e.g. ``{"done": 3, "retried": 1}``."""
        return dict(Counter(str(run.ended) for run in self.ran))

    def __len__(self) -> int:
        return len(self.ran)


class DrainFailed(AssertionError):
    """A handler failed during a drain: each failure's item and traceback (the first failure
    is this error's cause, so the test's report shows its frames)."""

    def __init__(self, drained: Drained) -> None:
        self.drained = drained
        parts = []
        for run in drained.failures:
            assert run.exception is not None
            trace = "".join(traceback.format_exception(run.exception)).rstrip()
            parts.append(
                f"{run.item.kind} {run.item.id} ({run.ended}, attempt {run.item.attempts}):\n"
                f"{trace}"
            )
        super().__init__(
            f"{len(parts)} handler(s) failed in the drain (drain(raise_failures=False) returns "
            "them instead):\n\n" + "\n\n".join(parts)
        )


def _refuse_unseen(what: str, alias: str) -> None:
    """Refuse to act on rows another connection cannot see: the test's own uncommitted ones."""
    if connections[tenant_alias()].in_atomic_block and alias != tenant_alias():
        raise RuntimeError(
            f"{what} reads on another connection ({alias!r}), which cannot see this test's "
            "uncommitted rows: name the tenant, or commit them (pytest-django: "
            "django_db(transaction=True); Django: TransactionTestCase)"
        )


def _refuse_in_transaction(what: str) -> None:
    for alias in {tenant_alias(), system_alias()}:
        if connections[alias].in_atomic_block:
            raise RuntimeError(
                f"{what} runs the work as a worker does, on the queue's own connections, which "
                "see only committed rows; this test's writes are inside a transaction "
                f"({alias!r}). Commit them: pytest-django's django_db(transaction=True), or "
                "Django's TransactionTestCase"
            )


def _bring_forward(lane: str, kinds: Sequence[str]) -> int:
    """Make the lane's waiting items of ``kinds`` due now (retries, snoozes, ``available_at``
    in the future), by the database's clock."""
    with system_scope() as alias:
        return (
            runtime.WorkItem.objects.using(alias)
            .filter(lane=lane, kind__in=kinds, status=runtime.Status.PENDING)
            .update(available_at=Now())
        )


def _run_worker(settings: WorkerSettings, timeout_s: float) -> list[Job]:
    """Run one worker in once mode, on a loop of its own in a thread of its own (the caller
    may be inside an event loop); returns each item's job as its run ended."""
    ended: list[Job] = []
    failure: list[BaseException] = []

    async def run() -> None:
        worker = Worker(settings, on_ended=ended.append)
        try:
            async with asyncio.timeout(timeout_s):
                await worker.run()
        except TimeoutError:
            worker.request_stop()
            worker.request_stop()
            raise TimeoutError(
                f"the drain did not end within {timeout_s:g} s: a handler still runs, or an "
                "item keeps coming back due (snoozed for 0 s?); drain(timeout_s=...) to wait "
                "longer"
            ) from None

    def in_thread() -> None:
        try:
            asyncio.run(run())
        except BaseException as exc:  # raised again in the caller's thread
            failure.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=in_thread, name="workqueue-drain")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return ended


def _read_back(jobs: list[Job]) -> list[runtime.WorkItem]:
    """The items as their runs left them, by the system login (or the one login)."""
    ids = {job.item.id for job in jobs}
    with system_scope() as alias:
        found = runtime.WorkItem.objects.using(alias).in_bulk(ids)
    return [found.get(job.item.id, job.item) for job in jobs]


def drain(
    lane: str = "default",
    kinds: Sequence[str] | None = None,
    *,
    scheduled: bool = False,
    capacity: int = 1,
    raise_failures: bool = True,
    timeout_s: float = 60.0,
) -> Drained:
    """Run every due item of ``lane`` (of ``kinds``; default: every kind this site handles)
    through a worker in this process, until none is left: what the handlers enqueue in the
    lane runs too, and what the outbox holds is relayed first. ``scheduled``: items waiting
    for a later time (a retry's delay, a snooze, ``available_at``) are made due and run too,
    round after round, until a round runs nothing (a failing item then runs until its
    attempts are spent). ``capacity``: items run at once (one by default: runs in order).

    Returns what became of each run (``Drained``); with ``raise_failures`` (the default) a
    handler that failed fails the test instead (``DrainFailed``, with each traceback)."""
    _refuse_in_transaction("drain()")
    kinds = list(kinds) if kinds is not None else runtime.handled_kinds()
    relay_all(new_request_context(AppType.WORKER))
    settings = WorkerSettings.from_settings(
        tuple(kinds), lane=lane, capacity=capacity, once=True, metrics_port=-1, sweep=False
    )
    jobs: list[Job] = []
    while True:
        if scheduled:
            _bring_forward(lane, kinds)
        ran = _run_worker(settings, timeout_s)
        jobs += ran
        if not scheduled or not ran:
            break
    items = _read_back(jobs)
    drained = Drained(
        [Ran(item, str(job.ended), job.exception) for item, job in zip(items, jobs, strict=True)]
    )
    if raise_failures and drained.failures:
        raise DrainFailed(drained) from drained.failures[0].exception
    return drained


def perform(
    kind: str,
    payload: Mapping[str, Any],
    *,
    ctx: OpContext | None = None,
    raise_failures: bool = True,
    **options: Any,
) -> Ran:
    """Enqueue one item of ``kind`` in a lane of its own and run just it, through a worker as
    ``drain`` does (its handler, its claim, its settle); returns its run. ``ctx``: the context
    to enqueue with (default ``context()``: the single tenant); ``options`` go to
    ``enqueue`` (``max_attempts``, ``idempotency_key``, ...)."""
    _refuse_in_transaction("perform()")
    lane = f"test-{uuid.uuid4().hex[:12]}"
    item, _ = runtime.enqueue(ctx or context(), kind, dict(payload), lane=lane, **options)
    drained = drain(lane, [kind], raise_failures=raise_failures)
    runs = [run for run in drained.ran if run.item.id == item.id]
    if not runs:
        raise AssertionError(f"{kind} {item.id} did not run (is it due? available_at)")
    return runs[-1]


# -- inline ------------------------------------------------------------------------------------


@contextlib.contextmanager
def inline(*, raise_failures: bool = True) -> Iterator[list[Drained]]:
    """In the block, each enqueue's lane is drained as soon as its transaction commits (at
    once in autocommit): a view's work has run when the test's next line runs, and the work
    of a rolled-back transaction never does. Yields the list of the drains that ran work."""
    drains: list[Drained] = []

    def run_lanes(lanes: dict[str, set[str]]) -> None:
        for lane, kinds in lanes.items():
            drained = drain(lane, sorted(kinds), raise_failures=raise_failures)
            if drained.ran:
                drains.append(drained)

    def enqueued_now(sender: Any, items: Sequence[tuple[Any, str, str]], **_: Any) -> None:
        lanes: dict[str, set[str]] = {}
        for _id, kind, lane in items:
            lanes.setdefault(lane, set()).add(kind)
        transaction.on_commit(lambda: run_lanes(lanes), using=tenant_alias())

    uid = f"workers.testing.inline:{id(drains)}"
    runtime.work_enqueued.connect(enqueued_now, dispatch_uid=uid)
    try:
        yield drains
    finally:
        runtime.work_enqueued.disconnect(dispatch_uid=uid)
