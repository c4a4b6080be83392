"""The benchmark's kind and its no-op handler, for the product's workers.

Loaded by ``runworker`` subprocesses through ``WORKER_HANDLER_MODULES=ours_kinds`` (with this
folder on PYTHONPATH), the way a site loads handlers that live outside workers/, and imported by
the in-process adapter config. The handler records its start time for the wake workload.
"""

from __future__ import annotations

import os
from typing import Any

import _common as common

from tenancy.contexts import OpContext
from workqueue.runtime import Kind, Payload, Run, WorkItem, handles, register

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
            common.record_wake(item.payload.get("seq", 0), _STEPS)
            _STEPS.clear()


# -- the wake's steps (BENCH_STEPS=1) -----------------------------------------------------------
# Where the time between a commit and the handler goes: the moment (common.stamp()) each step
# of the worker's path last happened, written beside the handler's start. The wake workload
# sends one item at a time (20 ms apart, each done in a few ms), so the latest of each is the
# item's own. Installed by wrapping the worker's parts from outside, so the product's code is
# what runs: the listener's wake (the notice relayed), the claim (entered, its statement sent
# on the store and back, returned with the items' contexts) and the item's task made.
STEPS = ("notice", "claim", "sent", "back", "claimed", "task", "call")
_STEPS: dict[str, float] = {}


def _step(name: str) -> None:
    _STEPS[name] = common.stamp()


class _StampingEvent:
    """The listener's view of the worker's wake event: stamps ``notice`` as it sets it."""

    def __init__(self, event: Any) -> None:
        self.event = event

    def set(self) -> None:
        _step("notice")
        self.event.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.event, name)


def _trace_steps() -> None:
    from workers import listen, running
    from workqueue import runtime
    from wqcore import store

    listener_init = listen.Listener.__init__

    def init(self: Any, lane: str, wake: Any, *args: Any, **kwargs: Any) -> None:
        listener_init(self, lane, _StampingEvent(wake), *args, **kwargs)

    listen.Listener.__init__ = init  # type: ignore[method-assign]
    aclaim = runtime.aclaim

    async def claim(*args: Any, **kwargs: Any) -> Any:
        _step("claim")
        claimed = await aclaim(*args, **kwargs)
        _step("claimed")
        return claimed

    runtime.aclaim = claim
    execute = store.AsyncStore.execute

    async def run_step(self: Any, step: Any) -> Any:
        if not step.statement.name.startswith("claim"):
            return await execute(self, step)
        _step("sent")
        rows = await execute(self, step)
        _step("back")
        return rows

    store.AsyncStore.execute = run_step  # type: ignore[method-assign]
    start = running.Runner.start

    def start_item(self: Any, ctx: Any, item: Any, **kwargs: Any) -> None:
        _step("task")
        start(self, ctx, item, **kwargs)

    running.Runner.start = start_item  # type: ignore[method-assign]
    from workers import calling

    call_within = calling.HandlerCalls.call_within

    async def call(self: Any, *args: Any) -> Any:
        _step("call")
        return await call_within(self, *args)

    calling.HandlerCalls.call_within = call  # type: ignore[method-assign]


if os.environ.get("BENCH_STEPS"):
    _trace_steps()
