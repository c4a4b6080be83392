"""Chains and groups of ``@task`` calls: this queue's extension of Django's task API, which has
neither. Each is one of the queue's workflows (``workqueue.api.Workflow``) whose steps are
``DJANGO_TASK`` items, enqueued whole in the caller's transaction, or not at all.

    from workers.django_tasks.workflows import chain, group, parent_counts, parent_results, step

    chain(step(fetch, url), parse, store.using(queue_name="db")).enqueue(key=f"import:{url}")
    group(
        [step(resize, photo.pk, size) for size in (64, 256, 1024)],
        on_success=publish,                        # once every member succeeded
        on_complete=step(report, photo.pk),        # once every member finished, however
    ).enqueue()

A step is a task (called with no arguments) or ``step(task, *args, **kwargs)``; the task's
``.using(...)`` sets its queue, priority, run_after or backend, as for ``.enqueue()``. Inside a
step, ``parent_results()`` is what the steps it waited for returned and ``parent_counts()`` how
they ended (``parents.py``). Each step's ``TaskResult`` is read with ``get_result(id)`` as any
task's (a step waiting for its parents reads READY).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured

from tenancy.contexts import OpContext
from tenancy.naming import require_context
from workers.django_tasks import records
from workers.django_tasks.backend import WorkQueueBackend
from workers.django_tasks.compat import InvalidTask, Task, TaskResult, task_enqueued
from workers.django_tasks.parents import (
    aparent_counts,
    aparent_results,
    parent_counts,
    parent_results,
)
from workqueue import runtime

__all__ = [
    "Chain",
    "ChainResult",
    "Group",
    "GroupResult",
    "TaskStep",
    "aparent_counts",
    "aparent_results",
    "chain",
    "group",
    "parent_counts",
    "parent_results",
    "step",
]


@dataclass(frozen=True)
class TaskStep:
    """One call of a ``@task`` in a chain or a group: the task and its arguments."""

    task: Task[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def step(task: Task[..., Any], /, *args: Any, **kwargs: Any) -> TaskStep:
    """``task`` called with ``args`` and ``kwargs``, as a step (Celery's ``task.s(...)``)."""
    return TaskStep(task, args, kwargs)


# What a chain or a group takes for a step: a task called with no arguments, or a TaskStep.
type Steppable = Task[..., Any] | TaskStep


class _Planned(NamedTuple):
    """A step checked: its task, the backend it goes through, its work item."""

    task: Task[..., Any]
    backend: WorkQueueBackend
    item: runtime.NewItem


def _plan(given: object, where: str) -> _Planned:
    """``given`` as a step's item, after every check an enqueue of it makes; else one error
    naming the step (``where``), as ``enqueue`` raises it: ``InvalidTask`` for the task,
    ``TypeError``/``ValueError`` for its arguments, ``ImproperlyConfigured`` for its backend."""
    call = TaskStep(given) if isinstance(given, Task) else given
    if not isinstance(call, TaskStep) or not isinstance(call.task, Task):
        shown = call.task if isinstance(call, TaskStep) else given
        name = getattr(shown, "__qualname__", None)
        module = getattr(shown, "__module__", None)
        label = f"{module}.{name}" if isinstance(name, str) else repr(shown)[:60]
        raise InvalidTask(
            f"{where}: {label} ({type(shown).__name__}) is not a task: give a function "
            "decorated with @task, or step(task, *args, **kwargs)"
        )
    task = call.task
    backend = task.get_backend()
    if not isinstance(backend, WorkQueueBackend):
        raise InvalidTask(
            f"{where} ({task.module_path}): its backend {task.backend!r} is a "
            f"{type(backend).__name__}: a workflow's steps run on the work queue, through a "
            f"TASKS backend of {WorkQueueBackend.__module__}.{WorkQueueBackend.__name__}"
        )
    try:
        item = backend.new_item(task, call.args, call.kwargs)
        runtime.validated(item)  # the queue's own checks (the payload's size)
    except (InvalidTask, ImproperlyConfigured, TypeError, ValueError) as exc:
        raise type(exc)(f"{where} ({task.module_path}): {exc}") from None
    return _Planned(task, backend, item)


def _plan_all(steps: Iterable[tuple[str, object]]) -> list[_Planned]:
    return [_plan(given, where) for where, given in steps]


def _write(
    ctx: OpContext, workflow: runtime.Workflow, planned: Sequence[_Planned]
) -> tuple[str, list[TaskResult[..., Any]], bool]:
    """Enqueue ``workflow`` (made of ``planned``, in order) in the caller's transaction: its
    id, each step's READY result, and whether this call wrote it (False: its key found one
    written before; nothing was written, and the results name that one's steps)."""
    declared = runtime.enqueue_workflow(ctx, workflow)
    # Every step was inserted by one statement: the first one's time is each one's.
    first = records.read(ctx, declared.ids[0])
    enqueued_at = None if first is None else first.created_at
    results = [
        p.backend.ready_result(p.task, item_id, enqueued_at, p.item.payload)
        for p, item_id in zip(planned, declared.ids, strict=True)
    ]
    created = declared.outcome == runtime.Outcome.INSERTED
    if created:
        for p, result in zip(planned, results, strict=True):
            task_enqueued.send(type(p.backend), task_result=result)
    return str(declared.workflow_id), results, created


@dataclass(frozen=True)
class ChainResult:
    """A chain as enqueued: its workflow's id (``workqueue.api.cancel_workflow`` takes it),
    each step's result in the chain's order, and whether this call wrote it."""

    workflow_id: str
    results: tuple[TaskResult[..., Any], ...]
    created: bool


@dataclass(frozen=True)
class GroupResult:
    """A group as enqueued: its workflow's id, its members' results in their order, its
    callbacks' (None: not given), and whether this call wrote it."""

    workflow_id: str
    members: tuple[TaskResult[..., Any], ...]
    on_success: TaskResult[..., Any] | None
    on_complete: TaskResult[..., Any] | None
    created: bool


@dataclass(frozen=True)
class Chain:
    """Tasks that run one after another: each once the one before it succeeded (a step that
    fails for good holds the rest, which wait until it is requeued and succeeds, or the
    workflow is cancelled)."""

    steps: tuple[Steppable, ...]

    def enqueue(self, *, key: str | None = None) -> ChainResult:
        """Write every step in the current tenant, joining the caller's transaction; sends
        ``task_enqueued`` for each. ``key`` (at most 200 characters): enqueued again under the
        same key in the tenant, nothing is written and the first one's steps are returned
        (``created`` False). Refused before anything is written, with one error naming the
        step (``steps[1] (app.tasks.parse): ...``): a step that is not a task of this queue's
        backend, or is refused by ``.enqueue()`` (an invalid task, arguments that are not
        JSON); an empty chain; no current tenant (``NoContext``)."""
        if not self.steps:
            raise ValueError("chain: give it at least one task")
        planned = _plan_all((f"steps[{i}]", given) for i, given in enumerate(self.steps))
        ctx = require_context("enqueueing a chain of tasks")
        workflow = runtime.Workflow(key=key)
        workflow.chain(*(p.item for p in planned))
        workflow_id, results, created = _write(ctx, workflow, planned)
        return ChainResult(workflow_id, tuple(results), created)

    async def aenqueue(self, *, key: str | None = None) -> ChainResult:
        """``enqueue`` in Django's sync thread (joining a transaction open there), as
        ``Task.aenqueue`` does."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(key=key)


@dataclass(frozen=True)
class Group:
    """Tasks that run side by side, with callbacks run exactly once: ``on_success`` when every
    member succeeded (a member that fails for good holds it), ``on_complete`` when every member
    finished, however (succeeded, failed for good, or cancelled)."""

    members: tuple[Steppable, ...]
    on_success: Steppable | None = None
    on_complete: Steppable | None = None

    def enqueue(self, *, key: str | None = None) -> GroupResult:
        """Write every member and callback in the current tenant, joining the caller's
        transaction, as ``Chain.enqueue`` does (errors name ``members[2]``, ``on_success``,
        ``on_complete``)."""
        n = len(self.members)
        if not n:
            raise ValueError("group: give it at least one member")
        callbacks = [(name, getattr(self, name)) for name in ("on_success", "on_complete")]
        given = [(name, callback) for name, callback in callbacks if callback is not None]
        planned = _plan_all(
            [*((f"members[{i}]", member) for i, member in enumerate(self.members)), *given]
        )
        ctx = require_context("enqueueing a group of tasks")
        items = {name: p.item for (name, _), p in zip(given, planned[n:], strict=True)}
        workflow = runtime.Workflow(key=key)
        workflow.group(
            [p.item for p in planned[:n]],
            on_success=items.get("on_success"),
            on_complete=items.get("on_complete"),
        )
        workflow_id, results, created = _write(ctx, workflow, planned)
        found = dict(zip([name for name, _ in given], results[n:], strict=True))
        return GroupResult(
            workflow_id,
            tuple(results[:n]),
            found.get("on_success"),
            found.get("on_complete"),
            created,
        )

    async def aenqueue(self, *, key: str | None = None) -> GroupResult:
        """``enqueue`` in Django's sync thread, as ``Chain.aenqueue``."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)(key=key)


def chain(*steps: Steppable) -> Chain:
    """Tasks to run one after another (``.enqueue(key=...)`` writes them):
    ``chain(step(fetch, url), parse, store)``."""
    return Chain(steps)


def group(
    members: Iterable[Steppable],
    *,
    on_success: Steppable | None = None,
    on_complete: Steppable | None = None,
) -> Group:
    """Tasks to run side by side, and the callbacks to run once after them (``.enqueue(key=...)``
    writes them): ``group([step(resize, pk, s) for s in sizes], on_success=publish)``."""
    return Group(tuple(members), on_success, on_complete)
