"""Handlers that misbehave (issue 18), for tests that run ``runworker`` as a real subprocess.

A subprocess loads them through ``WORKER_HANDLER_MODULES=tests.runtime.rogue_kinds``; the test
process imports this module too, to enqueue them. Each run appends a line to the file its
payload names (``log``) before it misbehaves, and another when it returns: ``<item id>
<attempt> <pid> start|end``, so a test counts the runs of each item and tells its workers apart.

- ``TEST_ROGUE``: an async handler, on the worker's event loop.
- ``TEST_ROGUE_SYNC``: a sync handler, in the worker's handler threads.
- ``TEST_ROGUE_THREAD``: an async handler that hands the work to ``run.in_thread``.

The ``action``: ``ok``; ``sys_exit`` (``sys.exit(3)``), ``exit`` (the ``exit(3)`` of scripts),
``keyboard_interrupt``, ``generator_exit``; ``subtask_exit`` (async only: a task the handler
gathers calls ``sys.exit(4)``); ``block`` (``time.sleep(seconds)``, on the loop for
``TEST_ROGUE``); ``sleep`` (``asyncio.sleep(seconds)``, async only; ``sleep_first``: on the
first attempt only, later ones return at once).
"""

from __future__ import annotations

import asyncio
import builtins
import os
import sys
import time

import pydantic

from tenancy.contexts import OpContext
from workqueue.api import Kind, Payload, RetryPolicy, Run, WorkItem, handles, register


class RoguePayload(Payload):
    action: str = "ok"
    log: str = ""
    seconds: float = pydantic.Field(default=0.0, ge=0, le=600)


# Two attempts, the second about a second after the first: a test sees the retry path through
# to the dead letter, and a --once run ends before the retry is due.
RETRY = RetryPolicy(base_s=1.0, factor=1.0, cap_s=1.0, jitter=0)
ROGUE = register(Kind("TEST_ROGUE", RoguePayload, max_attempts=2, retry=RETRY))
ROGUE_SYNC = register(Kind("TEST_ROGUE_SYNC", RoguePayload, max_attempts=2, retry=RETRY))
ROGUE_THREAD = register(Kind("TEST_ROGUE_THREAD", RoguePayload, max_attempts=2, retry=RETRY))
KINDS = ",".join(kind.name for kind in (ROGUE, ROGUE_SYNC, ROGUE_THREAD))


def _note(item: WorkItem, what: str) -> None:
    path = item.payload.get("log")
    if path:
        with open(path, "a") as log:
            log.write(f"{item.id} {item.attempts} {os.getpid()} {what}\n")


def _misbehave(item: WorkItem) -> None:
    """What every handler does, on whatever thread it runs."""
    action = item.payload.get("action", "ok")
    if action == "sys_exit":
        sys.exit(3)
    if action == "exit":
        builtins.exit(3)  # the builtin scripts call: raises SystemExit(3)
    if action == "keyboard_interrupt":
        raise KeyboardInterrupt
    if action == "generator_exit":
        raise GeneratorExit("raised by the handler")
    if action == "block":
        time.sleep(item.payload.get("seconds", 0.0))


async def _exits_soon() -> None:
    await asyncio.sleep(0)
    sys.exit(4)


@handles(ROGUE.name)
class RogueHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        _note(item, "start")
        action = item.payload.get("action", "ok")
        if action == "subtask_exit":
            await asyncio.gather(_exits_soon())
        elif action == "sleep" or (action == "sleep_first" and item.attempts == 1):
            await asyncio.sleep(item.payload.get("seconds", 0.0))
        else:
            _misbehave(item)  # a block blocks the event loop
        _note(item, "end")


@handles(ROGUE_SYNC.name)
class RogueSyncHandler:
    def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        _note(item, "start")
        _misbehave(item)
        _note(item, "end")


@handles(ROGUE_THREAD.name)
class RogueThreadHandler:
    uses_threads = True

    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        _note(item, "start")
        await run.in_thread(_misbehave, item)
        _note(item, "end")


def runs(path: str) -> list[tuple[str, int, int, str]]:
    """The lines the handlers wrote: (item id, attempt, pid, start|end)."""
    try:
        with open(path) as log:
            lines = log.read().splitlines()
    except FileNotFoundError:
        return []
    return [(i, int(a), int(p), what) for i, a, p, what in (line.split() for line in lines)]
