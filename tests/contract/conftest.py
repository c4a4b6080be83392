"""The store's two faces, so a contract test runs the same transitions through both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from workqueue import claim, enqueue, enqueue_many, maintenance, results, settle, statuses
from workqueue.workflows import cancel as workflow_cancel
from workqueue.workflows import declare, parents
from wqcore.store import aclose_async_store

# The transitions a contract test runs on both faces (calling one runs it on Django's
# connections, its ``aio`` on the store's own), by the module that makes them.
PAIRED = {
    "claim": claim,
    "complete": settle,
    "complete_many": settle,
    "defer": settle,
    "enqueue": enqueue,
    "enqueue_many": enqueue_many,
    "extend_lease": settle,
    "extend_leases": settle,
    "fail": settle,
    "release": settle,
    "requeue_held": maintenance,
    "requeue_stale": maintenance,
    "enqueue_workflow": declare,
    "cancel_workflow": workflow_cancel,
    "read_parents": parents,
    "count_parents": parents,
    "parent_results": parents,
    "result_of": results,
    "results_of": results,
    "status_of": statuses,
}


async def _once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One async call on a fresh loop, its store's pools closed after it."""
    try:
        return await fn(*args, **kwargs)
    finally:
        await aclose_async_store()


class Face:
    def __init__(self, name: str) -> None:
        self.name = name
        for transition, module in PAIRED.items():
            if name == "sync":
                setattr(self, transition, getattr(module, transition))
            else:
                setattr(self, transition, self._async(getattr(module, transition).aio))

    @staticmethod
    def _async(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run(_once(fn, *args, **kwargs))

        return call

    def __repr__(self) -> str:
        return f"<{self.name} face>"


@pytest.fixture(params=["sync", "async"])
def face(request: pytest.FixtureRequest) -> Face:
    """The sync face, then the async face: every test that takes it runs on both."""
    return Face(request.param)
