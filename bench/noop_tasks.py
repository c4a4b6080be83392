"""No-op Django tasks for ``bench/tasks_drain.py`` (the worker imports them by path)."""

from __future__ import annotations

from django.tasks import task


@task
def noop() -> None:
    """A sync no-op: runs in the worker's handler threads."""


@task
async def anoop() -> None:
    """An async no-op: runs on the worker's event loop."""
