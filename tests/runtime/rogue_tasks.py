"""Django tasks that exit or are interrupted (issue 18), run by a real ``runworker DJANGO_TASK``.

Module-level, as Django requires; the worker imports them by path. Two attempts each, the
second a second after the first, so a ``--once`` run ends after the first.
"""

from __future__ import annotations

import asyncio
import sys
import time

from workers.django_tasks.compat import task
from workers.django_tasks.policy import retries, time_limit


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


@task
@retries(max_attempts=2, base_s=1, factor=1, jitter=0)
@time_limit(1)
async def sleeps_async(seconds: float) -> None:
    await asyncio.sleep(seconds)


@task
@retries(max_attempts=2, base_s=1, factor=1, jitter=0)
@time_limit(1)
def sleeps(seconds: float) -> None:
    time.sleep(seconds)  # a thread: abandoned past its limit, and runs on to its end
