"""A stored task as Django's ``TaskResult``: the item's status, times and arguments, and its
record's attempts, return value and errors."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from workers.django_tasks.compat import TaskError, TaskResult, TaskResultStatus
from workers.django_tasks.exceptions import (
    DeadLettered,
    InvalidReturnValue,
    TaskFailed,
    TaskNotRunnable,
    TaskRaised,
)
from workers.django_tasks.loading import readable_task
from workers.django_tasks.records import Stored
from workqueue.runtime import Status

STATUSES: dict[str, TaskResultStatus] = {
    # A step of a workflow whose parents have not ended: it will run, as a pending one will.
    Status.WAITING: TaskResultStatus.READY,
    Status.PENDING: TaskResultStatus.READY,
    Status.CLAIMED: TaskResultStatus.RUNNING,
    Status.DONE: TaskResultStatus.SUCCESSFUL,
    Status.FAILED: TaskResultStatus.FAILED,
}

# The last error of an item failed by the task handler starts with one of these (the worker
# writes "<exception name>: <message>"); any other dead letter is the queue's own doing.
_HANDLER_ERRORS = tuple(
    f"{cls.__name__}: " for cls in (TaskRaised, TaskFailed, TaskNotRunnable, InvalidReturnValue)
)
DEAD_LETTERED = f"{DeadLettered.__module__}.{DeadLettered.__qualname__}"


def _run_after(stored: object) -> datetime | None:
    return datetime.fromisoformat(stored) if isinstance(stored, str) else None


def task_result(item_id: uuid.UUID, stored: Stored, reader_alias: str) -> TaskResult[..., Any]:
    """The ``TaskResult`` of a stored task (read through the backend ``reader_alias``)."""
    # A status this backend does not know (an operator's own, say) is final: FAILED.
    status = STATUSES.get(stored.status, TaskResultStatus.FAILED)
    payload = stored.payload
    alias = payload.get("backend") or reader_alias
    task = readable_task(
        str(payload.get("path", "")),
        alias,
        stored.priority,
        stored.lane,
        # The caller's run_after, as enqueue() returned it (None when none was set): when a
        # waiting item runs (its retry's delay included) is the item's available_at.
        _run_after(payload.get("run_after")),
    )
    errors = [
        TaskError(exception_class_path=e["exception_class_path"], traceback=e["traceback"])
        for e in stored.errors
    ]
    if status == TaskResultStatus.FAILED and not stored.last_error.startswith(_HANDLER_ERRORS):
        # A dead letter the task's own errors do not explain (its lease ran out with its
        # attempts spent, its tenant is gone): the queue's note says why.
        errors.append(TaskError(exception_class_path=DEAD_LETTERED, traceback=stored.last_error))
    worker_ids = list(stored.worker_ids)
    if status == TaskResultStatus.RUNNING and stored.claimed_by and not worker_ids:
        worker_ids = [stored.claimed_by]  # claimed; its start is not recorded yet
    finished = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
    result = TaskResult(
        task=task,
        id=str(item_id),
        status=status,
        enqueued_at=stored.created_at,
        started_at=stored.started_at,
        finished_at=stored.updated_at if finished else None,
        last_attempted_at=stored.last_attempted_at,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=alias,
        errors=errors,
        worker_ids=worker_ids,
    )
    if status == TaskResultStatus.SUCCESSFUL and stored.return_value is not None:
        object.__setattr__(result, "_return_value", json.loads(stored.return_value))
    return result
