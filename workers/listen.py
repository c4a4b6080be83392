"""Listening: wake the worker when work is announced on its lane.

One connection on the everyday login holds ``LISTEN work_available``, on a thread of its own
(a sync connection, as the raw floor's worker waits: bench/RESULTS.md); each notice names a lane
(``*`` for a batch that spans lanes). A notice for this lane claims on the claim loop's standing
offer, from this thread (``woken.py``: the shortest path to a handler), or, with none standing,
sets the wake event on the worker's loop; the claim loop also polls, so a lost connection costs
latency, never work. Notices on the other channels it listens to (``outbox_pending``) go to
``on_notice`` on the loop, which also hears of each (re)connection. Reconnects after a pause.

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
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connections

from workers.outage import Outage, server_of
from workers.woken import WokenClaims
from wqcore.appname import named
from wqcore.conf import libpq_params, listen_alias
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

CHANNEL = "work_available"
# The connections a Listener holds open (its LISTEN session), and those its thread's woken
# claims do (one of its own, on the system login: ``woken.py``).
CONNECTIONS = 1
WOKEN_CLAIM_CONNECTIONS = 1
# How often the thread looks whether the listener is stopping, between notices.
STOP_CHECK_S = 0.25
# How long the stop waits for the thread: it ends within STOP_CHECK_S, or a claim's time.
JOIN_TIMEOUT_S = 30.0


def connection_kwargs() -> dict[str, Any] | None:
    """How the listener connects: the parameters of ``LISTEN_DATABASE_ALIAS`` (the everyday
    login's alias unless one is named); None behind a transaction pooler with no alias named
    (nothing to listen through). The keepalives and user timeout in effect unless the alias's
    OPTIONS set their own: a LISTEN connection is idle, and only they notice its server gone."""
    alias = listen_alias()
    if alias is None:
        return None
    return named(libpq_params(alias), "listener")


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
        claims: WokenClaims | None = None,
    ) -> None:
        """``claims``: the claim loop's offers, claimed on from this listener's thread."""
        self.lane = lane
        self.wake = wake
        self.outage = outage
        self.on_notice = on_notice
        self.channels = channels
        self.retry_s = retry_s
        self.claims = claims
        self._stopping = threading.Event()
        # Set while the listener holds its LISTEN (and its claim connection is ready).
        self.listening = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Whether a wake is on its way to the loop: notices that come faster than the loop
        # runs send one, not one each.
        self._waking = False

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
        self._loop = asyncio.get_running_loop()
        thread = threading.Thread(target=self._main, args=(params,), name="worker-listen")
        thread.daemon = True
        thread.start()
        try:
            await stop.wait()
        finally:
            self._stopping.set()
            await asyncio.to_thread(thread.join, JOIN_TIMEOUT_S)
            if thread.is_alive():
                log_event(logger, logging.WARNING, "thread_did_not_stop", thread=thread.name)

    def _main(self, params: dict[str, Any]) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    with psycopg.connect(**params, autocommit=True) as conn:
                        for channel in self.channels:
                            conn.execute(f"LISTEN {channel}")
                        self.outage.connected(server_of(conn))
                        self.outage.ok()
                        self._connected()
                        if self.claims is not None:
                            self.claims.prepare()
                        self.listening.set()
                        try:
                            self._relay(conn)
                        finally:
                            self.listening.clear()
                except (psycopg.Error, OSError) as exc:
                    if not self.outage.failed("listen", exc):
                        log_event(logger, logging.ERROR, "listen_failed", exc_info=True)
                self._stopping.wait(self.retry_s)
        finally:
            # This thread's connections (the woken claim's, and Django's if it opened one).
            if self.claims is not None:
                self.claims.close()
            connections.close_all()

    def _connected(self) -> None:
        # Anything announced while we were not listening.
        self._wake()
        if self.on_notice is not None:
            for channel in self.channels:
                if channel != CHANNEL:
                    self._to_loop(self.on_notice, channel, "")

    def _relay(self, conn: psycopg.Connection[Any]) -> None:
        """Relay notices until the stop (or the connection fails: raised here)."""
        while not self._stopping.is_set():
            for notice in conn.notifies(timeout=STOP_CHECK_S):
                if notice.channel == CHANNEL:
                    if notice.payload in (self.lane, "*"):
                        if self.claims is None or not self.claims.claim_on_notice():
                            self._wake()
                elif self.on_notice is not None:
                    self._to_loop(self.on_notice, notice.channel, notice.payload)

    def _wake(self) -> None:
        if not self._waking:
            self._waking = True
            self._to_loop(self._set_wake)

    def _set_wake(self) -> None:
        self._waking = False
        self.wake.set()

    def _to_loop(self, fn: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop has ended (the worker is stopping)
            pass
