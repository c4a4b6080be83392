"""The outage's lines from real connections: a connection the pool discards as lost (its
warning comes before the failure of the statement that lost it reaches the worker) begins the
outage with its server's error, and a session says which server it reached."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest
from django.db import connections

from workers.liveness_lock import session_params
from workers.outage import Outage, fold_driver_warnings, server_of
from wqcore.logs import event_text

pytestmark = pytest.mark.usefixtures("committed")


def _terminate(pid: int) -> None:
    try:
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
    finally:
        connections["admin"].close()


def test_a_connection_the_pool_discards_as_lost_is_the_outages_first_line(caplog) -> None:
    async def lost() -> tuple[psycopg.AsyncConnection[object], str]:
        conn = await psycopg.AsyncConnection.connect(**session_params(), autocommit=True)
        server = server_of(conn)
        await asyncio.to_thread(_terminate, conn.info.backend_pid)
        with pytest.raises(psycopg.OperationalError):
            await conn.execute("SELECT 1")
        return conn, server

    conn, server = asyncio.run(lost())
    settings = connections["system"].settings_dict
    assert server.startswith(f"{settings['HOST'] or 'localhost'}:")
    outage = Outage()
    unfold = fold_driver_warnings(outage)
    try:
        with caplog.at_level(logging.INFO):
            logging.getLogger("psycopg.pool").warning("discarding closed connection: %s", conn)
    finally:
        unfold()
        asyncio.run(conn.close())
    assert outage.active
    [line] = [event_text(r) for r in caplog.records]
    assert line.startswith('database_unreachable part="pool" error="'), line
    assert "terminat" in line or "closed" in line, line
