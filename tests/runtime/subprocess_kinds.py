"""Kinds and handlers for tests that run ``runworker`` as a real subprocess.

A subprocess loads them through ``WORKER_HANDLER_MODULES=tests.runtime.subprocess_kinds``
(``subprocess_env(handlers=True)``); the test process imports this module too, to enqueue them.
"""

from __future__ import annotations

import asyncio
import logging

import pydantic

from tenancy.contexts import OpContext
from workers.handlers import PermanentError, Run, handles
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


class LoggedPayload(Payload):
    # Fail for good (a dead letter) instead of returning.
    fail: bool = False


LOGGED = register(Kind("TEST_LOGGED", LoggedPayload, max_attempts=1))
_handler_logger = logging.getLogger("tests.runtime.subprocess_kinds")


@handles(LOGGED.name)
class LoggedHandler:
    """A sync handler (it runs in a thread) that logs a line of its own, then returns or fails."""

    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        _handler_logger.info("handler_says_hello")
        if item.payload.get("fail"):
            raise PermanentError("no such shipment\nsecond line of the message")
