"""Errors of the ``django.tasks`` backend's worker side: what a task's attempt ends with."""

from __future__ import annotations

from workqueue.runtime import PermanentError, RetryableError


class TaskRaised(RetryableError):
    """The task raised: it runs again after its retry policy's delay, until its attempts are
    spent (then it is a dead letter)."""


class TaskFailed(PermanentError):
    """The task cannot succeed by running again: dead-lettered at once, never retried.

    Raised for a task that itself raised ``workqueue.handlers.PermanentError``, and by the
    subclasses below.
    """


class TaskNotRunnable(TaskFailed):
    """The item names no task this worker can run: its path does not import, names something
    that is not a ``@task``, or names a ``TASKS`` backend that is not this queue."""


class InvalidReturnValue(TaskFailed, TypeError):
    """The task returned a value that cannot be stored as JSON (it would return the same
    again, after repeating its side effects). A ``TypeError``, as Django's own backends record
    for a return value JSON cannot hold, so code that looks for one finds it."""


class DeadLettered(Exception):
    """Stands in a result's errors for a dead letter no error of the task explains: its lease
    ran out with its attempts spent (a worker died or hung), its tenant is gone, or an operator
    failed it. Its traceback is the queue's note. Never raised."""
