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
# what runs: the notice (the listener's thread claiming on the loop's offer, or relaying it to
# the loop), the claim (entered, its statement sent and back, returned with the items'
# contexts: on the listener's thread, or the loop's claim), the item's task made, the handler
# called.
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


def _around(owner: Any, name: str, before: str, after: str | None = None) -> None:
    """Wrap ``owner.name`` (sync or async) to stamp ``before`` as it is called and ``after``
    as it returns (for a claim statement's step: only steps whose statement is a claim)."""
    import inspect

    inner = getattr(owner, name)
    claims_only = name == "execute"

    def wanted(args: tuple[Any, ...]) -> bool:
        return not claims_only or args[-1].statement.name.startswith("claim")

    if inspect.iscoroutinefunction(inner):

        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            if wanted(args):
                _step(before)
            result = await inner(*args, **kwargs)
            if after and wanted(args):
                _step(after)
            return result

        setattr(owner, name, wrapped_async)
        return

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if wanted(args):
            _step(before)
        result = inner(*args, **kwargs)
        if after and wanted(args):
            _step(after)
        return result

    setattr(owner, name, wrapped)


def _trace_steps() -> None:
    from workers import calling, claiming, listen, running, woken
    from workqueue import runtime
    from wqcore import store

    listener_init = listen.Listener.__init__

    def init(self: Any, lane: str, wake: Any, *args: Any, **kwargs: Any) -> None:
        listener_init(self, lane, _StampingEvent(wake), *args, **kwargs)

    listen.Listener.__init__ = init  # type: ignore[method-assign]
    _around(woken.WokenClaims, "claim_on_notice", "notice")
    _around(runtime, "aclaim", "claim", "claimed")
    _around(claiming.ClaimLoop, "_claim_first", "claim", "claimed")
    _around(store.AsyncStore, "execute", "sent", "back")
    _around(store.OwnConnection, "execute", "sent", "back")
    _around(running.Runner, "start", "task")
    _around(calling.HandlerCalls, "call_within", "call")


if os.environ.get("BENCH_STEPS"):
    _trace_steps()
