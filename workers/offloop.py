"""The worker's second event loop, on a thread of its own: what must go on while handlers block
the first (the lease renewals, the loop watchdog).

Async handlers run on the worker's event loop, and nothing stops one from blocking it
(``time.sleep``, a sync driver). Renewals on that loop would then stop for every item the
process holds, and other workers would run them again, overlapping. Here they run on another
loop in another thread, on the periodic primitive like every timer, with a store of their own
(one connection, on the system login: ``config.LEASE_CONNECTIONS``). A process that is alive
keeps its leases whatever its handlers do to their loop; a frozen one (SIGSTOP) stops this
thread too, and loses them as it should.

``start`` returns once the thread's loop runs; ``stop`` (from the worker's loop, after its
items are drained: the renewals must outlast them) ends the periodic tasks, closes the store's
connection and joins the thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable

from django.db import connections

from workers.periodic import PeriodicTask
from wqcore.logs import log_event
from wqcore.store import AsyncStore, aclose_async_store, use_async_store

logger = logging.getLogger(__name__)

# How long ``stop`` waits for the thread; its tasks end within one renewal's timeout.
JOIN_TIMEOUT_S = 30.0


class OffLoop:
    def __init__(
        self,
        name: str,
        tasks: Callable[[asyncio.Event], list[PeriodicTask]],
        store: Callable[[], AsyncStore],
        closing: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``tasks(stop)`` builds the periodic tasks on the thread's loop (``stop`` is that
        loop's event); ``store()`` makes the thread's store; ``closing()`` runs on that loop
        once the tasks have ended (what they opened, closed)."""
        self.name = name
        self._tasks = tasks
        self._store = store
        self._closing = closing
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def start(self) -> None:
        """Start the thread; returns once its loop runs its tasks (a moment). Raises when it
        could not: a worker without its lease keeper would lose every lease it holds."""
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._stop is None or not self._thread.is_alive():
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"the {self.name} thread did not start (its error is logged)")

    async def stop(self) -> None:
        """End the periodic tasks (each finishes the run it is in), close the thread's
        connections and join it."""
        if self._thread is None:
            return
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # its loop has ended already
                pass
        await asyncio.to_thread(self._thread.join, JOIN_TIMEOUT_S)
        if self._thread.is_alive():
            log_event(logger, logging.WARNING, "thread_did_not_stop", thread=self.name)
        self._thread = None

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except Exception:
            log_event(logger, logging.ERROR, "thread_failed", exc_info=True, thread=self.name)
        finally:
            self._ready.set()  # never leave start() waiting
            connections.close_all()  # any Django connection this thread opened

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        use_async_store(self._store())
        try:
            stop = asyncio.Event()
            tasks = self._tasks(stop)
            self._stop = stop
            self._ready.set()
            await asyncio.gather(*(task.run() for task in tasks))
        finally:
            try:
                if self._closing is not None:
                    await self._closing()
            finally:
                await aclose_async_store()
