"""The store's two faces, so a contract test runs the same transitions through both."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from workqueue import api
from wqcore.store import aclose_async_store

# The transitions that come in pairs (sync on Django's connections, async on the store's own).
PAIRED = (
    "claim",
    "complete",
    "complete_many",
    "defer",
    "enqueue",
    "enqueue_many",
    "extend_lease",
    "extend_leases",
    "fail",
    "release",
    "requeue_stale",
)


async def _once(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """One async call on a fresh loop, its store's pools closed after it."""
    try:
        return await fn(*args, **kwargs)
    finally:
        await aclose_async_store()


class Face:
    def __init__(self, name: str) -> None:
        self.name = name
        for transition in PAIRED:
            if name == "sync":
                setattr(self, transition, getattr(api, transition))
            else:
                setattr(self, transition, self._async(getattr(api, f"a{transition}")))

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
