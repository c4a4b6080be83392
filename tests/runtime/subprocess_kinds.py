"""Kinds and handlers for tests that run ``runworker`` as a real subprocess.

A subprocess loads them through ``WORKER_HANDLER_MODULES=tests.runtime.subprocess_kinds``
(``subprocess_env(handlers=True)``); the test process imports this module too, to enqueue them.
"""

from __future__ import annotations

import asyncio
import os

import pydantic

from tenancy.contexts import OpContext
from workers.handlers import Run, handles
from workqueue.api import Kind, Payload, WorkItem, register


class SlowOncePayload(Payload):
    # Seconds the first attempt sleeps (a worker killed meanwhile leaves the item claimed);
    # later attempts finish at once.
    first_attempt_s: float = pydantic.Field(default=60.0, ge=0, le=3600)


SLOW_ONCE = register(Kind("TEST_SLOW_ONCE", SlowOncePayload, max_attempts=5))


@handles(SLOW_ONCE.name)
class SlowOnceHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        if item.attempts == 1:
            await asyncio.sleep(item.payload.get("first_attempt_s", 60.0))


# -- the claim's controls (tests/runtime/test_controls.py) ---------------------------------------
# Each run is recorded in RUNS_TABLE (made by the test, on the everyday login): at its start,
# with how many items of its key (or kind) the database then holds claimed, and at its end, both
# stamped by the database's clock (one clock for every worker process).
RUNS_TABLE = "runtime_control_runs"


class ControlledPayload(Payload):
    n: int = 0
    sleep_s: float = pydantic.Field(default=0.05, ge=0, le=60)


KEYED = Kind("TEST_KEYED", ControlledPayload, lane="keyed", max_attempts=3)
CAPPED_RUN = Kind(
    "TEST_CAPPED_RUN", ControlledPayload, lane="capped_run", max_attempts=3, max_running=3
)
# Registered in the runworker subprocess (which loads this module as a handler module), and in
# the test process only while a test of them runs (tests/runtime/test_controls.py): registered
# at import, their lanes and the cap would be every other test's.
if __name__ in os.environ.get("WORKER_HANDLER_MODULES", ""):
    register(KEYED)
    register(CAPPED_RUN)


def _record(item: WorkItem, event: str, running_sql: str, running_arg: object) -> None:
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RUNS_TABLE} (item_id, n, event, running, at)"
            f" SELECT %s, %s, %s, ({running_sql}), clock_timestamp()",
            [str(item.id), item.payload.get("n", 0), event, running_arg],
        )


def _count_claimed_sql(column: str) -> str:
    # Through the definer function the test made: the everyday login sees only its tenant's rows.
    return f"SELECT runtime_claimed_{column}(%s)"


class _Recording:
    column = "key"

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        import time

        arg = item.concurrency_key if self.column == "key" else item.kind
        _record(item, "start", _count_claimed_sql(self.column), arg)
        time.sleep(item.payload.get("sleep_s", 0.05))
        _record(item, "end", _count_claimed_sql(self.column), arg)


@handles(KEYED.name)
class KeyedHandler(_Recording):
    column = "key"


@handles(CAPPED_RUN.name)
class CappedHandler(_Recording):
    column = "kind"
