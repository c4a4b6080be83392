"""Progress from a Django task: ``progress(done, total, note=...)`` and ``set_meta({...})`` are
to a ``@task`` function what ``run.progress`` and ``run.set_meta`` are to a handler
(``workqueue/progress.py``): each records the latest value for the worker to write to the
task's item, throttled, the last one before its outcome.

    from workers.django_tasks.progress import progress, set_meta

    @task
    def import_rows(path: str) -> int:
        for n, row in enumerate(rows, 1):
            progress(n, total, note=path)
        set_meta({"skipped": skipped})

The task's result (``get_result(id)``) does not carry them: Django's ``TaskResult`` is a frozen
dataclass with slots and a fixed set of fields (``refresh()`` copies only those), with no room
for more. They are read where an item's are: ``GET /api/work/<result.id>`` and the admin's item
page (a task's result id is its item's id).

Called outside the worker (a test calling the function itself, another backend), each checks
its arguments as the worker would and records nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from workqueue.runtime import Run, check_meta, check_progress

# The run of the task the worker is calling in this context (its thread copies the context).
_RUN: ContextVar[Run | None] = ContextVar("workqueue_task_run", default=None)


def progress(done: float, total: float | None = None, *, note: str = "") -> None:
    """Say how far the running task got (``Run.progress``: ``ValueError`` naming a bad
    argument)."""
    run = _RUN.get()
    if run is None:
        check_progress(done, total, note)
        return
    run.progress(done, total, note=note)


def set_meta(meta: Mapping[str, Any]) -> None:
    """Merge ``meta`` into the running task's metadata (``Run.set_meta``: ``ValueError``
    naming ``meta`` when it is not JSON or too large)."""
    run = _RUN.get()
    if run is None:
        check_meta(meta)
        return
    run.set_meta(meta)


@contextlib.contextmanager
def reporting_to(run: Run) -> Iterator[None]:
    """While the block runs, ``progress`` and ``set_meta`` report to ``run`` (and in the
    threads the block hands work to with the context copied: ``Run.in_thread``)."""
    token = _RUN.set(run)
    try:
        yield
    finally:
        _RUN.reset(token)
