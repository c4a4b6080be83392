"""Running a site's enqueued work inside its test: a drain, one item performed, inline on
commit; each through a real worker in the test's process."""

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

from outbox.api import relay_all
from tenancy.contexts import AppType, OpContext, new_request_context
from tenancy.scope import system_scope
from workers.config import WorkerSettings
from workers.jobs import Ended, Job
from workers.testing.tenants import context
from workers.worker import Worker
from workqueue import runtime
from wqcore.conf import system_alias, tenant_alias


@dataclass(frozen=True)
class Ran:
    """One item's run in a drain: the item as the run left it, how the run ended
    (``"done"``, ``"retried"``, ``"dead_lettered"``, ``"snoozed"``, ``"released"``,
    ``"cancelled"``, ...: ``workers.running.Ended``), and what its handler raised."""

    item: runtime.WorkItem
    ended: str
    exception: BaseException | None = None

    @property
    def result(self) -> Any:
        """What its handler returned, as its item stores it (None: nothing, or not done)."""
        return self.item.result

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


def refuse_in_transaction(what: str) -> None:
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
    return runtime.bring_forward(lane, list(kinds))


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
    lane runs too (and a workflow's steps, once their parents' completions make them due), and
    what the outbox holds is relayed first. ``scheduled``: items waiting
    for a later time (a retry's delay, a snooze, ``available_at``) are made due and run too,
    round after round, until a round runs nothing (a failing item then runs until its
    attempts are spent). ``capacity``: items run at once (one by default: runs in order).

    Returns what became of each run (``Drained``); with ``raise_failures`` (the default) a
    handler that failed fails the test instead (``DrainFailed``, with each traceback)."""
    refuse_in_transaction("drain()")
    if kinds is None:
        kinds = [kind for kind in runtime.handled_kinds() if kind in runtime.known_kinds()]
    relay_all(new_request_context(AppType.WORKER))
    # No sweep, so no rescue to tell: no liveness lock either (its session would cost each
    # round a connection). One connection a pool: each round opens its own, and a second,
    # opened while the first still connects, would serve a test's few items for nothing.
    settings = WorkerSettings.from_settings(
        tuple(kinds),
        lane=lane,
        capacity=capacity,
        once=True,
        metrics_port=-1,
        sweep=False,
        liveness_lock=False,
        tenant_pool_size=1,
        system_pool_size=1,
        claim_pool_size=1,
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
    ``enqueue`` (``max_attempts``, ``idempotency_key``, ...). What the handler returned is
    the run's ``result``."""
    refuse_in_transaction("perform()")
    lane = f"test-{uuid.uuid4().hex[:12]}"
    item, _ = runtime.enqueue(ctx or context(), kind, dict(payload), lane=lane, **options)
    drained = drain(lane, [kind], raise_failures=raise_failures)
    runs = [run for run in drained.ran if run.item.id == item.id]
    if not runs:
        raise AssertionError(f"{kind} {item.id} did not run (is it due? available_at)")
    return runs[-1]


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
