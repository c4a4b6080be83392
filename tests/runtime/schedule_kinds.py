"""A kind and a schedule for tests that run real ``runworker`` and ``manage.py sweep``
processes: loaded by the subprocesses only (``WORKER_HANDLER_MODULES``), never by the test
process, whose own sweeps must not meet this schedule.

``TEST_SCHEDULE_EVERY_S`` (the environment) sets the schedule's interval; the site's tenant is
``SCHEDULE_TENANT``, as any multi-tenant site names it.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from tenancy.contexts import OpContext
from workers.schedules import Schedule, register_schedule
from workqueue.api import Kind, Payload, Run, WorkItem, handles, register


class TickPayload(Payload):
    tick: str


TICK = register(Kind("TEST_TICK", TickPayload, max_attempts=3))

EVERY = register_schedule(
    Schedule(
        "test-tick",
        TICK.name,
        every=timedelta(seconds=float(os.environ.get("TEST_SCHEDULE_EVERY_S", "1"))),
        payload=lambda tick: {"tick": tick.isoformat()},
    )
)


@handles(TICK.name)
class TickHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        datetime.fromisoformat(item.payload["tick"])  # the tick it was enqueued for
