"""The kind a workflow's runtime tests run in real ``runworker`` processes (loaded there by
``WORKER_HANDLER_MODULES=tests.runtime.workflow_kinds``; imported by the test to enqueue it).

Each run appends ``<label> <what>`` to the file its payload names: ``start`` and ``end``, and,
for a step marked ``callback``, ``parents <status>=<n>...`` as ``count_parents`` read them; for
one marked ``handed``, ``handed <label>...``: the labels its parents returned, as
``aparent_results`` read them. Each returns ``{"label": <its label>}``, its result.
"""

from __future__ import annotations

import asyncio
import os

import pydantic

from tenancy.contexts import OpContext
from workqueue import api
from workqueue.api import Kind, Payload, Run, WorkItem, handles, register


class StepPayload(Payload):
    label: str
    log: str
    sleep_s: float = pydantic.Field(default=0.0, ge=0, le=60)
    callback: bool = False
    handed: bool = False


STEP = register(Kind("TEST_STEP", StepPayload, max_attempts=3))


def _note(item: WorkItem, what: str) -> None:
    # One write per line, appended: lines from two processes do not interleave.
    line = f"{item.payload['label']} {what}\n".encode()
    fd = os.open(item.payload["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def noted(path: str) -> list[tuple[str, str]]:
    """The lines the steps wrote, in order: (label, what)."""
    try:
        with open(path) as log:
            return [tuple(line.split(" ", 1)) for line in log.read().splitlines()]  # type: ignore[misc]
    except FileNotFoundError:
        return []


@handles(STEP.name)
class StepHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> dict[str, str]:
        _note(item, "start")
        if item.payload.get("sleep_s"):
            await asyncio.sleep(item.payload["sleep_s"])
        if item.payload.get("callback"):
            counts = await api.acount_parents(ctx, item.id)
            _note(item, "parents " + " ".join(f"{s}={n}" for s, n in sorted(counts.items())))
        if item.payload.get("handed"):
            results = await api.aparent_results(ctx, item.id)
            _note(item, " ".join(["handed", *sorted(r["label"] for r in results.values())]))
        _note(item, "end")
        return {"label": item.payload["label"]}
