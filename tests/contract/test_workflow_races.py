"""The races a workflow must survive, forced on real PostgreSQL: two sessions, each in a thread,
the first holding its transaction open until the second is seen waiting for its lock.

- The last two members of a group completed at once by two workers: the callback starts once
  (the child's row lock orders them; the second reads what the first left).
- A workflow declared with an edge to an item while that item is completed: whichever goes
  first, the step is released once its parent is done (the release reads a snapshot taken
  after it has the parent's lock, so it sees the edge declared meanwhile).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections, transaction

from tests.helpers import row
from workqueue import api, claim
from workqueue.fence import Fence
from workqueue.models import Status
from workqueue.settle import complete, complete_many
from workqueue.workflows import Workflow

pytestmark = pytest.mark.usefixtures("committed")

# How long a step of a race may take before the test gives up (a deadlock, a lost wake-up).
GIVE_UP_S = 30


def _backend_pid(alias: str) -> int:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _wait_until_waiting_for_a_lock(pid: int) -> None:
    """Block until session ``pid`` waits for a lock (asked of the server, not timed)."""
    with connections["admin"].cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pid]
            )
            found = cursor.fetchone()
            if found and found[0]:
                return
            cursor.execute("SELECT pg_sleep(0.01)")


def race(first: Callable[[], Any], second: Callable[[], Any], alias: str) -> tuple[Any, Any]:
    """Run ``first`` in a transaction on ``alias`` in one thread, ``second`` in another on its
    own session once ``first`` has run; commit ``first`` only once ``second`` waits for a lock
    (so both are in flight), and return what each returned."""
    results: dict[str, Any] = {}
    first_ran, second_pid = threading.Event(), {}
    let_go = threading.Event()

    def run_first() -> None:
        try:
            with transaction.atomic(using=alias):
                results["first"] = first()
                first_ran.set()
                assert let_go.wait(GIVE_UP_S)
        except BaseException as exc:
            results["first"] = exc
            first_ran.set()
        finally:
            connections.close_all()

    def run_second() -> None:
        try:
            second_pid["pid"] = _backend_pid(alias)
            assert first_ran.wait(GIVE_UP_S)
            results["second"] = second()
        except BaseException as exc:
            results["second"] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run_first), threading.Thread(target=run_second)]
    for thread in threads:
        thread.start()
    assert first_ran.wait(GIVE_UP_S)
    while "pid" not in second_pid:
        threads[1].join(0.01)
    _wait_until_waiting_for_a_lock(second_pid["pid"])
    let_go.set()
    for thread in threads:
        thread.join(GIVE_UP_S)
    for outcome in results.values():
        if isinstance(outcome, BaseException):
            raise outcome
    return results["first"], results["second"]


def test_the_last_two_members_completed_at_once_start_the_callback_once(ctx, worker_rctx) -> None:
    wf = Workflow()
    group = wf.group(
        [api.NewItem("NOOP", {"n": n}) for n in range(2)],
        on_success=api.NewItem("NOOP", {"n": 10}),
        on_complete=api.NewItem("NOOP", {"n": 20}),
    )
    declared = api.enqueue_workflow(ctx, wf)
    held = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    [a, b] = [Fence.of(item) for _, item in held]
    done_a, done_b = race(lambda: complete_many([a]), lambda: complete_many([b]), alias="system")
    assert (done_a, done_b) == ({a.item_id}, {b.item_id})
    for callback in (group.on_success, group.on_complete):
        stored = row(declared[callback])
        assert (stored.status, stored.waiting_on) == (Status.PENDING, 0)
    again = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 10)
    assert sorted(item.payload["n"] for _, item in again) == [10, 20]


def test_a_workflow_declared_while_its_parent_completes_is_released(ctx, worker_rctx) -> None:
    parent, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    [(item_ctx, held)] = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 1)
    wf = Workflow()
    step = wf.step("NOOP", {"n": 2}, after=[parent.id])

    # The declaration locks the parent first; the completion waits for it, then meets the
    # edge its own snapshot (taken before the declaration committed) could not see.
    declared, done = race(
        lambda: api.enqueue_workflow(ctx, wf), lambda: complete(item_ctx, held), "default"
    )
    assert done.status == Status.DONE
    assert (row(declared[step]).status, row(declared[step]).waiting_on) == (Status.PENDING, 0)


def test_a_workflow_declared_while_its_parent_completes_the_other_way_round(
    ctx, worker_rctx
) -> None:
    parent, _ = api.enqueue(ctx, "NOOP", {"n": 1})
    [(item_ctx, held)] = claim.claim(worker_rctx, "default", ["NOOP"], "w1", 30, 1)
    wf = Workflow()
    step = wf.step("NOOP", {"n": 2}, after=[parent.id])

    # The completion locks the parent first; the declaration waits for it, reads it done as
    # its lock leaves it, and meets the edge at once.
    done, declared = race(
        lambda: complete(item_ctx, held), lambda: api.enqueue_workflow(ctx, wf), "default"
    )
    assert done.status == Status.DONE
    assert (row(declared[step]).status, row(declared[step]).waiting_on) == (Status.PENDING, 0)
