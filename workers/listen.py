"""Listening: wake the worker when work is announced on its lane.

One connection on the everyday login holds ``LISTEN work_available``; each notice names a lane
(``*`` for a batch that spans lanes). A notice for this lane sets the wake event; the claim loop
also polls, so a lost connection costs latency, never work. Notices on the other channels it
listens to (``outbox_pending``) go to ``on_notice``, which also hears of each (re)connection.
Reconnects after a pause.

LISTEN needs a session of its own, which a transaction pooler does not keep (it lends a server
connection per transaction: the LISTEN would stay on one the listener no longer holds, and its
notices go to whichever client holds it next). So the listener reaches PostgreSQL itself,
through ``WORKQUEUE["LISTEN_DATABASE_ALIAS"]`` when it is set; behind a transaction pooler
(``WORKQUEUE["POOLER"]``) with none set it does not listen, and the claim loop's poll and the
sweep's relay find the work instead (at their intervals).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connections

from workers.outage import Outage, server_of
from wqcore.conf import listen_alias
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

CHANNEL = "work_available"
# The connections a Listener holds open.
CONNECTIONS = 1


def connection_kwargs() -> dict[str, Any] | None:
    """How the listener connects: the parameters of ``LISTEN_DATABASE_ALIAS`` (the everyday
    login's alias unless one is named); None behind a transaction pooler with no alias named
    (nothing to listen through)."""
    alias = listen_alias()
    if alias is None:
        return None
    params = connections[alias].get_connection_params()
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    return params


class Listener:
    def __init__(
        self,
        lane: str,
        wake: asyncio.Event,
        outage: Outage,
        *,
        on_notice: Callable[[str, str], None] | None = None,
        channels: tuple[str, ...] = (CHANNEL,),
        retry_s: float = 1.0,
    ) -> None:
        self.lane = lane
        self.wake = wake
        self.outage = outage
        self.on_notice = on_notice
        self.channels = channels
        self.retry_s = retry_s

    async def run(self, stop: asyncio.Event) -> None:
        params = await asyncio.to_thread(connection_kwargs)
        if params is None:
            log_event(
                logger,
                logging.WARNING,
                "listen_off",
                reason="pooler",
                channels=",".join(self.channels),
                hint="WORKQUEUE['POOLER'] is 'transaction' and no LISTEN_DATABASE_ALIAS is "
                "named, so work is found by the poll; name an alias that reaches the server "
                "itself to wake on notices",
            )
            await stop.wait()
            return
        while not stop.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
                    for channel in self.channels:
                        await conn.execute(f"LISTEN {channel}")
                    self.outage.connected(server_of(conn))
                    self.outage.ok()
                    # Anything announced while we were not listening.
                    self.wake.set()
                    if self.on_notice is not None:
                        for channel in self.channels:
                            if channel != CHANNEL:
                                self.on_notice(channel, "")
                    await self._relay_notices(conn, stop)
            except StopAsyncIteration:
                pass  # the server closed the connection: listen again
            except (psycopg.Error, OSError) as exc:
                if not self.outage.failed("listen", exc):
                    raise
            if not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), self.retry_s)
                except TimeoutError:
                    pass

    async def _relay_notices(
        self, conn: psycopg.AsyncConnection[object], stop: asyncio.Event
    ) -> None:
        """Relay notices until ``stop`` (or the connection fails: raised here). The stop is
        watched once per connection, not once per notice."""
        relaying = asyncio.ensure_future(self._relay(conn))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({relaying, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not relaying.done():
                relaying.cancel()
                await asyncio.gather(relaying, return_exceptions=True)
        if relaying.done() and not relaying.cancelled():
            relaying.result()  # the connection's error, if it failed

    async def _relay(self, conn: psycopg.AsyncConnection[object]) -> None:
        async for notice in conn.notifies():
            if notice.channel == CHANNEL:
                if notice.payload in (self.lane, "*"):
                    self.wake.set()
            elif self.on_notice is not None:
                self.on_notice(notice.channel, notice.payload)
