"""The benchmark's kind and its no-op handler, for the product's workers.

Loaded by ``runworker`` subprocesses through ``WORKER_HANDLER_MODULES=ours_kinds`` (with this
folder on PYTHONPATH), the way a site loads handlers that live outside workers/, and imported by
the in-process adapter config. The handler records its start time for the wake workload.
"""

from __future__ import annotations

import _common as common

from tenancy.contexts import OpContext
from workers.handlers import Run, handles
from workqueue.api import Kind, Payload, WorkItem, register

KIND = "BENCH_NOOP"


class BenchPayload(Payload):
    seq: int = 0
    # Items that only fill a backlog (the fairness workload's tenant A) record nothing.
    quiet: bool = False


register(Kind(KIND, BenchPayload, max_attempts=3))
# The depth workload's kind with a cap of its own (the kind_capped config): the claim then
# counts what the lane holds, one claimer of the lane at a time.
CAPPED_KIND = "BENCH_CAPPED"
register(Kind(CAPPED_KIND, BenchPayload, max_attempts=3, max_running=1000))


@handles(CAPPED_KIND)
@handles(KIND)
class BenchHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        if not item.payload.get("quiet"):
            common.record_wake(item.payload.get("seq", 0))
