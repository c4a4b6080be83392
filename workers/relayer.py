"""The relayer: relay the outbox as soon as a commit announces rows on ``outbox_pending``.

``emit`` announces each row when its transaction commits; the listener hands the notice here,
and the relayer runs ``relay_all`` on the process's maintenance thread (notices that arrive
meanwhile fold into the next run). The sweep relays whatever this path missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from outbox.api import RelayResult, relay_all
from tenancy.contexts import AppType, new_request_context
from workers.outage import Outage
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

CHANNEL = "outbox_pending"


class InThread(Protocol):
    """Runs a call on the process's maintenance thread; its result, awaited."""

    def __call__[T](self, fn: Callable[[], T], /) -> Awaitable[T]: ...


class Relayer:
    def __init__(self, in_thread: InThread, outage: Outage, *, batch: int = 100) -> None:
        self.in_thread = in_thread
        self.outage = outage
        self.batch = batch
        self.pending = asyncio.Event()
        self.runs = 0

    def notice(self) -> None:
        """Rows were announced (or may have been, while no one listened): relay soon."""
        self.pending.set()

    def on_notice(self, channel: str, payload: str) -> None:
        """The listener's call for a notice on any of its channels: a notice of work may
        follow a relay, and one of outbox rows asks for one."""
        self.notice()

    async def run(self, stop: asyncio.Event) -> None:
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                waiting = asyncio.ensure_future(self.pending.wait())
                await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if stop.is_set():
                    return
                self.pending.clear()
                await self._relay()
        finally:
            stopping.cancel()

    async def _relay(self) -> RelayResult | None:
        rctx = new_request_context(AppType.WORKER)
        try:
            result = await self.in_thread(lambda: relay_all(rctx, batch=self.batch))
        except Exception as exc:
            if not self.outage.failed("relay", exc):
                log_event(logger, logging.ERROR, "outbox_relay_failed", exc_info=True)
            return None
        self.runs += 1
        return result
