"""The ``TASKS`` backend: Django's task API on the work queue.

    TASKS = {"default": {"BACKEND": "workers.django_tasks.backend.WorkQueueBackend"}}

``Task.enqueue()`` writes a ``DJANGO_TASK`` work item in the caller's transaction (a rollback
takes it back) for the current tenant (``tenancy.current``: the signed-in member's in a view,
or one named with ``workqueue.api.tenant``; a single-tenant site's one tenant by default);
``manage.py runworker DJANGO_TASK`` runs it with the queue's leases, fencing, retries and dead
letters; ``get_result()`` reads it back, for its tenant only. A queue is a lane, ``priority``
and ``run_after`` are the item's, and the retry policy and the time limit come from
``OPTIONS`` or the task's ``@retries`` and ``@time_limit`` (``policy.py``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.apps import apps
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from tenancy.naming import require_context
from workers.django_tasks import records
from workers.django_tasks.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from workers.django_tasks.kind import ALIAS_PATTERN, DJANGO_TASK, RetrySpec
from workers.django_tasks.policy import (
    RETRIES_ATTRIBUTE,
    TIME_LIMIT_ATTRIBUTE,
    Retries,
    parse_options,
    task_policy,
)
from workers.django_tasks.results import task_result
from workers.django_tasks.values import json_arguments
from workqueue import runtime

APP = "workers.django_tasks"


class WorkQueueBackend(BaseTaskBackend):
    """Tasks as work items of the ``DJANGO_TASK`` kind, run by ``runworker DJANGO_TASK``."""

    # Are its tasks items of this queue, run by runworker DJANGO_TASK? (loading.queue_backend)
    runs_on_this_queue = True
    # Does the backend support Tasks to be enqueued with the run_after attribute?
    supports_defer = True
    # Does the backend support coroutines to be enqueued? (They run on the worker's loop.)
    supports_async_task = True
    # Does the backend support results being retrieved (from any thread/process)?
    supports_get_result = True
    # Does the backend support executing Tasks in a given priority order?
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        # Parsed here, never checked against the database: tasks are validated as their
        # modules are imported, before any connection may be wanted.
        self.policy, self.problems = parse_options(self.options)
        if not re.fullmatch(ALIAS_PATTERN, alias):
            self.problems.append("the TASKS alias must be 1 to 100 letters, digits or _ . -")
        for queue in sorted(self.queues, key=str):
            try:
                runtime.check_lane(queue, "QUEUES")
            except runtime.InvalidPayload as exc:
                self.problems.append(f"{exc} (a queue is a work lane)")

    # -- validation ---------------------------------------------------------------------------

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's rules (a module-level function, a priority from -100 to 100, an aware
        ``run_after``, a queue in ``QUEUES``), then this queue's: the queue is a lane name, a
        worker can import the function's module, and a retry policy on it came from
        ``@retries``. (Whether the path leads back to the task is checked at enqueue: while a
        module is imported, its tasks are not bound to their names yet.)"""
        super().validate_task(task)
        try:
            runtime.check_lane(task.queue_name, "queue_name")
        except runtime.InvalidPayload as exc:
            raise InvalidTask(str(exc)) from None
        if task.func.__module__ == "__main__":
            raise InvalidTask(
                "a task defined in a script (__main__) cannot be imported by a worker: "
                "move it into a module"
            )
        spec = getattr(task.func, RETRIES_ATTRIBUTE, None)
        if spec is not None and not isinstance(spec, Retries):
            raise InvalidTask(f"{RETRIES_ATTRIBUTE} must be set by @retries, not by hand")
        limit = getattr(task.func, TIME_LIMIT_ATTRIBUTE, None)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, float)):
            raise InvalidTask(f"{TIME_LIMIT_ATTRIBUTE} must be set by @time_limit, not by hand")

    def _check_path(self, task: Task[..., Any]) -> None:
        """A worker imports the task by ``module_path``: it must lead back to this task (not
        to a method, a renamed function, or something that is not a task)."""
        path = task.module_path
        try:
            found = import_string(path)
        except ImportError as exc:
            raise InvalidTask(f"the task's path {path!r} does not import: {exc}") from None
        if not (isinstance(found, Task) and found.func is task.func):
            raise InvalidTask(
                f"the task's path {path!r} leads to {type(found).__name__}, not this task: a "
                "worker imports a task by its function's module and name, so decorate a "
                "module-level function with @task and keep its name"
            )

    # -- enqueue ------------------------------------------------------------------------------

    def enqueue[**P, R](
        self, task: Task[P, R], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[P, R]:
        """Write the task's work item in the current tenant, joining the caller's transaction;
        returns its READY result and sends ``task_enqueued`` (at once, as Django's database
        backends do: a rollback later takes the item back, not the signal).

        Refused before anything is written: an invalid task (``InvalidTask``), arguments that
        are not JSON (``TypeError``/``ValueError`` naming the argument), a misconfigured
        backend (``ImproperlyConfigured``), no current tenant (``tenancy.exceptions.NoContext``).
        """
        new = self.new_item(task, args, kwargs)
        ctx = require_context("enqueueing a task")
        item, _ = runtime.enqueue(ctx, *new)
        result = self.ready_result(task, item.id, item.created_at, new.payload)
        task_enqueued.send(type(self), task_result=result)
        return result

    def new_item(
        self, task: Task[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> runtime.NewItem:
        """The work item of one call of ``task`` (its queue the lane; its priority, run_after
        and attempts the item's), after every check ``enqueue`` makes before it writes
        (``task_item``); a workflow's steps are made here too (``workflows.py``)."""
        payload, max_attempts = self.task_item(task, args, kwargs)
        return runtime.NewItem(
            DJANGO_TASK.name,
            payload,
            lane=task.queue_name,
            priority=task.priority,
            available_at=task.run_after,
            max_attempts=max_attempts,
        )

    def ready_result[**P, R](
        self,
        task: Task[P, R],
        item_id: uuid.UUID,
        enqueued_at: datetime | None,
        payload: Mapping[str, Any],
    ) -> TaskResult[P, R]:
        """The READY result of a task just enqueued as the item ``item_id``."""
        return TaskResult(
            task=task,
            id=str(item_id),
            status=TaskResultStatus.READY,
            enqueued_at=enqueued_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )

    def task_item(
        self, task: Task[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, Any], int]:
        """The ``DJANGO_TASK`` payload of one call of ``task`` and its attempts, after every
        check ``enqueue`` makes before it writes (the schedules of tasks make theirs here too).
        """
        self.validate_task(task)
        if self.problems:
            raise ImproperlyConfigured(f"TASKS[{self.alias!r}]: " + "; ".join(self.problems))
        self._check_path(task)
        try:
            policy = task_policy(task, self.policy)
        except ValueError as exc:
            raise InvalidTask(f"{task.module_path}: {exc}") from None
        json_args, json_kwargs = json_arguments(args, kwargs)
        payload: dict[str, Any] = {
            "path": task.module_path,
            "args": json_args,
            "kwargs": json_kwargs,
            "backend": self.alias,
        }
        if policy.retry != DJANGO_TASK.retry:  # carried only when it is not the kind's
            payload["retry"] = RetrySpec.of(policy.retry).model_dump()
        if policy.timeout_s is not None:  # carried only when the backend or task sets one
            payload["timeout_s"] = policy.timeout_s
        if task.run_after is not None:
            payload["run_after"] = task.run_after
        return payload, policy.max_attempts

    # aenqueue: Django's default, ``enqueue`` through ``sync_to_async(thread_sensitive=True)``,
    # so it joins the transaction open on Django's connection there, as ``enqueue`` does.
    # (``workqueue.api.aenqueue`` commits on its own connection instead.)

    # -- results ------------------------------------------------------------------------------

    def get_result(self, result_id: str | uuid.UUID) -> TaskResult[..., Any]:
        """The task's result as stored now, read in the current tenant; another tenant's task
        (or another kind's item, or no item) is ``TaskResultDoesNotExist``."""
        try:
            item_id = result_id if isinstance(result_id, uuid.UUID) else uuid.UUID(result_id)
        except (TypeError, ValueError, AttributeError):
            raise TaskResultDoesNotExist(f"no task result {str(result_id)[:64]!r}") from None
        ctx = require_context("reading a task result")
        stored = records.read(ctx, item_id)
        if stored is None:
            raise TaskResultDoesNotExist(f"no task result {str(item_id)!r}")
        return task_result(item_id, stored, self.alias)

    # aget_result: Django's default, ``get_result`` through ``sync_to_async``.

    # -- checks -------------------------------------------------------------------------------

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """The backend's configuration as system checks (no database is read)."""
        where = f"TASKS[{self.alias!r}]"
        found: list[checks.CheckMessage] = [
            checks.Error(f"{where}: {problem}", obj=where, id="djtasks.E001")
            for problem in self.problems
        ]
        if not apps.is_installed(APP):
            found.append(
                checks.Error(
                    f"{where} uses the work queue's backend, but {APP!r} is not installed",
                    hint=f"add {APP!r} to INSTALLED_APPS (its table keeps each task's result)",
                    obj=where,
                    id="djtasks.E002",
                )
            )
        return found
