"""The liveness lock's session going silent (a network cut: nothing answers, nothing closes),
through a real TCP relay in front of the real server that the test cuts.

The server still holds the old session, and its lock, as it would until its TCP keepalives gave
up; the worker must not wait for that: it fences itself once a check goes unanswered, and takes
a new lock under a new key at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import psycopg
import pytest

from workers.liveness_lock import LivenessLock, session_params
from workers.outage import Outage

pytestmark = pytest.mark.usefixtures("committed")


class Relay:
    """A TCP relay to the server (its Unix socket or its host and port); ``cut()`` makes every
    connection it carries go silent, as a cut network does, while new ones get through."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.target = params
        self.cut_off = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.carrying: list[asyncio.Task[Any]] = []

    async def start(self) -> dict[str, Any]:
        self.server = await asyncio.start_server(self._carry, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return {**self.target, "host": "127.0.0.1", "port": port}

    def cut(self) -> None:
        self.cut_off.set()

    async def close(self) -> None:
        """Stop listening and end every connection it carries (the server then ends the
        silent session, and its lock with it)."""
        assert self.server is not None
        self.server.close()
        for task in self.carrying:
            task.cancel()
        await asyncio.gather(*self.carrying, return_exceptions=True)
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()
        await self.server.wait_closed()

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host = str(self.target.get("host") or "localhost")
        port = int(self.target.get("port") or 5432)
        if host.startswith("/"):
            return await asyncio.open_unix_connection(os.path.join(host, f".s.PGSQL.{port}"))
        return await asyncio.open_connection(host, port)

    async def _carry(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        cut_when_opened = self.cut_off.is_set()
        up_reader, up_writer = await self._open()
        self.writers += [writer, up_writer]
        task = asyncio.current_task()
        assert task is not None
        self.carrying.append(task)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    if self.cut_off.is_set() and not cut_when_opened:
                        await asyncio.Event().wait()  # silent: hold the bytes, close nothing
                    dst.write(data)
                    await dst.drain()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def test_a_silent_liveness_session_fences_the_worker_and_a_new_key_does_not_wait_for_it() -> None:
    async def scenario() -> None:
        direct = await asyncio.to_thread(session_params)
        relay = Relay(direct)
        lost: list[int] = []
        lock = LivenessLock(
            "host:9:cut",
            "NOOP",
            "default",
            check_s=0.1,
            grace_s=0.5,
            outage=Outage(),
            on_lost=lambda: lost.append(1) or 0,
            on_held=lambda: None,
            params=await relay.start(),
        )
        async with asyncio.timeout(60):
            assert await lock.check_once() and await lock.check_once()
            first = lock.held_epoch
            relay.cut()
            # The check goes unanswered: the worker fences itself, and holds a new lock.
            assert await lock.check_once()
            assert lost == [1] and lock.held_epoch not in (None, first)
            async with await psycopg.AsyncConnection.connect(**direct, autocommit=True) as probe:
                cursor = await probe.execute(
                    "SELECT count(*), count(*) FILTER (WHERE k = w.lock_key)"
                    " FROM (SELECT (classid::bigint << 32) | objid::bigint AS k FROM pg_locks"
                    "       WHERE locktype = 'advisory' AND granted AND database ="
                    "         (SELECT oid FROM pg_database WHERE datname = current_database())) l,"
                    " workqueue_workers_worker w WHERE w.id = 'host:9:cut'"
                )
                held, named = await cursor.fetchone() or (0, 0)
            # Both locks held: the old one by the session the server still keeps; the row
            # names the new one only, so the rescue reads it as alive.
            assert (held, named) == (2, 1)
            await lock.close()
            await relay.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("stood_still_s", [0.0, 10.0])
def test_a_killed_session_keeps_the_claims_only_when_it_can_tell_within_the_grace(
    stood_still_s: float,
) -> None:
    """Its session killed (``pg_terminate_backend``), the worker takes a new lock and asks
    which claims still hold (``on_kept``); had the grace passed since the last check that
    proved its lock (it stood still), it fences everything instead (``on_lost``)."""

    async def scenario() -> None:
        now = [0.0]
        lost: list[int] = []
        kept: list[int] = []
        lock = LivenessLock(
            "host:10:killed",
            "NOOP",
            "default",
            check_s=0.1,
            grace_s=1.0,
            outage=Outage(),
            on_lost=lambda: lost.append(1) or 0,
            on_held=lambda: None,
            holding=lambda: [],
            on_kept=lambda held, still: kept.append(1) or 0,
            clock=lambda: now[0],
        )
        direct = await asyncio.to_thread(session_params)
        async with asyncio.timeout(60):
            assert await lock.check_once() and await lock.check_once()
            first = lock.held_epoch
            async with await psycopg.AsyncConnection.connect(**direct, autocommit=True) as probe:
                assert lock._conn is not None
                pid = lock._conn.info.backend_pid
                await probe.execute("SELECT pg_terminate_backend(%s)", [pid])
            now[0] += stood_still_s
            assert await lock.check_once()  # a new lock either way
            assert lock.held_epoch not in (None, first)
            assert (len(kept), len(lost)) == ((0, 1) if stood_still_s else (1, 0))
            await lock.close()

    asyncio.run(scenario())
