"""Django tasks the tests enqueue and the workers (in process and ``runworker``) import by path.

Module-level, as Django requires; each does one thing a test looks for.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import uuid

from tenancy.current import current_context
from workers.demo.models import Shipment
from workers.django_tasks.compat import TaskContext, task
from workers.django_tasks.policy import retries
from workers.django_tasks.progress import progress, set_meta
from workers.django_tasks.workflows import (
    aparent_counts,
    aparent_results,
    parent_counts,
    parent_results,
)
from workqueue.api import PermanentError

# What the in-process tasks saw, in order: (task, value).
SEEN: list[tuple[str, object]] = []


@task
def add(a: int, b: int) -> int:
    return a + b


@task
async def async_add(a: int, b: int) -> dict[str, object]:
    await asyncio.sleep(0)
    # On the worker's loop, in its main thread.
    return {"sum": a + b, "loop": asyncio.get_running_loop().is_running()}


@task
def note(label: str) -> str:
    SEEN.append(("note", label))
    return label


@task(takes_context=True)
@retries(base_s=0.05, jitter=0)
def flaky(context: TaskContext, fail_times: int) -> dict[str, object]:
    """Raises on its first ``fail_times`` attempts, then returns what it saw."""
    if context.attempt <= fail_times:
        raise ConnectionError(f"attempt {context.attempt} fails")
    return {"attempt": context.attempt, "result_id": context.task_result.id}


@task(takes_context=True)
@retries(base_s=30, jitter=0)
def fails_first_then_waits(context: TaskContext) -> int:
    """Raises on its first attempt: its retry waits its own 30 s, not the kind's policy."""
    if context.attempt == 1:
        raise ConnectionError("try again in half a minute")
    return context.attempt


@task
@retries(max_attempts=2, base_s=0.05, jitter=0)
def always_fails(message: str) -> None:
    raise ValueError(message)


@task
def refuses() -> None:
    raise PermanentError("this input can never succeed")


@task
def returns_a_datetime() -> object:
    return datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


@task(takes_context=True)
@retries(base_s=0.05, jitter=0)
def books_then_fails_once(context: TaskContext, reference: str) -> int:
    """Writes a shipment in its tenant, then raises on the first attempt: the write must be
    rolled back with it, so the retry writes the only one."""
    ctx = current_context()
    assert ctx is not None
    Shipment.objects.create(org_id=ctx.org_id, reference=reference, recipient_email="r@example.com")
    if context.attempt == 1:
        raise RuntimeError("failed after writing")
    return Shipment.objects.filter(reference=reference).count()


@task
def enqueues_add(a: int, b: int) -> str:
    """Enqueues another task from inside a task: the item's context is the current one."""
    return add.enqueue(a, b).id


@task
def tenant_of_the_run() -> str:
    ctx = current_context()
    return str(ctx.org_id) if ctx else ""


@task
def sleeps(seconds: float) -> None:
    import time

    time.sleep(seconds)


@task
def sleeps_then_tells(seconds: float) -> str:
    """Sleeps, then answers the database's clock as it ends (the record's clock)."""
    import time

    from django.db import connection

    time.sleep(seconds)
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0].isoformat()


def plain_function() -> str:
    """Not a task: a path naming it must never run."""
    SEEN.append(("plain_function", "ran"))
    return "ran"


def _impl() -> int:
    return 1


# Bound under another name: its module path (tests.tasks._impl) leads to the bare function.
renamed = task(_impl)

# A random id no item has.
UNKNOWN_ID = str(uuid.UUID(int=1))


@task
def debug_setting() -> bool:
    """What the worker that runs it has for ``settings.DEBUG`` (runworker leaves it alone)."""
    from django.conf import settings

    return bool(settings.DEBUG)


@task
def counts_rows(rows: int) -> int:
    """Reports each row it counts, then what it found."""
    for n in range(1, rows + 1):
        progress(n, rows, note="counting")
    set_meta({"rows": rows, "how": "sync"})
    return rows


@task
async def async_counts_rows(rows: int) -> int:
    """``counts_rows`` on the worker's event loop."""
    for n in range(1, rows + 1):
        progress(n, rows, note="counting")
        if n % 1000 == 0:
            await asyncio.sleep(0)
    set_meta({"rows": rows, "how": "async"})
    return rows


def _note(log: str, label: str, what: str) -> None:
    """Append ``<label> <what>`` to the file ``log`` (none: ``""``), one write a line, so the
    lines of two worker processes never interleave."""
    if not log:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{label} {what}\n".encode())
    finally:
        os.close(fd)


def noted(log: str) -> list[tuple[str, str]]:
    """The lines the tasks appended to ``log``, in order: (label, what)."""
    try:
        with open(log) as lines:
            return [tuple(line.split(" ", 1)) for line in lines.read().splitlines()]  # type: ignore[misc]
    except FileNotFoundError:
        return []


@task
def adds_to_parents(log: str, label: str, plus: int) -> int:
    """A workflow's step: the sum of what the steps before it returned, plus ``plus``; notes
    its start, what it was handed and its end in ``log``."""
    _note(log, label, "start")
    handed = parent_results()
    _note(log, label, f"handed {json.dumps(sorted(handed.values()))}")
    _note(log, label, "end")
    return sum(handed.values()) + plus


@task
async def async_adds_to_parents(log: str, label: str, plus: int) -> int:
    """``adds_to_parents`` on the worker's event loop."""
    _note(log, label, "start")
    handed = await aparent_results()
    _note(log, label, f"handed {json.dumps(sorted(handed.values()))}")
    _note(log, label, "end")
    return sum(handed.values()) + plus


@task
def reports_parents(log: str, label: str) -> dict[str, int]:
    """A group's callback: how its members ended, noted in ``log`` and returned."""
    counts = parent_counts()
    _note(log, label, f"counts {json.dumps(counts, sort_keys=True)}")
    return counts


@task
async def async_reports_parents(log: str, label: str) -> dict[str, int]:
    """``reports_parents`` on the worker's event loop."""
    counts = await aparent_counts()
    _note(log, label, f"counts {json.dumps(counts, sort_keys=True)}")
    return counts


@task
async def reads_parents_without_await() -> object:
    """Calls the sync helper from an async task: refused, naming the async one."""
    return parent_results()
