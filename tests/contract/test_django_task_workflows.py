"""Chains and groups of Django tasks (``workers.django_tasks.workflows``) on PostgreSQL, without
a worker: what one enqueue writes, what it refuses (writing nothing), and how a step reads its
parents once they ended (the claim and completion a worker makes, called here directly)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from tenancy.contexts import OpContext
from tenancy.current import using_context
from tenancy.exceptions import NoContext
from tests import tasks
from workers.django_tasks.compat import (
    BaseTaskBackend,
    InvalidTask,
    TaskResultStatus,
    default_task_backend,
    task_enqueued,
)
from workers.django_tasks.parents import running_step
from workers.django_tasks.workflows import (
    chain,
    group,
    parent_counts,
    parent_results,
    step,
)
from workqueue import api, runtime
from workqueue.claim import claim
from workqueue.models import Dependency, WorkItem
from workqueue.settle import complete_many


@pytest.fixture
def member(ctx: OpContext) -> Iterator[OpContext]:
    """The member's context named as the current one, as a view of theirs would have it."""
    with using_context(ctx):
        yield ctx


def _items() -> dict[str, WorkItem]:
    return {str(i.id): i for i in WorkItem.objects.using("admin").all()}


def _edges() -> set[tuple[str, str, str]]:
    return {
        (str(d.parent_id), str(d.child_id), d.needs)
        for d in Dependency.objects.using("admin").all()
    }


class _Enqueued:
    """The ``task_enqueued`` signals sent while the block runs: (task path, result id)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __enter__(self) -> _Enqueued:
        task_enqueued.connect(self._receive)
        return self

    def __exit__(self, *exc: object) -> None:
        task_enqueued.disconnect(self._receive)

    def _receive(self, sender: type, task_result: Any, **kwargs: Any) -> None:
        self.seen.append((task_result.task.module_path, task_result.id))


def test_a_chain_is_one_workflow_of_task_items_each_waiting_for_the_one_before(
    member: OpContext,
) -> None:
    when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
    with _Enqueued() as enqueued:
        made = chain(
            step(tasks.add, 1, b=2),
            tasks.tenant_of_the_run.using(priority=5),  # a task alone: no arguments
            step(tasks.flaky.using(run_after=when), fail_times=0),
        ).enqueue()
    first, second, third = made.results
    assert made.created and made.workflow_id == first.id
    items = _items()
    assert set(items) == {r.id for r in made.results}
    assert [items[r.id].status for r in made.results] == ["pending", "waiting", "waiting"]
    assert {i.kind for i in items.values()} == {"DJANGO_TASK"}
    assert {str(i.workflow_id) for i in items.values()} == {made.workflow_id}
    assert items[first.id].payload == {
        "path": "tests.tasks.add",
        "args": [1],
        "kwargs": {"b": 2},
        "backend": "default",
    }
    # Each step is the item its .enqueue() would write: priority, run_after, retry policy.
    assert items[second.id].priority == 5
    assert items[third.id].available_at == when and "retry" in items[third.id].payload
    assert _edges() == {(first.id, second.id, "done"), (second.id, third.id, "done")}
    assert enqueued.seen == [
        ("tests.tasks.add", first.id),
        ("tests.tasks.tenant_of_the_run", second.id),
        ("tests.tasks.flaky", third.id),
    ]
    # Each step's result reads back as any task's: a waiting step is READY.
    for result in made.results:
        assert result.status == TaskResultStatus.READY
        assert result.task.get_result(result.id) == result
    assert (second.args, second.kwargs) == ([], {})


def test_a_group_waits_its_callbacks_for_its_members(member: OpContext) -> None:
    made = group(
        [step(tasks.add, n, n) for n in range(3)],
        on_success=step(tasks.reports_parents, "", "success"),
        on_complete=step(tasks.reports_parents, "", "complete"),
    ).enqueue()
    members = [r.id for r in made.members]
    assert made.on_success is not None and made.on_complete is not None
    success, complete = made.on_success.id, made.on_complete.id
    items = _items()
    assert [items[m].status for m in members] == ["pending"] * 3
    assert (items[success].status, items[complete].status) == ("waiting", "waiting")
    assert [items[m].payload["args"] for m in members] == [[0, 0], [1, 1], [2, 2]]
    assert _edges() == {(m, success, "done") for m in members} | {
        (m, complete, "finished") for m in members
    }
    assert made.workflow_id == members[0]
    assert made.on_success.args == ["", "success"]


def test_a_group_takes_one_callback_or_none(member: OpContext) -> None:
    only = group([tasks.tenant_of_the_run.using(priority=1)], on_complete=tasks.tenant_of_the_run)
    made = only.enqueue()
    assert made.on_success is None and made.on_complete is not None
    assert len(_items()) == 2
    bare = group([step(tasks.add, 1, 1), step(tasks.add, 2, 2)]).enqueue()
    assert bare.on_success is None and bare.on_complete is None and len(bare.members) == 2
    assert len(_items()) == 4


def test_a_key_makes_a_retried_enqueue_write_nothing(member: OpContext) -> None:
    def build() -> Any:
        return chain(step(tasks.add, 1, 2), step(tasks.add, 3, 4))

    first = build().enqueue(key="order:7")
    with _Enqueued() as enqueued:
        again = build().enqueue(key="order:7")
    assert first.created and not again.created
    assert [r.id for r in again.results] == [r.id for r in first.results]
    assert again.workflow_id == first.workflow_id
    assert len(_items()) == 2 and enqueued.seen == []
    other = build().enqueue(key="order:8")
    assert other.created and len(_items()) == 4


def test_a_rolled_back_transaction_takes_the_whole_workflow_back(member: OpContext) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        chain(step(tasks.add, 1, 2), step(tasks.add, 3, 4)).enqueue()
        group([step(tasks.add, 1, 2)], on_success=tasks.tenant_of_the_run).enqueue()
        raise RuntimeError("the view failed")
    assert _items() == {} and _edges() == set()


def test_aenqueue_joins_djangos_sync_thread(member: OpContext) -> None:
    async def go() -> Any:
        made = await chain(step(tasks.add, 1, 2), tasks.tenant_of_the_run).aenqueue(key="k")
        return made, await tasks.add.aget_result(made.results[0].id)

    made, read = asyncio.run(go())
    assert made.created and read.id == made.results[0].id
    assert set(_items()) == {r.id for r in made.results}

    async def go_group() -> Any:
        return await group([step(tasks.add, 1, 2)], on_success=tasks.tenant_of_the_run).aenqueue()

    assert asyncio.run(go_group()).on_success is not None


def test_the_workflow_is_its_tenants_only(member: OpContext, make_ctx) -> None:
    made = chain(step(tasks.add, 1, 2), step(tasks.add, 3, 4)).enqueue()
    assert {i.org_id for i in _items().values()} == {member.org_id}
    with using_context(make_ctx()):
        with pytest.raises(Exception, match="no task result"):
            default_task_backend.get_result(made.results[1].id)


# -- bad input: one error, naming the step, and nothing written ----------------------------------


def _other_backend() -> dict[str, Any]:
    from django.conf import settings

    dummy = BaseTaskBackend.__module__.rsplit(".", 1)[0] + ".dummy.DummyBackend"
    return {**settings.TASKS, "elsewhere": {"BACKEND": dummy}}


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (
            tasks.plain_function,
            InvalidTask,
            r"steps\[1\]: tests.tasks.plain_function \(function\) is not a task",
        ),
        (
            step(tasks.plain_function),
            InvalidTask,
            r"steps\[1\]: tests.tasks.plain_function \(function\) is not a task",
        ),
        (
            tasks.renamed,
            InvalidTask,
            r"steps\[1\] \(tests.tasks._impl\): the task's path 'tests.tasks._impl' leads to \w+",
        ),
        (
            step(tasks.add, datetime.date(2024, 1, 1), b=1),
            TypeError,
            r"steps\[1\] \(tests.tasks.add\): args\[0\]: a date is not JSON",
        ),
        (
            step(tasks.add, 1, b=float("nan")),
            ValueError,
            r"steps\[1\] \(tests.tasks.add\): kwargs\['b'\]: NaN and infinity",
        ),
        (
            step(tasks.add, "x" * 2_000_000, b=1),
            ValueError,
            r"steps\[1\] \(tests.tasks.add\): payload.*bytes",
        ),
    ],
    ids=["a-function", "a-step-of-a-function", "a-renamed-task", "a-date", "nan", "too-large"],
)
def test_a_bad_step_is_refused_by_name_and_nothing_is_written(
    member: OpContext, bad: Any, error: type[Exception], message: str
) -> None:
    with _Enqueued() as enqueued, pytest.raises(error, match=message):
        chain(step(tasks.add, 1, 2), bad, step(tasks.add, 3, 4)).enqueue()
    with pytest.raises(error, match=message.replace(r"steps\[1\]", r"members\[1\]")):
        group([step(tasks.add, 1, 2), bad]).enqueue()
    with pytest.raises(error, match=message.replace(r"steps\[1\]", "on_complete")):
        group([step(tasks.add, 1, 2)], on_success=tasks.add.using(), on_complete=bad).enqueue()
    assert _items() == {} and enqueued.seen == []


def test_a_task_of_another_backend_is_refused(member: OpContext) -> None:
    with override_settings(TASKS=_other_backend()):
        elsewhere = tasks.add.using(backend="elsewhere")
        with pytest.raises(
            InvalidTask,
            match=r"on_success \(tests.tasks.add\): its backend 'elsewhere' is a DummyBackend: a "
            r"workflow's steps run on the work queue",
        ):
            group([step(tasks.add, 1, 2)], on_success=step(elsewhere, 1, 2)).enqueue()
    assert _items() == {}


def test_empty_shapes_a_bad_key_and_no_tenant_are_refused(ctx: OpContext) -> None:
    with using_context(ctx):
        with pytest.raises(ValueError, match="chain: give it at least one task"):
            chain().enqueue()
        with pytest.raises(ValueError, match="group: give it at least one member"):
            group([], on_success=tasks.add).enqueue()
        with pytest.raises(api.InvalidPayload, match="key"):
            chain(step(tasks.add, 1, 2)).enqueue(key="k" * 201)
    with pytest.raises(InvalidTask, match=r"steps\[0\]: 5 \(int\) is not a task"):
        chain(5).enqueue()  # type: ignore[arg-type]
    with pytest.raises(NoContext):
        chain(step(tasks.add, 1, 2)).enqueue()
    assert _items() == {}


# -- a step reads its parents ---------------------------------------------------------------------


def _run_first(worker_rctx: Any, result_json: str) -> WorkItem:
    """Claim the one pending task and complete it with ``result_json`` as a worker would."""
    [(_, held)] = claim(worker_rctx, "default", ["DJANGO_TASK"], "w1", 30, 1)
    complete_many([runtime.Fence.of(held)], [result_json])
    return held


def _as_step(ctx: OpContext, result_id: str) -> Any:
    """What the handler sets while it runs the step ``result_id``."""
    item = WorkItem.objects.using("admin").get(pk=result_id)
    return running_step(ctx, item)


def test_a_chains_next_step_reads_what_the_one_before_returned(
    member: OpContext, worker_rctx: Any
) -> None:
    made = chain(step(tasks.add, 1, 2), step(tasks.adds_to_parents, "", "b", 1)).enqueue()
    first, second = made.results
    assert parent_results() == {} and parent_counts() == {}  # outside a step: no parents
    _run_first(worker_rctx, "3")
    assert _items()[second.id].status == "pending"  # in the statement that completed the first
    assert tasks.add.get_result(first.id).return_value == 3
    with _as_step(member, second.id):
        assert parent_results() == {first.id: 3}
        assert parent_counts() == {"SUCCESSFUL": 1}
    with _as_step(member, first.id):
        assert parent_results() == {}


def test_a_callback_counts_its_members_as_their_results_read(
    member: OpContext, worker_rctx: Any
) -> None:
    made = group(
        [step(tasks.add, 1, 2), step(tasks.add, 3, 4), step(tasks.add, 5, 6)],
        on_complete=step(tasks.reports_parents, "", "complete"),
    ).enqueue()
    assert made.on_complete is not None
    done = _run_first(worker_rctx, '{"ok": true}')
    cancelled = next(m.id for m in made.members if m.id != str(done.id))
    api.cancel(member, cancelled)
    with _as_step(member, made.on_complete.id):
        counts = parent_counts()
        results = parent_results()
    # The third is still to run: READY, as its result reads.
    assert counts == {"SUCCESSFUL": 1, "FAILED": 1, "READY": 1}
    assert results == {str(m.id): None for m in made.members} | {str(done.id): {"ok": True}}
    assert tasks.add.get_result(cancelled).status == TaskResultStatus.FAILED


def test_the_sync_helpers_refuse_an_event_loop() -> None:
    async def go() -> None:
        with pytest.raises(RuntimeError, match=r"in an async task, await aparent_results\(\)"):
            parent_results()

    asyncio.run(go())
