"""A kind whose payload carries text, so the attacks can look for it where it must not be.

Loaded by the worker the endpoint attacks run (``WORKER_HANDLER_MODULES=tests.security.kinds``)
and by the test process, to enqueue it.
"""

from __future__ import annotations

from tenancy.contexts import OpContext
from workqueue.api import Kind, Payload, Run, WorkItem, handles, register


class NotePayload(Payload):
    note: str


NOTE = register(Kind("SEC_NOTE", NotePayload, max_attempts=3))


@handles(NOTE.name)
class NoteHandler:
    async def handle(self, ctx: OpContext, item: WorkItem, run: Run) -> None:
        return None
