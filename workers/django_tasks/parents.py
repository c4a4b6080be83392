"""What a task run as a workflow's step learns of the steps it waited for (its parents): what
they returned, and how they ended, counted (``workflows.py`` makes the steps).

    from workers.django_tasks.workflows import parent_counts, parent_results

    @task
    def store(path: str) -> int:
        [rows] = parent_results().values()      # a chain's step: what the step before returned
        ...

    @task
    def report() -> None:
        counts = parent_counts()                # a group's callback: {"SUCCESSFUL": 9, "FAILED": 1}

Each is one statement, read when it is called (a task that asks nothing costs nothing), in the
task's tenant: in a sync task on its transaction, in an async task ``await aparent_results()``
/ ``await aparent_counts()``. A task that is no step (enqueued alone, or called outside the
worker, as a test calls the function itself) waited for nothing: ``{}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from tenancy.contexts import OpContext
from workers.django_tasks.results import STATUSES
from workqueue import runtime

# The step the worker is running in this context, with the context it runs under: set only for
# an item of a workflow (its thread copies the context).
_STEP: ContextVar[tuple[OpContext, uuid.UUID] | None] = ContextVar(
    "workqueue_task_step", default=None
)


@contextlib.contextmanager
def running_step(ctx: OpContext, item: runtime.WorkItem) -> Iterator[None]:
    """While the block runs, the helpers here read the parents of ``item`` (when it is a
    workflow's step: nothing else has any)."""
    token = _STEP.set((ctx, item.id) if item.workflow_id is not None else None)
    try:
        yield
    finally:
        _STEP.reset(token)


def _sync_step(name: str) -> tuple[OpContext, uuid.UUID] | None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _STEP.get()
    raise RuntimeError(f"{name}() reads the database: in an async task, await a{name}()")


def _results(found: dict[uuid.UUID, Any]) -> dict[str, Any]:
    return {str(parent_id): value for parent_id, value in found.items()}


def _counts(found: dict[str, int]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for status, n in found.items():
        # As get_result reads it: waiting or pending READY, claimed RUNNING, done SUCCESSFUL,
        # and every other end (failed, cancelled, discarded) FAILED.
        counts[str(STATUSES.get(status, STATUSES[runtime.Status.FAILED]))] += n
    return dict(counts)


def parent_results() -> dict[str, Any]:
    """What each step the running task waited for returned, by its result id (a chain's step:
    the step before it; a group's callback: its members), read in one statement; None for one
    that is not done (an ``on_complete`` callback's failed members) or returned None. At most
    1,000 parents: a callback of a larger group reads them page by page with
    ``workqueue.api.read_parents``."""
    step = _sync_step("parent_results")
    return {} if step is None else _results(runtime.parent_results(*step))


async def aparent_results() -> dict[str, Any]:
    """``parent_results`` in an async task."""
    step = _STEP.get()
    return {} if step is None else _results(await runtime.aparent_results(*step))


def parent_counts() -> dict[str, int]:
    """How many of the steps the running task waited for are in each of Django's statuses (a
    group's callback: ``{"SUCCESSFUL": 998, "FAILED": 2}``; cancelled members count as FAILED,
    as their results read), in one statement."""
    step = _sync_step("parent_counts")
    return {} if step is None else _counts(runtime.count_parents(*step))


async def aparent_counts() -> dict[str, int]:
    """``parent_counts`` in an async task."""
    step = _STEP.get()
    return {} if step is None else _counts(await runtime.acount_parents(*step))
