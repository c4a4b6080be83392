"""The noop worker: does nothing, for benchmarks and smoke tests."""

from __future__ import annotations

import asyncio
import time

from tenancy.contexts import OpContext
from workers.handlers import Run, handles
from workers.noop.kind import NOOP
from workqueue.api import WorkItem

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
