"""Django tasks run by the worker loop in process (``runworker``'s ``Worker``), on PostgreSQL.

Enqueued and read back through Django's public API only; the worker is the real one, with the
DJANGO_TASK handler, its thread pool, its batched records and completions.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from audit.models import AuditEntry
from tenancy.contexts import OpContext
from tenancy.current import using_context
from tenancy.models import Org
from tests import tasks
from tests.runtime.support import run_until, settings
from workers import testing
from workers.demo.models import Shipment
from workers.django_tasks.compat import (
    TaskResult,
    TaskResultStatus,
    default_task_backend,
    task_enqueued,
    task_finished,
    task_started,
)
from workers.worker import Worker
from workqueue import api
from workqueue.models import WorkItem

pytestmark = pytest.mark.usefixtures("committed")


@pytest.fixture
def member(ctx: OpContext) -> Iterator[OpContext]:
    with using_context(ctx):
        yield ctx


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    tasks.SEEN.clear()


def _worker(**overrides: Any) -> Worker:
    return Worker(settings("DJANGO_TASK", **overrides))


def _finished(ctx: OpContext, *results: TaskResult) -> Callable[[], bool]:
    """True once every result has finished, read as its tenant reads it."""

    def check() -> bool:
        with using_context(ctx):
            return all(default_task_backend.get_result(r.id).is_finished for r in results)

    return check


def _run(worker: Worker, done: Callable[[], bool]) -> None:
    asyncio.run(run_until(worker, done))


def test_a_task_runs_and_its_return_value_is_stored(member: OpContext) -> None:
    result = tasks.add.enqueue(2, 3)
    worker = _worker()
    _run(worker, _finished(member, result))
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 5
    # One copy: the item's result, written by the statement that completed it.
    assert WorkItem.objects.using("admin").get(pk=result.id).result == 5
    assert api.result_of(member, result.id) == 5
    assert result.worker_ids == [worker.worker_id] and result.attempts == 1
    assert result.errors == []
    assert result.enqueued_at <= result.started_at == result.last_attempted_at
    assert result.last_attempted_at <= result.finished_at


def test_an_async_task_runs_on_the_workers_loop(member: OpContext) -> None:
    result = tasks.async_add.enqueue(4, 5)
    # The testing helpers' drain: the same worker, in once mode (what a site's test uses).
    [run] = testing.drain("default", ["DJANGO_TASK"]).ran
    assert (run.ended, run.result) == ("done", {"sum": 9, "loop": True})
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"sum": 9, "loop": True}


def test_a_failure_is_retried_then_succeeds_with_the_attempt_in_its_context(
    member: OpContext,
) -> None:
    result = tasks.flaky.enqueue(fail_times=1)
    worker = _worker()
    _run(worker, _finished(member, result))
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2, "result_id": result.id}
    assert result.attempts == 2 and result.worker_ids == [worker.worker_id] * 2
    [error] = result.errors
    assert error.exception_class is ConnectionError
    assert "attempt 1 fails" in error.traceback and "Traceback" in error.traceback
    assert result.started_at < result.last_attempted_at


def test_a_retry_waits_the_tasks_own_delay(member: OpContext) -> None:
    result = tasks.fails_first_then_waits.enqueue()

    def retried() -> bool:
        item = WorkItem.objects.using("admin").get(pk=result.id)
        return item.status == "pending" and item.attempts == 1

    _run(_worker(), retried)
    item = WorkItem.objects.using("admin").get(pk=result.id)
    # @retries(base_s=30, jitter=0): by the database's clock, in the retry's own statement.
    assert (item.available_at - item.updated_at).total_seconds() == pytest.approx(30, abs=0.01)
    assert item.last_error.startswith("TaskRaised: builtins.ConnectionError: try again")
    read = tasks.fails_first_then_waits.get_result(result.id)  # refresh() keeps the task
    # run_after is the caller's (none here), as Django's backends keep it; the retry's delay
    # is the item's available_at.
    assert read.status == TaskResultStatus.READY and read.task.run_after is None


def test_a_task_that_keeps_failing_is_a_dead_letter_with_its_errors(member: OpContext) -> None:
    result = tasks.always_fails.enqueue("the card was declined")
    _run(_worker(), _finished(member, result))
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 2
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 2
    assert all("the card was declined" in e.traceback for e in result.errors)
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    # The operator sees it as the queue's dead letter: its last error and its audit entry.
    item = WorkItem.objects.using("admin").get(pk=result.id)
    first_line = item.last_error.splitlines()[0]
    assert first_line == "TaskRaised: builtins.ValueError: the card was declined"
    assert "Traceback (most recent call last)" in item.last_error
    entry = AuditEntry.objects.using("admin").get(subject_id=result.id)
    assert entry.action == "work.dead_lettered" and entry.data["attempts"] == 2


def test_a_permanent_error_dead_letters_at_once(member: OpContext) -> None:
    result = tasks.refuses.enqueue()
    [run] = testing.drain("default", ["DJANGO_TASK"], raise_failures=False).ran
    assert run.ended == "dead_lettered" and isinstance(run.exception, api.PermanentError)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert result.errors[0].exception_class_path == "workqueue.handlers.PermanentError"


def test_a_return_value_that_is_not_json_fails_the_task_with_a_clear_error(
    member: OpContext,
) -> None:
    result = tasks.returns_a_datetime.enqueue()
    with pytest.raises(testing.DrainFailed, match="return value: a datetime is not JSON"):
        testing.drain("default", ["DJANGO_TASK"])
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    [error] = result.errors
    assert error.exception_class_path == "workers.django_tasks.exceptions.InvalidReturnValue"
    # What Django's own backends record (an outside suite looks for it): a TypeError.
    assert issubclass(error.exception_class, TypeError)
    assert "return value: a datetime is not JSON" in error.traceback


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("tests.no_such_module.task", "cannot import the task 'tests.no_such_module.task'"),
        ("tests.tasks.no_such_task", "cannot import the task 'tests.tasks.no_such_task'"),
        ("tests.tasks.plain_function", "'tests.tasks.plain_function' is a function, not a task"),
        ("tests.tasks.SEEN", "'tests.tasks.SEEN' is a list, not a task"),
        ("os.system", "the task path 'os.system' names no task module"),
        ("subprocess.run", "names no task module ('subprocess')"),
    ],
)
def test_a_path_that_names_no_task_is_a_permanent_failure_naming_it(
    member: OpContext, path: str, why: str
) -> None:
    """An item's path is data: written by hand (or by anyone who may enqueue any kind), it
    must never run anything but a task, nor be retried."""
    item, _ = api.enqueue(member, "DJANGO_TASK", {"path": path, "args": ["echo pwned"]})
    _run(_worker(), _finished(member, _as_result(item.id)))
    stored = WorkItem.objects.using("admin").get(pk=item.id)
    assert (stored.status, stored.attempts) == ("failed", 1)
    assert stored.last_error.startswith("TaskNotRunnable: ") and why in stored.last_error
    assert tasks.SEEN == []
    read = default_task_backend.get_result(str(item.id))
    assert read.status == TaskResultStatus.FAILED and read.task.module_path == path
    assert read.errors[0].exception_class_path.endswith("TaskNotRunnable")
    assert why in read.errors[0].traceback


def _as_result(item_id: Any) -> TaskResult:
    return default_task_backend.get_result(str(item_id))


def test_higher_priority_runs_first(member: OpContext) -> None:
    low = tasks.note.using(priority=-10).enqueue("low")
    high = tasks.note.using(priority=10).enqueue("high")
    mid = tasks.note.enqueue("mid")
    _run(_worker(capacity=1, claim_batch=1), _finished(member, low, high, mid))
    assert tasks.SEEN == [("note", "high"), ("note", "mid"), ("note", "low")]


def test_run_after_holds_a_task_back_until_then(member: OpContext) -> None:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1.5)
    later = tasks.note.using(run_after=when).enqueue("later")
    now = tasks.note.enqueue("now")
    assert tasks.note.get_result(later.id).task.run_after == when
    _run(_worker(), _finished(member, later, now))
    assert tasks.SEEN == [("note", "now"), ("note", "later")]
    later.refresh()
    assert later.started_at >= when


def test_the_signals_fire_for_each_attempt(member: OpContext) -> None:
    seen: list[tuple[str, str, int]] = []

    def receiver(signal: str) -> Callable[..., None]:
        def receive(sender: type, task_result: TaskResult, **kwargs: Any) -> None:
            seen.append((signal, task_result.status, task_result.attempts))

        return receive

    receivers = {
        task_enqueued: receiver("enqueued"),
        task_started: receiver("started"),
        task_finished: receiver("finished"),
    }
    for signal, receive in receivers.items():
        signal.connect(receive)
    try:
        result = tasks.flaky.enqueue(fail_times=1)
        _run(_worker(), _finished(member, result))
    finally:
        for signal, receive in receivers.items():
            signal.disconnect(receive)
    assert seen == [
        ("enqueued", "READY", 0),
        ("started", "RUNNING", 1),
        ("finished", "READY", 1),  # it will run again
        ("started", "RUNNING", 2),
        ("finished", "SUCCESSFUL", 2),
    ]


def test_the_signals_fire_for_an_async_task_too(member: OpContext) -> None:
    seen: list[tuple[str, str]] = []

    def started(sender: type, task_result: TaskResult, **kwargs: Any) -> None:
        # A sync receiver may use the ORM: it must not be called on the worker's loop.
        Org.objects.using("admin").count()
        seen.append(("started", task_result.status))

    async def finished(sender: type, task_result: TaskResult, **kwargs: Any) -> None:
        seen.append(("finished", task_result.status))

    task_started.connect(started)
    task_finished.connect(finished)
    try:
        result = tasks.async_add.enqueue(1, 1)
        _run(_worker(), _finished(member, result))
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    assert seen == [("started", "RUNNING"), ("finished", "SUCCESSFUL")]


def test_a_sync_task_runs_in_its_tenant_and_a_failed_attempt_leaves_no_writes(
    member: OpContext,
) -> None:
    result = tasks.books_then_fails_once.enqueue("SHP-1")
    _run(_worker(), _finished(member, result))
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 1
    assert Shipment.objects.using("admin").filter(org_id=member.org_id).count() == 1


def test_a_task_runs_under_its_items_context_and_may_enqueue_more(member: OpContext) -> None:
    parent = tasks.enqueues_add.enqueue(1, 2)
    where = tasks.tenant_of_the_run.enqueue()
    _run(_worker(), _finished(member, parent, where))
    parent.refresh()
    where.refresh()
    assert where.return_value == str(member.org_id)
    child = WorkItem.objects.using("admin").get(pk=parent.return_value)
    assert (child.org_id, child.created_by) == (member.org_id, member.user_id)
    assert child.payload["path"] == "tests.tasks.add"


def test_a_task_is_running_while_it_runs(member: OpContext) -> None:
    result = tasks.sleeps.enqueue(1.0)
    worker = _worker()

    def running() -> bool:
        with using_context(member):
            return default_task_backend.get_result(result.id).status == "RUNNING"

    _run(worker, running)
    # Stopped mid-task: handed back at the shutdown grace's end, or finished within it.
    result.refresh()
    assert result.worker_ids == [worker.worker_id]
    assert result.status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.READY)


def test_a_sync_task_waits_for_a_free_thread_before_it_starts(member: OpContext) -> None:
    """The worker keeps an async handler's capacity and gives DJANGO_TASK the threads its pool
    leaves (one here): the sync tasks it claims at once start one by one, each noted as started
    only once the one before has ended, while an async task runs beside them."""
    from workers.config import WorkerSettings

    own = WorkerSettings(kinds=("DJANGO_TASK",)).connections.own()
    sync = [tasks.sleeps_then_tells.enqueue(0.2) for _ in range(3)]
    beside = tasks.async_add.enqueue(1, 1)
    worker = _worker(capacity=4, db_pool_size=own + 1)
    assert (worker.settings.capacity, worker.settings.threads) == (4, 1)
    _run(worker, _finished(member, *sync, beside))
    for result in sync:
        result.refresh()
    runs = sorted((r.started_at, datetime.datetime.fromisoformat(r.return_value)) for r in sync)
    for (_, ended), (next_started, _) in itertools.pairwise(runs):
        assert next_started >= ended
    beside.refresh()
    assert beside.started_at < runs[-1][0]  # it did not wait for a thread
