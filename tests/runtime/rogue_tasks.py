"""Django tasks that exit or are interrupted (issue 18), run by a real ``runworker DJANGO_TASK``.

Module-level, as Django requires; the worker imports them by path. Two attempts each, the
second a second after the first, so a ``--once`` run ends after the first.
"""

from __future__ import annotations

import sys

from django.tasks import task

from workers.django_tasks.policy import retries


@task
@retries(max_attempts=2, base_s=1, factor=1, jitter=0)
def exits(code: int) -> None:
    sys.exit(code)


@task
@retries(max_attempts=2, base_s=1, factor=1, jitter=0)
def interrupted() -> None:
    raise KeyboardInterrupt


@task
@retries(max_attempts=2, base_s=1, factor=1, jitter=0)
async def exits_async(code: int) -> None:
    sys.exit(code)


@task
@retries(max_attempts=2, base_s=1, factor=1, jitter=0)
async def interrupted_async() -> None:
    raise KeyboardInterrupt


@task
def adds(a: int, b: int) -> int:
    return a + b
