"""The task an item names: imported by its path, and only ever a ``@task`` of this queue.

An item's path is data (anyone who may enqueue any kind could write any path), so a worker
runs it only when it imports to a ``django.tasks.Task`` of a backend of this queue; a
standard-library module or ``__main__`` is never even imported (any other module named is
imported, then refused unless it holds that task). Whatever is wrong is ``TaskNotRunnable``
naming the path: a permanent failure, never a retry loop.
"""

from __future__ import annotations

import sys
import types
from datetime import datetime
from functools import lru_cache
from typing import Any

from django.utils.module_loading import import_string

from workers.django_tasks.compat import InvalidTask, InvalidTaskBackend, Task, task_backends
from workers.django_tasks.exceptions import TaskNotRunnable


def _import(path: str) -> Any:
    top = path.split(".", 1)[0]
    if top == "__main__" or top in sys.stdlib_module_names:
        # Never imported: no task lives there, and some such modules act on import.
        raise TaskNotRunnable(f"the task path {path!r} names no task module ({top!r})")
    try:
        return import_string(path)
    except ImportError as exc:
        raise TaskNotRunnable(f"cannot import the task {path!r}: {exc}") from exc
    except Exception as exc:  # the module itself raised as it was imported
        raise TaskNotRunnable(
            f"importing the task {path!r} raised {type(exc).__name__}: {exc}"
        ) from exc


def queue_backend(alias: str) -> Any:
    """The ``TASKS`` backend ``alias``, if it is this queue's (``WorkQueueBackend`` or a
    subclass: it says so by ``runs_on_this_queue``); else ``TaskNotRunnable``."""
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as exc:
        raise TaskNotRunnable(f"the TASKS backend {alias!r} is not configured: {exc}") from exc
    if not getattr(type(backend), "runs_on_this_queue", False):
        raise TaskNotRunnable(f"the TASKS backend {alias!r} is not this queue's")
    return backend


@lru_cache(maxsize=1024)
def runnable_task(path: str, alias: str, priority: int, queue_name: str) -> Task[..., Any]:
    """The task ``path`` names, as enqueued (through ``alias``, at ``priority``, on
    ``queue_name``), validated by its backend; ``TaskNotRunnable`` when there is none.
    Cached: a worker meets the same few tasks again and again (failures are not cached)."""
    found = _import(path)
    if not isinstance(found, Task):
        raise TaskNotRunnable(
            f"{path!r} is a {type(found).__name__}, not a task: only a function decorated "
            "with @task (django.tasks) runs"
        )
    queue_backend(alias)
    try:
        return found.using(priority=priority, queue_name=queue_name, backend=alias)
    except InvalidTask as exc:
        raise TaskNotRunnable(f"the task {path!r} is not valid here: {exc}") from exc


def _unrunnable(*args: Any, **kwargs: Any) -> Any:
    raise TaskNotRunnable("this task's path does not import to a task")


def _as_read(func: Any, alias: str, priority: int, queue_name: str, **more: Any) -> Task[..., Any]:
    """A Task built without its backend's validation: a result must stay readable when its
    task no longer validates (its module renamed, its queue taken out of QUEUES)."""
    task = object.__new__(Task)
    fields = {
        "priority": priority,
        "func": func,
        "backend": alias,
        "queue_name": queue_name,
        "run_after": None,
        "takes_context": False,
    }
    fields.update(more)
    for name, value in fields.items():
        object.__setattr__(task, name, value)
    return task


def readable_task(
    path: str, alias: str, priority: int, queue_name: str, run_after: datetime | None
) -> Task[..., Any]:
    """The task of a stored result: the one its path names when it still runs; else a
    stand-in whose ``module_path`` is the stored path (calling it raises ``TaskNotRunnable``)."""
    try:
        task = runnable_task(path, alias, priority, queue_name)
    except TaskNotRunnable:
        found = None
        try:
            found = _import(path)
        except TaskNotRunnable:
            pass
        if isinstance(found, Task):
            func, takes_context = found.func, found.takes_context
        else:
            module, _, name = path.rpartition(".")
            func = types.FunctionType(_unrunnable.__code__, _unrunnable.__globals__, name)
            func.__module__, func.__qualname__ = module, name
            takes_context = False
        return _as_read(
            func, alias, priority, queue_name, run_after=run_after, takes_context=takes_context
        )
    if run_after is None:
        return task
    return _as_read(
        task.func,
        task.backend,
        task.priority,
        task.queue_name,
        run_after=run_after,
        takes_context=task.takes_context,
    )
