"""The NOOP kind and its handler: nothing to do (benchmarks and smoke tests)."""

from __future__ import annotations

import asyncio
import time

import pydantic

from tenancy.contexts import OpContext
from workqueue.api import Kind, Payload, Run, WorkItem, handles, register


class NoopPayload(Payload):
    """Nothing to do."""

    n: int | None = None
    # Wall-clock time of the enqueue's commit, for latency benchmarks.
    sent_at: float | None = None
    # Seconds to spend "working" (async sleep), for shutdown and lease tests.
    sleep_s: float | None = pydantic.Field(default=None, ge=0, le=3600)


NOOP = register(Kind("NOOP", NoopPayload, max_attempts=3, description="does nothing"))

# Wake latencies seen by this process (seconds from the enqueue's commit to the handler's start),
# when the payload carries ``sent_at``; the benchmark reads them.
LATENCIES: list[float] = []


@handles(NOOP.name)
class NoopHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        sent_at = item.payload.get("sent_at")
        if sent_at is not None:
            LATENCIES.append(time.time() - sent_at)
        if item.payload.get("sleep_s"):
            await asyncio.sleep(item.payload["sleep_s"])
