"""Schedules of Django ``@task`` functions: each tick enqueues one call of the task, as
``Task.enqueue()`` would (its queue, priority and retry policy), for the site or each tenant.

    from django.tasks import task
    from workers.django_tasks.schedules import scheduled

    @scheduled(cron="0 3 * * *", kwargs={"days": 1})
    @task(queue_name="reports")
    def nightly_report(days: int) -> None: ...

A schedule is found when its module is imported at start, in every process that sweeps: put
the task in the app's ``work`` module, or import it from there. The declaration is checked where
it is made (the rule; the arguments, as JSON and as the function takes them), and the task's
backend (the work queue's) once every module is loaded (``workers.schedules.check_declarations``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from workers.django_tasks.compat import Task
from workers.django_tasks.kind import DJANGO_TASK
from workers.django_tasks.values import json_arguments
from workers.schedules import Schedule, ScheduledItem, Tenants, register_schedule


def schedule_task(
    task: Task[..., Any],
    *,
    name: str | None = None,
    every: timedelta | None = None,
    cron: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    tenant: Tenants = None,
    timezone: str = "UTC",
) -> Schedule:
    """Declare a schedule that enqueues ``task(*args, **kwargs)`` at every tick; its name is
    the task's path unless given."""
    if not isinstance(task, Task):
        raise ImproperlyConfigured(
            f"schedule {name or task!r}: schedule a django.tasks Task (put @scheduled above @task)"
        )
    label = name or task.module_path
    try:
        json_arguments(args, kwargs or {})
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"schedule {label!r}: {exc}") from None
    try:
        # Every tick would fail the same way in the worker: refused here, at start, instead.
        inspect.signature(task.func).bind(*args, **(kwargs or {}))
    except TypeError as exc:
        raise ImproperlyConfigured(
            f"schedule {label!r}: the arguments do not fit {task.module_path}: {exc}"
        ) from None
    call_args, call_kwargs = list(args), dict(kwargs or {})

    def build(tick: datetime) -> ScheduledItem:
        from workers.django_tasks.backend import WorkQueueBackend

        backend = task.get_backend()
        if not isinstance(backend, WorkQueueBackend):
            raise ImproperlyConfigured(
                f"schedule {label!r}: the task's backend {task.backend!r} is not the work queue's"
            )
        payload, max_attempts = backend.task_item(task, call_args, call_kwargs)
        return ScheduledItem(
            DJANGO_TASK.name, payload, task.queue_name, task.priority, max_attempts
        )

    return register_schedule(
        Schedule(
            label,
            DJANGO_TASK.name,
            every=every,
            cron=cron,
            lane=task.queue_name,
            priority=task.priority,
            tenant=tenant,
            timezone=timezone,
            description=f"the task {task.module_path}",
            build=build,
        )
    )


def scheduled(**options: Any) -> Callable[[Task[..., Any]], Task[..., Any]]:
    """``schedule_task`` as a decorator, above ``@task``; the task is left as it is."""

    def declare(task: Task[..., Any]) -> Task[..., Any]:
        schedule_task(task, **options)
        return task

    return declare
